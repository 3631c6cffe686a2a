"""Checkpoint helpers: tokenizer state, plain hyper-parameters and weight loading errors."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from torch import nn

from tetraformer.data import train_tokenizer
from tetraformer.training.checkpoint import load_weights, plain, tokenizer_from_state, tokenizer_state


def test_tokenizer_state_round_trips(tmp_path: Path) -> None:
    """A tokenizer stored as JSON strings encodes, decodes and keeps its special tokens."""
    corpus = tmp_path / "c.txt"
    corpus.write_text("hello world, hello tokenizers\n" * 20)
    tok = train_tokenizer([corpus], "char", 100, tmp_path / "tok")
    again = tokenizer_from_state(tokenizer_state(tok))
    text = "hello world"
    assert again(text)["input_ids"] == tok(text)["input_ids"]
    assert again.decode(again(text, add_special_tokens=False)["input_ids"]) == text
    assert (again.pad_token, again.eos_token) == (tok.pad_token, tok.eos_token)


def test_plain_turns_dataclasses_into_dicts() -> None:
    """Dataclasses, tuples and paths become dicts, lists and strings."""

    @dataclass
    class Opt:
        betas: tuple[float, float] = (0.9, 0.95)

    assert plain({"optim": Opt(), "p": Path("a/b")}) == {"optim": {"betas": [0.9, 0.95]}, "p": "a/b"}


def test_load_weights_names_key_and_shapes() -> None:
    """A shape mismatch names the tensor and both shapes; a missing key is named too."""
    net = nn.Linear(3, 2)
    with pytest.raises(ValueError, match=r"'weight' has shape \(2, 4\), model expects \(2, 3\)"):
        load_weights(net, {"weight": torch.zeros(2, 4), "bias": torch.zeros(2)}, "x.ckpt")
    with pytest.raises(ValueError, match=r"missing weights for \['bias'\]"):
        load_weights(net, {"weight": torch.zeros(2, 3)}, "x.ckpt")
