"""bf16 CPU matmul layouts: the fastest candidate is chosen, remembered per machine, and changes no result."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.accel.fakes import bf16_close, fake_timer
from tetraformer.accel.chooser import (
    CANDIDATES,
    NATURAL,
    ROUNDS,
    LayoutChooser,
    bucket,
    layout_calls,
    machine_key,
    matmul,
    operands,
    time_call,
)

SHAPE = (40, 24, 56)  # (M, N, K)


@pytest.mark.parametrize("product", list(NATURAL))
def test_chooses_the_faster_candidate(product: str, tmp_path: Path) -> None:
    """Whichever candidate the timer says is fastest is chosen, for every product."""
    for fastest in CANDIDATES[product]:
        chooser = LayoutChooser(fake_timer({product: fastest}), tmp_path / f"{fastest}.json")
        assert chooser.layout(product, SHAPE) == fastest


def test_natural_layout_kept_unless_clearly_slower(tmp_path: Path) -> None:
    """A re-laid candidate only 5% faster than the natural layout is not worth its copies."""

    def timer(key: str, name: str, call: object, best: float) -> float:
        return 1.0 if name == NATURAL[key.split()[0]] else 0.95

    assert LayoutChooser(timer, tmp_path / "l.json").layout("dx", SHAPE) == NATURAL["dx"]


def test_choices_persist_per_machine_and_shape_bucket(tmp_path: Path) -> None:
    """A choice is timed once, written to the file, and read back by a new process without timing again."""
    calls: list[tuple[str, str]] = []
    path = tmp_path / "layouts.json"
    chooser = LayoutChooser(fake_timer({"fwd": "cr"}, calls), path)
    assert chooser.layout("fwd", (1000, 24, 56)) == "cr"
    assert chooser.layout("fwd", (1024, 24, 56)) == "cr"  # same power-of-two bucket of rows: no new timing
    assert len(calls) == ROUNDS * len(CANDIDATES["fwd"])  # each candidate once a pass
    assert json.loads(path.read_text()) == {machine_key(): {"fwd 1024x24x56": "cr"}}

    def never(*args: object) -> float:
        raise AssertionError("a cached shape was timed again")

    assert LayoutChooser(never, path).layout("fwd", (999, 24, 56)) == "cr"


def test_cache_file_follows_tetraformer_cache_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Without a path the chooser writes $TETRAFORMER_CACHE_DIR/matmul_layouts.json."""
    monkeypatch.setenv("TETRAFORMER_CACHE_DIR", str(tmp_path / "cache"))
    assert LayoutChooser(fake_timer({"dw": "rc"})).layout("dw", SHAPE) == "rc"
    assert json.loads((tmp_path / "cache" / "matmul_layouts.json").read_text()) == {
        machine_key(): {"dw 64x24x56": "rc"}
    }


def test_unreadable_cache_is_ignored(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A corrupt cache file is warned about and rewritten; it never stops a run."""
    path = tmp_path / "layouts.json"
    path.write_text("{not json")
    assert LayoutChooser(fake_timer({"dx": "rc"}), path).layout("dx", SHAPE) == "rc"
    assert "ignoring the kernel choice cache" in caplog.text
    assert json.loads(path.read_text())[machine_key()] == {"dx 64x24x56": "rc"}


def test_forced_modes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """TETRAFORMER_BF16_LAYOUT=natural|transposed skips the timing; anything else is refused."""
    chooser = LayoutChooser(fake_timer({"fwd": "cr"}), tmp_path / "l.json")
    monkeypatch.setenv("TETRAFORMER_BF16_LAYOUT", "natural")
    assert chooser.layout("fwd", SHAPE) == NATURAL["fwd"]
    monkeypatch.setenv("TETRAFORMER_BF16_LAYOUT", "transposed")
    assert chooser.layout("dx", SHAPE) == "cr"
    monkeypatch.setenv("TETRAFORMER_BF16_LAYOUT", "fast")
    with pytest.raises(ValueError, match="TETRAFORMER_BF16_LAYOUT"):
        chooser.layout("fwd", SHAPE)


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

    chooser = LayoutChooser(timer, tmp_path / "l.json", margin=1.25)
    assert chooser.pick("key", "default", lambda: {"default": object, "other": object}) == "default"
    assert order == ["default", "other", "other", "default"][: 2 * ROUNDS]
