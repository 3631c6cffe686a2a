"""`--trainer.precision auto`: the precision this machine runs natively, chosen before the Trainer is built.

bf16 autocast is about 2x fp32 on a CPU with bf16 matmul units (AVX-512 BF16, AMX, Arm's BF16 extension) and
several times slower than fp32 on one without (AVX2: 9 against 50-68 tokens/s), so a config that names bf16-mixed
is fast on one machine and slow on the next. `auto` takes bf16-mixed where the hardware has bf16 (a CPU by its
/proc/cpuinfo flags, a CUDA GPU by its compute capability), 16-mixed on a CUDA GPU without bf16, 32-true
elsewhere, and says so in one line. A resumed fit keeps the precision its checkpoint trained with (the payload's
PRECISION_KEY), so moving a run to another machine never changes its numerics unasked.
"""

from __future__ import annotations

import inspect
import logging
from typing import Any, Literal

import torch
from lightning.pytorch import Trainer
from lightning.pytorch.utilities import rank_zero_only

from tetraformer.accel.chooser import bf16_cpu_flag

log = logging.getLogger(__name__)
AUTO = "auto"
LIGHTNING_PRECISION = inspect.signature(Trainer.__init__).parameters["precision"].annotation  # its values, or None
PrecisionSetting = Literal["auto"] | LIGHTNING_PRECISION
ALIASES = {"32": "32-true", "16": "16-mixed", "bf16": "bf16-mixed", "64": "64-true"}  # as Lightning reads them
CUDA_ONLY = ("16-mixed", "transformer-engine", "transformer-engine-float16")  # Lightning runs these on CUDA only
PIN = "pin it with --trainer.precision 32-true or bf16-mixed"


def unified(precision: Any) -> str:
    """A precision as Lightning names it after construction: 32 and "32" -> "32-true", None -> "32-true"."""
    text = "32" if precision is None else str(precision)
    return ALIASES.get(text, text)


def runs_on_cuda(accelerator: Any) -> bool:
    """Whether the Trainer's accelerator setting puts the run on a CUDA GPU."""
    name = str(accelerator).lower()
    return name in ("cuda", "gpu") or (name == AUTO and torch.cuda.is_available())


def native_precision(accelerator: Any = AUTO, flags: list[str] | None = None) -> tuple[str, str]:
    """(precision, why) that this machine runs fastest without changing what the model learns: bf16-mixed where
    the hardware has bf16, 16-mixed on a CUDA GPU without it, else 32-true. `flags` default to this CPU's."""
    if runs_on_cuda(accelerator):
        name = torch.cuda.get_device_name()
        if torch.cuda.is_bf16_supported(including_emulation=False):
            return "bf16-mixed", f"{name} runs bf16 natively"
        return "16-mixed", f"{name} has no bf16 units: fp16 with a gradient scaler"
    if str(accelerator).lower() not in ("cpu", AUTO):
        return "32-true", f"no bf16 rule for accelerator {accelerator!r}"
    flag = bf16_cpu_flag(flags)
    if flag is not None:
        return "bf16-mixed", f"this CPU has {flag}: bf16 matmuls run natively"
    return "32-true", "this CPU has no bf16 instructions (avx512_bf16, amx_bf16 or Arm bf16): bf16 would run slower"


def chosen_precision(
    asked: Any, accelerator: Any = AUTO, resumed: str | None = None, ckpt: Any = None, flags: list[str] | None = None
) -> Any:
    """The precision a run is built with: `asked` unless it is `auto`; a fit resuming checkpoint `ckpt`, which
    trained in `resumed`, keeps that one. Says the choice (or a change of the checkpoint's numerics) in one line."""
    trained = f"the precision {ckpt} trained in"
    if asked != AUTO:
        if resumed is not None and unified(asked) != resumed:
            say(f"--trainer.precision {unified(asked)} is not {resumed}, {trained}: the resumed run's numerics change")
        return asked
    native, why = native_precision(accelerator, flags)
    if resumed is None:
        say(f"precision auto -> {native}: {why} ({PIN})", warn=False)
        return native
    if resumed in CUDA_ONLY and not runs_on_cuda(accelerator):
        say(f"precision auto -> {native}: {ckpt} trained in {resumed}, which runs on CUDA only; {why}")
        return native
    if resumed == native:
        say(f"precision auto -> {resumed}, {trained} ({why})", warn=False)
    else:
        say(
            f"precision auto -> {resumed}, {trained}, so the resumed run's numerics stay; on its own this machine "
            f"would take {native} ({why}): --trainer.precision {native} to switch"
        )
    return resumed


@rank_zero_only
def say(line: str, warn: bool = True) -> None:
    """One line from the first process of a run (a DDP launch builds a Trainer in each)."""
    log.log(logging.WARNING if warn else logging.INFO, line)


class PlatformTrainer(Trainer):
    """Lightning's Trainer that also takes `precision: auto` (what this machine runs natively, `native_precision`)."""

    def __init__(self, *, precision: PrecisionSetting = None, **kwargs: Any) -> None:
        if precision == AUTO:
            precision = chosen_precision(precision, kwargs.get("accelerator", AUTO))
        super().__init__(precision=precision, **kwargs)
