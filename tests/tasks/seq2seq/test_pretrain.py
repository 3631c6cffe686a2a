"""Span-corruption pretraining, fine-tuning from it, and the Hugging Face T5 round trip after fine-tuning (the export
of a model trained from scratch is checked on the reference run, test_cli.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import yaml
from torch import nn
from transformers import T5Config, T5ForConditionalGeneration

from tasks.seq2seq.data import Seq2SeqData
from tests.tasks.seq2seq.conftest import assert_hf_logits_equal, reversal_pairs
from tetraformer.cli.commands import convert_command
from tetraformer.core import TransformerConfig
from tetraformer.data import train_tokenizer
from tetraformer.data.tokenizer import sentinel_ids
from tetraformer.interop.t5 import config_to_hf
from tetraformer.training.base.text_generation import TextGenerationConfig
from tetraformer.training.checkpointing.loading import load_task_module

NO_VALIDATION = ("--trainer.limit_val_batches", "0")  # these fits check weights and files, not validation


@pytest.fixture
def text_file(tmp_path: Path) -> Path:
    """Lines of space-separated letter words, for span corruption."""
    words = [r["source"] for r in reversal_pairs(600, seed=2)]
    path = tmp_path / "text.txt"
    path.write_text("".join(" ".join(words[i : i + 6]) + "\n" for i in range(0, len(words), 6)), encoding="utf-8")
    return path


def test_span_corruption_pretrains_and_fine_tunes(
    run_cli: Callable[..., Path], text_file: Path, pairs_file: Path, tmp_path: Path
) -> None:
    """Pretraining reserves sentinels and corrupts text; fine-tuning starts from the whole pretrained model."""
    run = run_cli(
        "fit",
        "--trainer.max_steps",
        "5",
        *NO_VALIDATION,
        root=tmp_path / "pre",
        objective="span_corruption",
        train_path=str(text_file),
        extra_ids=20,
        vocab_size=200,
        max_source_length=24,
    )
    pretrained = load_task_module(run / "checkpoints" / "last.ckpt")
    sentinels = sentinel_ids(pretrained.tokenizer)
    assert len(sentinels) == 20
    data = _datamodule(run / "config.yaml")
    batch = next(iter(data.val_dataloader()))
    assert batch["labels"][:, 0].tolist() == [sentinels[0]] * len(batch["labels"])  # targets open with a sentinel
    assert torch.isin(batch["input_ids"], torch.tensor(sentinels)).any(dim=1).all()
    again = next(iter(data.val_dataloader()))
    assert torch.equal(batch["input_ids"], again["input_ids"])  # validation corruption is fixed

    tuned = run_cli(
        "fit",
        "--trainer.max_steps",
        "1",
        *NO_VALIDATION,
        "--model.init_from",
        str(run / "checkpoints" / "last.ckpt"),
        "--model.optim.lr",
        "0",
        root=tmp_path / "tuned",
        train_path=str(pairs_file),
    )
    module = load_task_module(tuned / "checkpoints" / "last.ckpt")
    assert not (tuned / "tokenizer").exists()  # the pretrained model's tokenizer is used
    assert module.tokenizer.get_vocab() == pretrained.tokenizer.get_vocab()
    for key, value in pretrained.net.state_dict().items():  # lr 0: every tensor, the LM head's too
        torch.testing.assert_close(module.net.state_dict()[key], value)


def _datamodule(config: Path) -> Seq2SeqData:
    """The pretraining run's datamodule, set up for validation from its saved config."""
    args = yaml.safe_load(config.read_text())["data"]["init_args"]
    data = Seq2SeqData(**{**args, "tokenizer": str(config.parent / "tokenizer")})
    data.setup("validate")
    return data


@pytest.mark.parametrize("variant", ["v1.0", "v1.1"])
def test_hf_t5_round_trip_after_fine_tuning(
    run_cli: Callable[..., Path], pairs_file: Path, tmp_path: Path, variant: str
) -> None:
    """A local HF T5 directory fine-tunes via init_from; `convert to-hf` gives transformers our logits."""
    source = tmp_path / "hf_t5"
    tokenizer = train_tokenizer(pairs_file, "char", 100, source, field="source")
    gated = {"feed_forward_proj": "gated-gelu", "tie_word_embeddings": False} if variant == "v1.1" else {}
    config = T5Config(
        vocab_size=len(tokenizer),
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_heads=4,
        dropout_rate=0.0,
        decoder_start_token_id=tokenizer.pad_token_id,
        **gated,
    )
    torch.manual_seed(0)
    model = T5ForConditionalGeneration(config)
    if variant == "v1.1":
        model.lm_head.weight = nn.Parameter(torch.randn_like(model.lm_head.weight))
    model.save_pretrained(source)
    run = run_cli(
        "fit", "--trainer.max_steps", "5", *NO_VALIDATION, "--model.init_from", str(source), train_path=str(pairs_file)
    )
    ckpt = run / "checkpoints" / "last.ckpt"
    convert_command(["to-hf", str(ckpt), str(tmp_path / "exported")])
    module = load_task_module(ckpt)
    batch = module.tokenizer(["abc", "hgfedc"], padding=True, return_tensors="pt")
    decoder = torch.tensor([[0, 5, 9, 7], [0, 8, 6, 6]])
    ours = assert_hf_logits_equal(module, tmp_path / "exported", batch, decoder)
    assert not torch.allclose(ours, model.eval()(input_ids=batch["input_ids"], decoder_input_ids=decoder).logits)


@pytest.mark.parametrize("config", ["de_en_t5.yaml", "de_en_span_pretrain.yaml"])
def test_shipped_t5_style_configs_are_exportable(config: str) -> None:
    """The T5-style demo configs describe a model that `convert to-hf` can write as T5."""
    path = Path(__file__).parents[3] / "configs" / "seq2seq" / config
    arch = yaml.safe_load(path.read_text())["model"]["init_args"]["arch"]
    hf = config_to_hf(TransformerConfig.from_dict({**arch, "vocab_size": 100}), {}, tied=arch["tie_embeddings"])
    assert hf["model_type"] == "t5" and hf["feed_forward_proj"].startswith("gated")


def test_converted_hf_t5_generates_from_the_checkpoint(pairs_file: Path, tmp_path: Path) -> None:
    """`convert from-hf` stores a T5ForConditionalGeneration as this task: `generate` works from the .ckpt."""
    source = tmp_path / "hf_t5"
    tokenizer = train_tokenizer(pairs_file, "char", 100, source, field="source")
    config = T5Config(
        vocab_size=len(tokenizer),
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_heads=4,
        dropout_rate=0.0,
        decoder_start_token_id=tokenizer.pad_token_id,
    )
    T5ForConditionalGeneration(config).save_pretrained(source)
    convert_command(["from-hf", str(source), str(tmp_path / "t5.ckpt")])
    module = load_task_module(tmp_path / "t5.ckpt")
    assert type(module).__name__ == "Seq2Seq"
    outputs = module.generate(["abc", "hgfedc"], TextGenerationConfig(max_new_tokens=5, do_sample=False))
    assert len(outputs) == 2 and all(isinstance(o, str) for o in outputs)
