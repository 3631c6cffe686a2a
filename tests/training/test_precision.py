"""`--trainer.precision`: each precision Lightning runs on the device fits a tiny LM with finite losses and writes a
checkpoint that loads (in fp32) and generates."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from tests.training.tiny_lm import assert_usable_checkpoint, lm_fit

PRECISIONS = ["32-true", "bf16-mixed", "16-mixed", "bf16-true"]
CPU_UNSUPPORTED = {
    "16-mixed": "fp16 AMP does not run on CPU: Lightning warns and runs bf16-mixed instead (the bf16-mixed case)"
}
WEIGHT_DTYPES = {"bf16-true": torch.bfloat16}  # checkpointed weights; the others keep fp32 weights


def _cases() -> list:
    """Each precision on the CPU (unsupported ones skipped, with the reason) and on a GPU (marked gpu)."""
    cpu = []
    for precision in PRECISIONS:
        reason = CPU_UNSUPPORTED.get(precision)
        marks = [pytest.mark.skip(reason=reason)] if reason else []
        cpu.append(pytest.param("cpu", precision, id=f"cpu-{precision}", marks=marks))
    return cpu + [pytest.param("gpu", p, id=f"gpu-{p}", marks=pytest.mark.gpu) for p in PRECISIONS]


@pytest.fixture
def fit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Path]:
    """In-process tiny LM fits."""
    return lm_fit(tmp_path, monkeypatch)


@pytest.mark.parametrize(("accelerator", "precision"), _cases())
def test_precision_fits_and_checkpoint_loads(fit: Callable[..., Path], accelerator: str, precision: str) -> None:
    """Finite losses, last.ckpt at the final step with weights in the precision's dtype, loadable for generation."""
    if accelerator == "gpu" and precision.startswith("bf16") and not torch.cuda.is_bf16_supported():
        pytest.skip("this GPU has no bf16")
    run = fit("--trainer.accelerator", accelerator, "--trainer.precision", precision)
    ckpt = assert_usable_checkpoint(run)
    weight = ckpt["state_dict"]["net.embed.tokens.weight"]
    assert weight.dtype == WEIGHT_DTYPES.get(precision, torch.float32)
