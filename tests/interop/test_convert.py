"""`tetraformer convert`: the task found by the architectures tasks declare, tokenizers, and errors that raise."""

from __future__ import annotations

import logging
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
import torch
import transformers

from tetraformer.cli import commands
from tetraformer.cli.commands import TASK_ENTRY_POINTS, convert_command, task_for_architecture
from tetraformer.data import train_tokenizer
from tetraformer.interop import InteropError
from tetraformer.payload import PAYLOAD_KEY, CheckpointError, read_checkpoint
from tetraformer.training.checkpointing.loading import load_network, load_task_module, starting_point

LANGUAGE_MODELING = "tasks.language_modeling.module.LanguageModeling"


class ToyTask:
    """A task as an entry point names it: only its declared architectures matter here."""

    hf_architectures = ("BertForTokenClassification",)


@pytest.fixture
def tokenizer_dir(tmp_path: Path) -> Path:
    """A char tokenizer (about 20 tokens) in its own directory."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("hello tiny world of tokens\n" * 10)
    train_tokenizer([corpus], "char", 100, tmp_path / "tokenizer")
    return tmp_path / "tokenizer"


def hf_model(path: Path, architecture: str, vocab_size: int = 60) -> Path:
    """A tiny random GPT-2 or BERT model saved without tokenizer files."""
    if architecture.startswith("GPT2"):
        config = transformers.GPT2Config(vocab_size=vocab_size, n_positions=32, n_embd=16, n_layer=1, n_head=2)
    else:
        config = transformers.BertConfig(
            vocab_size=vocab_size, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32
        )
    getattr(transformers, architecture)(config).save_pretrained(path)
    return path


def test_the_entry_points_name_the_language_modeling_task() -> None:
    """The installed `tetraformer.tasks` entry points lead GPT-2 architectures to LanguageModeling, others nowhere."""
    assert task_for_architecture("GPT2LMHeadModel") == LANGUAGE_MODELING
    assert task_for_architecture("GPT2Model") == LANGUAGE_MODELING
    assert task_for_architecture("BertModel") is None


def test_discovery_reads_only_what_tasks_declare(monkeypatch: pytest.MonkeyPatch) -> None:
    """With other entry points, other tasks are found, and nothing comes from a table in the platform."""
    toy = EntryPoint(name="toy", value=f"{__name__}:ToyTask", group=TASK_ENTRY_POINTS)
    monkeypatch.setattr(commands, "entry_points", lambda group: [toy] if group == TASK_ENTRY_POINTS else [])
    assert task_for_architecture("BertForTokenClassification") == f"{__name__}.ToyTask"
    assert task_for_architecture("GPT2LMHeadModel") is None


def test_from_hf_serves_the_declaring_task_with_a_tokenizer_from_elsewhere(tmp_path: Path, tokenizer_dir: Path) -> None:
    """GPT2LMHeadModel -> a LanguageModeling checkpoint; --tokenizer fills in for a source without one."""
    src = hf_model(tmp_path / "gpt2", "GPT2LMHeadModel")
    out = tmp_path / "gpt2.ckpt"
    convert_command(["from-hf", str(src), str(out), "--tokenizer", str(tokenizer_dir)])
    assert read_checkpoint(out)[PAYLOAD_KEY]["class_path"] == LANGUAGE_MODELING
    module = load_task_module(out)
    assert (
        module.tokenizer("hello")["input_ids"]
        == transformers.AutoTokenizer.from_pretrained(tokenizer_dir)("hello")["input_ids"]
    )
    theirs = transformers.GPT2LMHeadModel.from_pretrained(src).eval()
    ids = torch.randint(0, 60, (2, 8))
    with torch.no_grad():
        torch.testing.assert_close(module.net(ids), theirs(input_ids=ids).logits, atol=1e-4, rtol=0)


def test_task_flag_overrides_discovery(tmp_path: Path) -> None:
    """--task names the class path stored in the checkpoint."""
    src = hf_model(tmp_path / "gpt2", "GPT2Model")
    convert_command(["from-hf", str(src), str(tmp_path / "a.ckpt"), "--task", "my.tasks.Custom"])
    assert read_checkpoint(tmp_path / "a.ckpt")[PAYLOAD_KEY]["class_path"] == "my.tasks.Custom"


def test_architecture_no_task_serves_gives_an_init_from_checkpoint(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """BertModel: a checkpoint without task (usable as init_from only), and a log saying it has no tokenizer."""
    src = hf_model(tmp_path / "bert", "BertModel")
    out = tmp_path / "bert.ckpt"
    with caplog.at_level(logging.INFO):
        convert_command(["from-hf", str(src), str(out)])
    ckpt = read_checkpoint(out)
    assert ckpt[PAYLOAD_KEY]["class_path"] is None and ckpt[PAYLOAD_KEY]["tokenizer"] is None
    assert "hyper_parameters" not in ckpt
    assert "the checkpoint has no tokenizer" in caplog.text and "--tokenizer DIR" in caplog.text
    assert "task: none; use it as --model.init_from" in caplog.text
    with pytest.raises(CheckpointError, match="only serve as --model.init_from"):
        load_network(out)
    cfg, _ = starting_point(out)
    assert (cfg.d_model, cfg.n_layers) == (16, 1)


def test_tokenizer_larger_than_the_embedding_is_refused(tmp_path: Path, tokenizer_dir: Path) -> None:
    """A tokenizer whose ids the model cannot embed is an InteropError naming both sizes."""
    src = hf_model(tmp_path / "gpt2", "GPT2LMHeadModel", vocab_size=5)
    with pytest.raises(InteropError, match=r"tokenizer has \d+ tokens but .* embeds only 5"):
        convert_command(["from-hf", str(src), str(tmp_path / "a.ckpt"), "--tokenizer", str(tokenizer_dir)])


def test_to_hf_of_a_file_that_is_no_checkpoint_raises(tmp_path: Path) -> None:
    """Errors raise (the CLI prints them in one line) instead of exiting from inside the command."""
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(CheckpointError, match="is not a Tetraformer checkpoint"):
        convert_command(["to-hf", str(tmp_path / "notes.txt"), str(tmp_path / "out")])
