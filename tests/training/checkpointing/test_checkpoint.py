"""Training's checkpoint helpers: weight loading errors and the starting points of `init_from`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
import transformers
from torch import nn

from tetraformer.core import CausalLM, TransformerConfig
from tetraformer.interop import load_hf
from tetraformer.payload import CheckpointError, make_checkpoint, save_checkpoint
from tetraformer.training.checkpointing.loading import load_network, load_weights, starting_point


def test_load_weights_names_key_and_shapes() -> None:
    """A shape mismatch names the tensor and both shapes; a missing key is named too."""
    net = nn.Linear(3, 2)
    with pytest.raises(ValueError, match=r"'weight' has shape \(2, 4\), model expects \(2, 3\)"):
        load_weights(net, {"weight": torch.zeros(2, 4), "bias": torch.zeros(2)}, "x.ckpt")
    with pytest.raises(ValueError, match=r"missing weights for \['bias'\]"):
        load_weights(net, {"weight": torch.zeros(2, 3)}, "x.ckpt")


def test_starting_point_of_a_checkpoint(tmp_path: Path) -> None:
    """A .ckpt gives its stored config and the network's weights without the `net.` prefix."""
    net = CausalLM(TransformerConfig.preset("tiny", vocab_size=50, max_len=16))
    cfg, state = starting_point(save_checkpoint(make_checkpoint(net, None, None), tmp_path / "a.ckpt"))
    assert cfg == net.cfg
    assert all(torch.equal(state[k], v) for k, v in net.state_dict().items())


def test_starting_point_of_a_hugging_face_directory_goes_through_the_registry(tmp_path: Path) -> None:
    """An HF directory (a source interop registers) gives the imported core's config and weights."""
    config = transformers.GPT2Config(vocab_size=40, n_positions=16, n_embd=16, n_layer=1, n_head=2)
    transformers.GPT2LMHeadModel(config).save_pretrained(tmp_path / "gpt2")
    cfg, state = starting_point(tmp_path / "gpt2")
    core = load_hf(tmp_path / "gpt2").core
    assert cfg == core.cfg
    assert all(torch.equal(state[k], v) for k, v in core.state_dict().items())


def test_starting_point_errors(tmp_path: Path) -> None:
    """A missing path is FileNotFoundError; a directory no source reads says what was expected."""
    with pytest.raises(FileNotFoundError):
        starting_point(tmp_path / "missing.ckpt")
    with pytest.raises(CheckpointError, match="expected a Tetraformer .ckpt file or a Hugging Face model"):
        starting_point(tmp_path)


def test_load_network_of_a_checkpoint_without_task(tmp_path: Path) -> None:
    """A checkpoint that names no task serves only as init_from, and says so."""
    net = CausalLM(TransformerConfig.preset("tiny", vocab_size=50, max_len=16))
    path = save_checkpoint(make_checkpoint(net, None, None), tmp_path / "a.ckpt")
    with pytest.raises(CheckpointError, match="names no task class; it can only serve as --model.init_from"):
        load_network(path)


def test_a_fresh_process_reads_hugging_face_directories_without_importing_interop(tmp_path: Path) -> None:
    """Training code alone, in a new interpreter, starts from an HF directory: the source is found by name
    (payload.STARTING_POINTS), not registered by whoever imported interop first."""
    hf_config = transformers.GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=50)
    transformers.GPT2LMHeadModel(hf_config).save_pretrained(tmp_path)
    code = (
        "import sys\n"
        "assert 'tetraformer.interop' not in sys.modules\n"
        "from tetraformer.training.checkpointing.loading import starting_point\n"
        f"cfg, weights = starting_point({str(tmp_path)!r})\n"
        "print('d_model', cfg.d_model, 'tensors', len(weights))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "d_model 32" in done.stdout
