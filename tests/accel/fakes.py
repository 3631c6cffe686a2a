"""Helpers of the accel tests: a timer that runs nothing, a pretence that every candidate is exact, bf16
closeness."""

from __future__ import annotations

from collections.abc import Callable

import torch

from tetraformer.accel.chooser import Timer


def fake_timer(fastest: dict[str, str], calls: list[tuple[str, str]] | None = None) -> Timer:
    """A timer that reports 1 ms for the `fastest` candidate of each product (the key's first word) and 5 ms for
    the rest, running nothing; it records (product, candidate) in `calls`."""

    def timer(key: str, name: str, call: Callable[[], object], best: float) -> float:
        product = key.split()[0]
        if calls is not None:
            calls.append((product, name))
        return 1e-3 if name == fastest[product] else 5e-3

    return timer


def bf16_close(ours: torch.Tensor, ref: torch.Tensor) -> None:
    """Equal up to the last bf16 bit: kernels of different layouts may accumulate in a different order."""
    torch.testing.assert_close(ours.float(), ref.float(), rtol=2**-7, atol=2**-7 * ref.float().abs().max().item())


def pretend_exact(result: object, default: object) -> bool:
    """Every candidate gives the default's result: for tests of how the timing chooses (on any CPU, whatever its
    kernels sum like); the exactness rule itself is tested with the real comparison."""
    return True
