"""The device's matmul peak, measured: what MFU is taken against when the user gives no peak (`auto`).

Measured once per machine and dtype and kept in `matmul_peaks.json`; a measurement taken while the machine was busy
is too low, and a run then shows an MFU above 100%. So a kept peak below a rate a run reaches is wrong: the run
re-measures it and replaces it with the larger of the new measurement and that rate (`corrected_peak_tflops`).
Measuring draws from a private generator, never from the run's random stream.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import torch

from tetraformer.accel.chooser import LayoutChooser, device_machine_key

log = logging.getLogger(__name__)
PRECISION_DTYPES = {"bf16": torch.bfloat16, "16": torch.float16}  # prefix of Lightning's precision -> dtype
PEAKS = LayoutChooser(machine=device_machine_key, name="matmul_peaks.json")  # measured rates, kept per machine


def synchronize(device: torch.device) -> None:
    """Wait for queued GPU work, so wall-clock time covers it."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def best_call(op: Callable[[], object], device: torch.device, min_s: float = 0.5) -> float:
    """Seconds of op's fastest call: one untimed call, then timed calls until min_s has passed (2 at least)."""
    op()
    synchronize(device)
    best, calls, start = float("inf"), 0, time.perf_counter()
    while calls < 2 or time.perf_counter() - start < min_s:
        t0 = time.perf_counter()
        op()
        synchronize(device)
        best, calls = min(best, time.perf_counter() - t0), calls + 1
    return best


def matmul_size(device: torch.device) -> int:
    """Square matmul side that gets near the peak: 8192 on GPUs, 1024 on CPUs (near fp32's peak, and short)."""
    return 8192 if device.type == "cuda" else 1024


def measure_matmuls(
    device: torch.device,
    dtype: torch.dtype,
    layouts: tuple[str, ...] = ("x@W.T", "g@W", "g.T@x"),
    min_s: float = 0.5,
) -> dict[str, float]:
    """Best FLOP/s of square matmuls in the operand layouts of an nn.Linear training step (fwd, dgrad, wgrad)."""
    n = matmul_size(device)
    generator = torch.Generator(device).manual_seed(0)  # its own: timing must not move the run's random stream
    a, b = (torch.randn(n, n, device=device, generator=generator).to(dtype) for _ in range(2))
    ops = {"x@W.T": lambda: a @ b.T, "g@W": lambda: a @ b, "g.T@x": lambda: a.T @ b}
    return {name: 2.0 * n**3 / best_call(ops[name], device, min_s) for name in layouts}


def precision_dtype(precision: str) -> torch.dtype:
    """The matmul dtype of a Lightning precision setting ("bf16-mixed" -> bfloat16, "32-true" -> float32)."""
    return next(
        (dtype for prefix, dtype in PRECISION_DTYPES.items() if str(precision).startswith(prefix)),
        torch.float32,
    )


def peak_key(device: torch.device, dtype: torch.dtype) -> str:
    """The peak's key in matmul_peaks.json."""
    return f"peak x@W.T {device.type} {str(dtype).removeprefix('torch.')}"


def measured_peak_tflops(device: torch.device, dtype: torch.dtype) -> float:
    """TFLOP/s of the forward-layout matmul (x @ W.T) on this device in this dtype: timed the first time this
    machine (CPU, instruction sets, torch, threads, GPU) runs in the dtype, then read from `matmul_peaks.json` in
    the cache folder, so a fit does not spend its first 0.3 s timing matmuls again (a run that reaches more
    corrects it: `corrected_peak_tflops`).

    Only the forward layout is timed: it is the fastest or near it everywhere, and a slow backward layout
    (bf16 `g @ W` runs at ~1 GFLOP/s on AVX2-only CPUs) would make the probe take seconds.
    """

    def measure() -> float:
        flops = forward_flops(device, dtype)
        log.info("timed the matmul peak on %s in %s; kept in %s for later fits", device, dtype, PEAKS.file())
        return flops

    flops = PEAKS.measured(peak_key(device, dtype), measure)
    log.info("matmul peak on %s in %s: %.2f TFLOP/s (MFU is taken against it)", device, dtype, flops / 1e12)
    return flops / 1e12


def forward_flops(device: torch.device, dtype: torch.dtype) -> float:
    """FLOP/s of the forward-layout matmul, timed now."""
    return measure_matmuls(device, dtype, layouts=("x@W.T",), min_s=0.3)["x@W.T"]


def corrected_peak_tflops(device: torch.device, dtype: torch.dtype, reached_tflops: float, remeasure: bool) -> float:
    """The peak in TFLOP/s once a run reached `reached_tflops`, above the kept one (which is then wrong): the larger
    of that rate and a new measurement (`remeasure`; else the rate), written over the kept peak."""
    fresh = forward_flops(device, dtype) / 1e12 if remeasure else 0.0
    peak = max(fresh, reached_tflops)
    PEAKS.replace(peak_key(device, dtype), peak * 1e12)
    log.warning(
        "this run reached %.3g TFLOP/s on %s in %s, above the kept matmul peak: it was measured while the machine "
        "was busy; %s, MFU is now taken against %.3g TFLOP/s (kept in %s)",
        reached_tflops,
        device,
        str(dtype).removeprefix("torch."),
        f"re-measured {fresh:.3g} TFLOP/s" if remeasure else "not re-measured again",
        peak,
        PEAKS.file(),
    )
    return peak
