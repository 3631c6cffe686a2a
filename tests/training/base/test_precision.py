"""`--trainer.precision`: each precision Lightning runs on the device fits a tiny LM with finite losses and writes a
checkpoint that loads (in fp32) and generates."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch

import tetraformer.training.base.clipping as clipping
from tests.training.tiny_lm import assert_usable_checkpoint, lm_fit

pytestmark = pytest.mark.slow  # every test here runs the CLI

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


MIXED = [pytest.param("cpu", "bf16-mixed", id="cpu-bf16-mixed")] + [
    pytest.param("gpu", p, id=f"gpu-{p}", marks=pytest.mark.gpu) for p in ("bf16-mixed", "16-mixed")
]


@pytest.mark.parametrize(("accelerator", "precision"), MIXED)
def test_mixed_precision_clips_gradients(
    fit: Callable[..., Path], accelerator: str, precision: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--trainer.gradient_clip_val works under mixed precision: bf16 (no gradient scaler) keeps the fused AdamW,
    which Lightning refuses to clip; 16-mixed clips unscaled gradients, so its AdamW is not fused."""
    if accelerator == "gpu" and precision.startswith("bf16") and not torch.cuda.is_bf16_supported():
        pytest.skip("this GPU has no bf16")
    clipped: list[float] = []
    fused: list[bool] = []
    clip, clip_by_known_norm = torch.nn.utils.clip_grad_norm_, clipping.clip_grads_with_norm_

    def spy(parameters: object, max_norm: float, *args: object, **kwargs: object) -> torch.Tensor:
        clipped.append(max_norm)
        return clip(parameters, max_norm, *args, **kwargs)

    def known_norm_spy(parameters: object, max_norm: float, *args: object, **kwargs: object) -> None:
        clipped.append(max_norm)  # bf16: the non-finite guard measured the norm, clipping uses it
        clip_by_known_norm(parameters, max_norm, *args, **kwargs)

    step = torch.optim.AdamW.step

    def step_spy(self: torch.optim.AdamW, *args: object, **kwargs: object) -> object:
        fused.append(bool(self.defaults["fused"]))
        return step(self, *args, **kwargs)

    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", spy)
    monkeypatch.setattr(clipping, "clip_grads_with_norm_", known_norm_spy)
    monkeypatch.setattr(torch.optim.AdamW, "step", step_spy)
    fit("--trainer.accelerator", accelerator, "--trainer.precision", precision, "--trainer.gradient_clip_val", "0.5")
    assert clipped and set(clipped) == {0.5}
    assert set(fused) == {precision.startswith("bf16")}
