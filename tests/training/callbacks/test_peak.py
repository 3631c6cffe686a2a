"""The measured matmul peak that MFU is taken against when the user gives none."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from tetraformer.accel.chooser import LayoutChooser
from tetraformer.training.callbacks import peak
from tetraformer.training.callbacks.throughput import Tally, Throughput


@pytest.mark.parametrize(
    ("precision", "dtype"),
    [
        ("32-true", torch.float32),
        ("bf16-mixed", torch.bfloat16),
        ("bf16-true", torch.bfloat16),
        ("16-mixed", torch.float16),
        ("64-true", torch.float32),
        (32, torch.float32),
    ],
)
def test_precision_dtype(precision: str, dtype: torch.dtype) -> None:
    """Each Lightning precision maps to the dtype its matmuls run in."""
    assert peak.precision_dtype(precision) == dtype


def test_best_call_keeps_the_fastest_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """best_call reports the fastest timed call, not the untimed first one nor the mean."""
    ticks = iter([0.0, 0.0, 5.0, 5.0, 5.5, 6.0, 6.0, 6.9, 10.0])  # start, (t0, t1), (t0, t1), clock, (t0, t1), clock
    monkeypatch.setattr(peak.time, "perf_counter", lambda: next(ticks))
    assert peak.best_call(lambda: None, torch.device("cpu"), min_s=7.0) == 0.5


@pytest.fixture
def peaks_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The peaks cache in a fresh file of its own, and no peak remembered in this process."""
    path = tmp_path / "matmul_peaks.json"
    monkeypatch.setattr(peak, "PEAKS", LayoutChooser(machine=lambda: "this machine", path=path))
    return path


def counted_probe(monkeypatch: pytest.MonkeyPatch, flops: float) -> list[torch.dtype]:
    """measure_matmuls replaced by a probe that reports `flops` and records the dtype of each call."""
    calls: list[torch.dtype] = []

    def probe(device: torch.device, dtype: torch.dtype, layouts: tuple[str, ...], min_s: float) -> dict[str, float]:
        calls.append(dtype)
        return dict.fromkeys(layouts, flops)

    monkeypatch.setattr(peak, "measure_matmuls", probe)
    return calls


def test_measured_peak_is_a_plausible_rate_and_cached(peaks_file: Path) -> None:
    """The CPU's fp32 peak is a positive, finite TFLOP/s below any CPU's reach, measured once per process."""
    first = peak.measured_peak_tflops(torch.device("cpu"), torch.float32)
    assert 1e-4 < first < 100.0
    assert peak.measured_peak_tflops(torch.device("cpu"), torch.float32) == first


def test_measuring_leaves_the_global_random_stream_alone(peaks_file: Path) -> None:
    """The probe draws its matrices from its own generator: a run's dropout masks do not depend on it, whether the
    peak is measured, read back or re-measured to correct it."""
    torch.manual_seed(3)
    expected = torch.rand(4)
    torch.manual_seed(3)
    peak.measure_matmuls(torch.device("cpu"), torch.float32, layouts=("x@W.T",), min_s=0.0)
    peak.measured_peak_tflops(torch.device("cpu"), torch.float32)
    peak.corrected_peak_tflops(torch.device("cpu"), torch.float32, 1e-6, remeasure=True)
    assert torch.equal(torch.rand(4), expected)


def test_a_peak_is_timed_once_per_machine_and_dtype(monkeypatch: pytest.MonkeyPatch, peaks_file: Path) -> None:
    """A later process (its in-memory cache cleared, a new chooser on the same file) reads the machine's peak from
    the file instead of timing again; another dtype is timed on its own."""
    calls = counted_probe(monkeypatch, 2.5e12)
    assert peak.measured_peak_tflops(torch.device("cpu"), torch.float32) == 2.5
    monkeypatch.setattr(peak, "PEAKS", LayoutChooser(machine=lambda: "this machine", path=peaks_file))
    assert peak.measured_peak_tflops(torch.device("cpu"), torch.float32) == 2.5
    assert calls == [torch.float32]
    assert peak.measured_peak_tflops(torch.device("cpu"), torch.bfloat16) == 2.5
    assert calls == [torch.float32, torch.bfloat16]
    assert sorted(json.loads(peaks_file.read_text())["this machine"]) == [
        "peak x@W.T cpu bfloat16",
        "peak x@W.T cpu float32",
    ]


