"""bf16 CPU matmul layouts: the fastest candidate is chosen, remembered per machine, and changes no result."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tests.accel.fakes import bf16_close, fake_timer, pretend_exact
from tetraformer.accel.chooser import (
    CANDIDATES,
    NATURAL,
    ROUNDS,
    LayoutChooser,
    bucket,
    layout_calls,
    layout_results,
    machine_key,
    matmul,
    operands,
    same,
    time_call,
)

SHAPE = (40, 24, 56)  # (M, N, K)


@pytest.mark.parametrize("product", list(NATURAL))
def test_chooses_the_faster_candidate(product: str, tmp_path: Path) -> None:
    """Whichever candidate the timer says is fastest is chosen, for every product."""
    for fastest in CANDIDATES[product]:
        chooser = LayoutChooser(fake_timer({product: fastest}), tmp_path / f"{fastest}.json", exact=pretend_exact)
        assert chooser.layout(product, SHAPE) == fastest


def test_natural_layout_kept_unless_clearly_slower(tmp_path: Path) -> None:
    """A re-laid candidate only 5% faster than the natural layout is not worth its copies."""

    def timer(key: str, name: str, call: object, best: float) -> float:
        return 1.0 if name == NATURAL[key.split()[0]] else 0.95

    assert LayoutChooser(timer, tmp_path / "l.json", exact=pretend_exact).layout("dx", SHAPE) == NATURAL["dx"]


def test_choices_persist_per_machine_and_shape_bucket(tmp_path: Path) -> None:
    """A choice is timed once, written to the file, and read back by a new process without timing again."""
    calls: list[tuple[str, str]] = []
    path = tmp_path / "layouts.json"
    chooser = LayoutChooser(fake_timer({"fwd": "cr"}, calls), path, exact=pretend_exact)
    assert chooser.layout("fwd", (1000, 24, 56)) == "cr"
    assert chooser.layout("fwd", (1024, 24, 56)) == "cr"  # same power-of-two bucket of rows: no new timing
    assert len(calls) == ROUNDS * len(CANDIDATES["fwd"])  # each candidate once a pass
    assert json.loads(path.read_text()) == {machine_key(): {"fwd 1024x24x56": "cr"}}

    def never(*args: object) -> float:
        raise AssertionError("a cached shape was timed again")

    assert LayoutChooser(never, path, exact=pretend_exact).layout("fwd", (999, 24, 56)) == "cr"


def test_cache_file_follows_tetraformer_cache_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Without a path the chooser writes $TETRAFORMER_CACHE_DIR/matmul_layouts-v2.json (v2: exact choices only)."""
    monkeypatch.setenv("TETRAFORMER_CACHE_DIR", str(tmp_path / "cache"))
    assert LayoutChooser(fake_timer({"dw": "rc"}), exact=pretend_exact).layout("dw", SHAPE) == "rc"
    assert json.loads((tmp_path / "cache" / "matmul_layouts-v2.json").read_text()) == {
        machine_key(): {"dw 64x24x56": "rc"}
    }


