"""The checkpoint payload: plain data, tokenizer state, reading files that are (not) checkpoints, starting points."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file
from torch import nn

from tetraformer.core import CausalLM, TransformerConfig
from tetraformer.data import train_tokenizer
from tetraformer.errors import TetraformerError
from tetraformer.payload import (
    PAYLOAD_KEY,
    CheckpointError,
    StartingPointSource,
    directory_starting_point,
    make_checkpoint,
    network_config,
    network_state,
    plain,
    read_checkpoint,
    save_checkpoint,
    starting_point_sources,
    tokenizer_from_state,
    tokenizer_state,
)


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


def _text(path: Path) -> None:
    path.write_text("not a checkpoint\n")


def _random_bytes(path: Path) -> None:
    path.write_bytes(bytes(torch.randint(0, 256, (4096,), dtype=torch.uint8).tolist()))


def _safetensors(path: Path) -> None:
    save_file({"wte.weight": torch.zeros(4, 2)}, path)


def _state_dict(path: Path) -> None:
    torch.save(nn.Linear(2, 2).state_dict(), path)  # tensors, but no Tetraformer payload


@pytest.mark.parametrize(
    ("name", "write"),
    [
        ("notes.txt", _text),
        ("random.bin", _random_bytes),
        ("model.safetensors", _safetensors),
        ("pytorch_model.bin", _state_dict),
    ],
)
def test_a_file_that_is_no_checkpoint_is_a_one_line_checkpoint_error(
    tmp_path: Path, name: str, write: Callable[[Path], None]
) -> None:
    """The error names the file and says what it is not; never torch's unpickling advice."""
    path = tmp_path / name
    write(path)
    with pytest.raises(CheckpointError) as caught:
        read_checkpoint(path)
    message = str(caught.value)
    assert message.startswith(f"{path} is not a Tetraformer checkpoint")
    assert "weights_only" not in message and "\n" not in message
    assert isinstance(caught.value, TetraformerError)


def test_hugging_face_weights_get_a_hint(tmp_path: Path) -> None:
    """A safetensors file points to the model directory and to `convert from-hf`."""
    _safetensors(tmp_path / "model.safetensors")
    with pytest.raises(CheckpointError, match="convert from-hf"):
        read_checkpoint(tmp_path / "model.safetensors")


def test_missing_file_and_directory(tmp_path: Path) -> None:
    """A missing file stays FileNotFoundError; a directory is not a checkpoint file."""
    with pytest.raises(FileNotFoundError, match="checkpoint not found"):
        read_checkpoint(tmp_path / "nope.ckpt")
    with pytest.raises(CheckpointError, match="is a directory"):
        read_checkpoint(tmp_path)


def test_checkpoint_written_before_the_payload_module_still_reads(tmp_path: Path) -> None:
    """The layout of existing checkpoints (as training and convert wrote it) loads unchanged."""
    net = CausalLM(TransformerConfig.preset("tiny", vocab_size=50, max_len=16))
    old = {
        "state_dict": {f"net.{k}": v for k, v in net.state_dict().items()},
        "tetraformer": {
            "class_path": "tasks.language_modeling.module.LanguageModeling",
            "model_config": net.cfg.to_dict(),
            "tokenizer": None,
            "task": {},
            "wandb_run_id": None,
        },
        "hyper_parameters": {"_class_path": "tasks.language_modeling.module.LanguageModeling"},
        "pytorch-lightning_version": "2.6.0",
    }
    torch.save(old, tmp_path / "old.ckpt")
    ckpt = read_checkpoint(tmp_path / "old.ckpt")
    assert network_config(ckpt) == net.cfg
    state = network_state(ckpt)
    assert state.keys() == net.state_dict().keys()
    assert all(torch.equal(state[k], v) for k, v in net.state_dict().items())


def test_make_checkpoint_keeps_the_layout_and_round_trips(tmp_path: Path) -> None:
    """A bare network's checkpoint has the payload, the weights under `net.`, and hparams only with a task."""
    net = CausalLM(TransformerConfig.preset("tiny", vocab_size=50, max_len=16))
    path = save_checkpoint(make_checkpoint(net, "pkg.mod.Task", None, source="src"), tmp_path / "a" / "x.ckpt")
    ckpt = read_checkpoint(path)
    assert set(ckpt[PAYLOAD_KEY]) == {"class_path", "model_config", "tokenizer", "task", "source"}
    assert ckpt[PAYLOAD_KEY]["class_path"] == "pkg.mod.Task" and ckpt[PAYLOAD_KEY]["source"] == "src"
    assert ckpt["hyper_parameters"]["_class_path"] == "pkg.mod.Task"
    assert network_config(ckpt) == net.cfg
    assert all(torch.equal(network_state(ckpt)[k], v) for k, v in net.state_dict().items())
    assert "hyper_parameters" not in make_checkpoint(net, None, None)


MARKED = StartingPointSource("a marked directory", lambda p: (p / "MARK").is_file(), lambda p: "read")


def test_unreadable_directory_says_what_was_expected(tmp_path: Path) -> None:
    """A directory no source accepts is an error naming what was expected."""
    with pytest.raises(CheckpointError, match="expected a Tetraformer .ckpt file or a marked directory"):
        directory_starting_point(tmp_path, (f"{__name__}:MARKED",))
    with pytest.raises(CheckpointError, match="or a Hugging Face model directory"):
        directory_starting_point(tmp_path)


def test_listed_source_reads_its_directories(tmp_path: Path) -> None:
    """A directory goes to the first listed source that accepts it, imported by name when asked for."""
    (tmp_path / "MARK").touch()
    assert directory_starting_point(tmp_path, (f"{__name__}:MARKED",)) == "read"


def test_every_listed_source_resolves() -> None:
    """STARTING_POINTS names real StartingPointSources (a typo would only show when a user hits it)."""
    assert all(isinstance(s, StartingPointSource) for s in starting_point_sources())
