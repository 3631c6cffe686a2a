"""The measured matmul peak that MFU is taken against when the user gives none."""

from __future__ import annotations

import pytest
import torch

from tetraformer.training.callbacks import peak


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


def test_measured_peak_is_a_plausible_rate_and_cached() -> None:
    """The CPU's fp32 peak is a positive, finite TFLOP/s below any CPU's reach, measured once per process."""
    peak.measured_peak_tflops.cache_clear()
    first = peak.measured_peak_tflops(torch.device("cpu"), torch.float32)
    assert 1e-4 < first < 100.0
    assert peak.measured_peak_tflops(torch.device("cpu"), torch.float32) == first
    assert peak.measured_peak_tflops.cache_info().hits == 1


def test_measuring_leaves_the_global_random_stream_alone() -> None:
    """The probe draws its matrices from its own generator: a run's dropout masks do not depend on it."""
    torch.manual_seed(3)
    expected = torch.rand(4)
    torch.manual_seed(3)
    peak.measure_matmuls(torch.device("cpu"), torch.float32, layouts=("x@W.T",), min_s=0.0)
    assert torch.equal(torch.rand(4), expected)