def test_unreadable_cache_is_ignored(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A corrupt cache file is warned about and rewritten; it never stops a run."""
    path = tmp_path / "layouts.json"
    path.write_text("{not json")
    assert LayoutChooser(fake_timer({"dx": "rc"}), path, exact=pretend_exact).layout("dx", SHAPE) == "rc"
    assert "ignoring the kernel choice cache" in caplog.text
    assert json.loads(path.read_text())[machine_key()] == {"dx 64x24x56": "rc"}


def test_transposed_mode_times_nothing(tmp_path: Path) -> None:
    """The `transposed` layout mode (the rule on CPUs without native bf16) is A.T @ B for every product, untimed."""

    def never(*args: object) -> float:
        raise AssertionError("a layout was timed in transposed mode")

    chooser = LayoutChooser(never, tmp_path / "l.json")
    assert [chooser.layout(p, SHAPE, "transposed") for p in NATURAL] == ["cr"] * 3


def test_a_candidate_that_differs_from_the_default_is_never_timed_or_chosen(tmp_path: Path) -> None:
    """Only candidates whose result equals the default's bit for bit are timed: a faster one that sums in another
    order (its last bit differs) is left out, however fast; one that is exact may win."""
    value = torch.arange(6.0)
    calls = {"default": value.clone, "exact": value.clone, "other": lambda: value + 1e-6}
    timed: list[str] = []

    def timer(key: str, name: str, call: object, best: float) -> float:
        timed.append(name)
        return {"default": 1.0, "exact": 0.5, "other": 0.1}[name]

    assert LayoutChooser(timer, tmp_path / "l.json").pick("key", "default", lambda: calls) == "exact"
    assert set(timed) == {"default", "exact"}


def test_nothing_is_timed_where_only_the_default_is_exact(tmp_path: Path) -> None:
    """Where every other candidate differs, the default is kept without timing (and kept in the file)."""

    def never(*args: object) -> float:
        raise AssertionError("timed")

    calls = {"default": lambda: (torch.ones(2), None), "other": lambda: (torch.ones(2, dtype=torch.float64), None)}
    chooser = LayoutChooser(never, tmp_path / "l.json", machine=lambda: "m")
    assert chooser.pick("key", "default", lambda: calls) == "default"
    assert json.loads((tmp_path / "l.json").read_text()) == {"m": {"key": "default"}}


def test_layouts_are_compared_at_the_call_and_at_both_ends_of_its_bucket() -> None:
    """A kernel may sum in another order at other rows of a bucket (oneDNN on AVX2 does), and every call in the
    bucket takes its choice: each layout's products at 300, 257 and 512 rows are what must equal nn.Linear's."""
    results = layout_results("dw", (300, 24, 56))
    assert set(results) == set(CANDIDATES["dw"])
    assert [r.shape for r in results["cr"]] == [(56, 24)] * 3  # grad_w (K, N) from 257, 300 and 512 rows
    assert [same(r, results[NATURAL["dw"]]) for r in (results[NATURAL["dw"]], (torch.zeros(1),))] == [True, False]


def test_same_compares_bits_dtypes_and_tuples() -> None:
    """Results are the same only when every tensor is torch.equal with the same dtype, tuples item by item."""
    x = torch.tensor([1.0, 2.0])
    assert same((x, None), (x.clone(), None))
    assert not same(x, x.double()) and not same(x, x + 2**-20) and not same((x,), (x, x))


@pytest.mark.parametrize("product", list(NATURAL))
def test_every_layout_computes_the_same_product(product: str) -> None:
    """Each candidate layout gives the natural layout's product (bit-exact on this small shape's kernels or
    within one bf16 rounding), and the real timer returns a positive time."""
    a, b = operands(product, SHAPE)
    for layout in ("rr", "rc", "cr", "cc"):
        bf16_close(matmul(a, b, layout), a @ b)
    assert all(time_call("k", name, call, float("inf")) > 0 for name, call in layout_calls(product, SHAPE).items())


def test_bucket_rounds_rows_up_to_a_power_of_two() -> None:
    """Row counts share a timing with every count up to the next power of two."""
    assert [bucket(m) for m in (1, 2, 3, 1000, 1024, 1025)] == [1, 2, 4, 1024, 1024, 2048]


def test_machine_key_tells_instruction_sets_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two CPUs under one model name ("AMD EPYC" on a VM: Zen 3 with AVX2, Zen 4 with AVX-512 BF16) get their own
    keys, so a cache shared between them never hands one the other's timings; a oneDNN ISA cap does too."""
    import tetraformer.accel.chooser as chooser

    monkeypatch.setattr(chooser, "cpu_model", lambda: "AMD EPYC")
    monkeypatch.setattr(chooser, "cpu_flags", lambda: ["avx2", "fma"])
    zen3 = machine_key()
    monkeypatch.setattr(chooser, "cpu_flags", lambda: ["avx2", "fma", "avx512f", "avx512_bf16"])
    assert machine_key() != zen3
    assert "avx512_bf16" in machine_key()


def test_isa_flags_read_x86_and_arm_cpuinfo() -> None:
    """x86 "flags" and Arm "Features" lines give the oneDNN-relevant sets only, in a fixed order."""
    from tetraformer.accel.chooser import isa_flags

    x86 = "model name\t: AMD EPYC\nflags\t\t: fpu sse2 fma avx2 avx512_bf16 avx512f sha_ni\n"
    assert isa_flags(x86) == ["avx2", "fma", "avx512f", "avx512_bf16"]
    assert isa_flags("processor\t: 0\nFeatures\t: fp asimd sve bf16 i8mm\n") == ["asimd", "sve", "bf16", "i8mm"]
    assert isa_flags("no flags line here") == []


def test_onednn_cap_is_part_of_the_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    """A oneDNN ISA cap changes which kernels run, so it is named in the flags (and the machine key)."""
    from tetraformer.accel.chooser import cpu_flags

    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    assert cpu_flags()[-1] == "ONEDNN_MAX_CPU_ISA=AVX2"
    assert "ONEDNN_MAX_CPU_ISA=AVX2" in machine_key()


def test_a_burst_of_load_on_one_candidate_does_not_decide(tmp_path: Path) -> None:
    """Candidates are timed in passes of alternating order and each counts its best pass: a default slowed by a
    load burst while it was first timed (2x) still wins its close race, and every pass visits every candidate."""
    order: list[str] = []
    seconds = {"default": [2.0, 1.0], "other": [0.9, 0.9]}  # per pass; the burst hits the default's first one

    def timer(key: str, name: str, call: object, best: float) -> float:
        order.append(name)
        return seconds[name][order.count(name) - 1]

    chooser = LayoutChooser(timer, tmp_path / "l.json", margin=1.25, exact=pretend_exact)
    assert chooser.pick("key", "default", lambda: {"default": object, "other": object}) == "default"
    assert order == ["default", "other", "other", "default"][: 2 * ROUNDS]