@pytest.mark.parametrize("stored", ["fast", 0, -1.0, None, True], ids=["text", "zero", "negative", "null", "bool"])
def test_a_cached_peak_that_is_no_rate_is_timed_again(
    monkeypatch: pytest.MonkeyPatch, peaks_file: Path, stored: object
) -> None:
    """A hand-edited or damaged entry is not a peak: it is measured again and replaced."""
    peaks_file.write_text(json.dumps({"this machine": {"peak x@W.T cpu float32": stored}}))
    calls = counted_probe(monkeypatch, 1.5e12)
    assert peak.measured_peak_tflops(torch.device("cpu"), torch.float32) == 1.5
    assert calls == [torch.float32]
    assert json.loads(peaks_file.read_text())["this machine"]["peak x@W.T cpu float32"] == 1.5e12


def test_another_machine_times_its_own_peak(monkeypatch: pytest.MonkeyPatch, peaks_file: Path) -> None:
    """A file shared between machines (a cluster's home folder) keeps each machine's peak apart."""
    peaks_file.write_text(json.dumps({"another machine": {"peak x@W.T cpu float32": 9.0e12}}))
    calls = counted_probe(monkeypatch, 1.0e12)
    assert peak.measured_peak_tflops(torch.device("cpu"), torch.float32) == 1.0
    assert calls == [torch.float32]
    assert json.loads(peaks_file.read_text())["another machine"] == {"peak x@W.T cpu float32": 9.0e12}


BUSY = {"this machine": {"peak x@W.T cpu float32": 0.0125e12}}  # measured while the machine was busy


@pytest.mark.parametrize(("fresh", "expected"), [(0.05e12, 0.05), (0.01e12, 0.016)], ids=["quiet-now", "busy-now"])
def test_a_peak_below_a_rate_reached_is_remeasured_and_replaced(
    monkeypatch: pytest.MonkeyPatch, peaks_file: Path, caplog: pytest.LogCaptureFixture, fresh: float, expected: float
) -> None:
    """A run reaching 0.016 TFLOP/s against a kept 0.0125 (MFU 128%) shows the peak is wrong: it is re-measured, and
    the larger of the new measurement and the rate reached replaces it in the file, with a warning."""
    peaks_file.write_text(json.dumps(BUSY))
    calls = counted_probe(monkeypatch, fresh)
    assert peak.measured_peak_tflops(torch.device("cpu"), torch.float32) == 0.0125 and calls == []
    assert peak.corrected_peak_tflops(torch.device("cpu"), torch.float32, 0.016, remeasure=True) == expected
    assert calls == [torch.float32]
    assert json.loads(peaks_file.read_text())["this machine"]["peak x@W.T cpu float32"] == expected * 1e12
    assert peak.measured_peak_tflops(torch.device("cpu"), torch.float32) == expected  # later fits read it
    assert "above the kept matmul peak" in caplog.text


def throughput_run(flops_per_s: float) -> tuple[Throughput, SimpleNamespace, SimpleNamespace, Tally]:
    """A Throughput with a measured (auto) peak of 0.0125 TFLOP/s, a one-device fp32 CPU run, and a tally of one
    second at `flops_per_s`."""
    counter = Throughput("auto")
    counter.peak_flops = 0.0125e12
    tally = Tally()
    tally.add(1000, 10, flops_per_s)
    tally.seconds = 1.0
    trainer = SimpleNamespace(world_size=1, precision="32-true")
    return counter, trainer, SimpleNamespace(device=torch.device("cpu")), tally


def test_throughput_corrects_a_measured_peak_its_run_exceeds(monkeypatch: pytest.MonkeyPatch, peaks_file: Path) -> None:
    """An interval above the measured peak re-measures it once a run; a later one above the new peak only raises it
    to the rate reached (no second measurement); MFU is then at most 100%."""
    peaks_file.write_text(json.dumps(BUSY))
    calls = counted_probe(monkeypatch, 0.01e12)  # still busy when re-measured
    counter, trainer, module, tally = throughput_run(0.016e12)
    counter._check_peak(trainer, module, tally)
    assert counter.peak_flops == 0.016e12 and calls == [torch.float32]
    assert tally.rates(counter.peak_flops, 1)["mfu"] == 1.0
    counter._check_peak(trainer, module, throughput_run(0.02e12)[3])
    assert counter.peak_flops == 0.02e12 and calls == [torch.float32]


def test_a_configured_peak_or_a_plausible_mfu_is_left_alone(monkeypatch: pytest.MonkeyPatch, peaks_file: Path) -> None:
    """Below the peak nothing is measured; a peak the user gave (a number) is theirs, never re-measured."""
    calls = counted_probe(monkeypatch, 1e12)
    counter, trainer, module, tally = throughput_run(0.01e12)
    counter._check_peak(trainer, module, tally)
    configured = Throughput(0.0125)
    configured._check_peak(trainer, module, throughput_run(0.016e12)[3])
    assert calls == [] and counter.peak_flops == configured.peak_flops == 0.0125e12
