"""Tiny random Hugging Face text models on disk, checkpoint surgery and output comparison (BERT, GPT-2 tests)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch
import transformers
from safetensors.torch import load_file, save_file
from torch import Tensor

TOL = 1e-4  # fp32, eval mode
OUTPUT_FIELDS = ("logits", "last_hidden_state", "pooler_output")


def random_hf_model(architecture: str, config: transformers.PreTrainedConfig) -> transformers.PreTrainedModel:
    """A transformers model in eval mode with every parameter random, biases and norms included.

    transformers zeroes biases and sets norms to one; random values make a swapped or dropped
    tensor show in the outputs. Embeddings get a larger scale so logits have clear winners.
    """
    model = getattr(transformers, architecture)(config).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            embedding = "embeddings" in name or name.endswith(("wte.weight", "wpe.weight"))
            param.normal_(0.0, 1.0 if embedding else 0.2)
    return model


def save(model: transformers.PreTrainedModel, path: Path, safe: bool = True) -> Path:
    """save_pretrained into path; safe=False swaps model.safetensors for a pytorch_model.bin.

    transformers 5 writes only safetensors; the .bin is the full state dict, tied copies included,
    as transformers 4 wrote it with save_pretrained(safe_serialization=False).
    """
    model.save_pretrained(path)
    if not safe:
        torch.save(model.state_dict(), path / "pytorch_model.bin")
        (path / "model.safetensors").unlink()
    return path


def rewrite_weights(path: Path, edit: Callable[[dict[str, Tensor]], dict[str, Tensor]]) -> Path:
    """Replace model.safetensors with edit(its tensors)."""
    file = path / "model.safetensors"
    save_file({k: v.contiguous() for k, v in edit(load_file(file)).items()}, file)
    return path


def outputs(out: object) -> dict[str, Tensor]:
    """The output fields both sides fill (logits, hidden states, pooled output)."""
    return {f: getattr(out, f) for f in OUTPUT_FIELDS if getattr(out, f, None) is not None}


def max_diff(theirs: object, ours: object, real: Tensor | None = None) -> float:
    """Largest |difference| over the fields transformers returns; token-level ones only where real is True."""
    expected, got = outputs(theirs), outputs(ours)
    assert set(expected) == set(got), f"transformers returns {sorted(expected)}, we return {sorted(got)}"
    diffs = []
    for field, want in expected.items():
        assert got[field].shape == want.shape, f"{field}: shape {got[field].shape} != {want.shape}"
        assert want.abs().max() > 100 * TOL, f"{field} is near zero: a tolerance of {TOL} would mean nothing"
        delta = (got[field] - want).abs()  # (B, T, ...) or (B, ...)
        diffs.append(delta[real.bool()].max() if real is not None and delta.ndim == 3 else delta.max())
    return max(float(d) for d in diffs)


def state_dicts_equal(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    """Same keys, and every tensor exactly equal."""
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def export_and_reload(
    hf_model: transformers.PreTrainedModel, architecture: str, tmp_path: Path
) -> transformers.PreTrainedModel:
    """Import, export and re-import (asserting identical tensors); transformers' clean load of the export."""
    from tetraformer.interop import load_hf, save_hf

    ours = load_hf(save(hf_model, tmp_path / "src"))
    out = save_hf(ours, tmp_path / "out")
    assert state_dicts_equal(load_hf(out), ours)
    reloaded, info = getattr(transformers, architecture).from_pretrained(out, output_loading_info=True)
    assert not any(info.values()), info  # no missing, unexpected or mismatched keys
    return reloaded.eval()


def bin_checkpoint(hf_model: transformers.PreTrainedModel, tmp_path: Path) -> Path:
    """The model saved as a pytorch_model.bin directory only (transformers 4's safe_serialization=False)."""
    path = save(hf_model, tmp_path, safe=False)
    assert (path / "pytorch_model.bin").is_file() and not (path / "model.safetensors").exists()
    return path


def safetensors_to_bin(path: Path) -> Path:
    """Replace a directory's model.safetensors by the same tensors in a pytorch_model.bin."""
    from safetensors.torch import load_file

    torch.save(load_file(path / "model.safetensors"), path / "pytorch_model.bin")
    (path / "model.safetensors").unlink()
    return path
