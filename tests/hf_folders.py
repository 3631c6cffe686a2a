"""Tiny random Hugging Face folders (weights and a tokenizer of the caller's text), built locally: the builders the
tests that start from, convert or compare against a BERT or a causal LM (GPT-2, Llama, Qwen, Mistral) share."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import transformers

from tests.cli_runner import TEST_SEED
from tetraformer.data import train_tokenizer

TINY_BERT: dict[str, Any] = dict(
    hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, max_position_embeddings=64
)
# TINY_BERT's shape as a Tetraformer `--model.arch`, BERT's choices (post-norm, GELU, learned positions, two
# segments, no dropout): the arch of the tiny text classifiers and taggers that export to transformers
BERT_ARCH: dict[str, Any] = {
    "d_model": 32,
    "n_heads": 2,
    "n_layers": 2,
    "d_ff": 64,
    "max_len": 64,
    "dropout": 0.0,
    "norm_position": "post",
    "norm_eps": 1e-12,
    "embedding_norm": True,
    "activation": "gelu",
    "position": "learned",
    "type_vocab_size": 2,
}


def tiny_bert(out: Path, texts: list[Path], model: type[Any] = transformers.BertModel, **config: Any) -> Any:
    """A random `model` (BertModel, BertForMaskedLM, ...) of TINY_BERT's shape (and `config`), with a 100-piece
    WordPiece tokenizer of `texts`, saved to `out`; the model, in eval mode."""
    tokenizer = train_tokenizer(texts, "wordpiece", 100, out)
    torch.manual_seed(0)
    net = model(transformers.BertConfig(vocab_size=len(tokenizer), **{**TINY_BERT, **config})).eval()
    net.save_pretrained(out)
    return net


def tiny_causal_lm(
    out: Path, texts: list[Path], config: Callable[[int], transformers.PretrainedConfig], vocab_size: int = 100
) -> Path:
    """A random causal LM of `config(vocabulary size)` (GPT-2, Llama, Qwen, Mistral, ...: the class the config's
    model type names, seeded by TETRAFORMER_TEST_SEED) with a character tokenizer of `texts` (at most `vocab_size`
    pieces), saved to `out`; `out`."""
    tokenizer = train_tokenizer(texts, "char", vocab_size, out)
    torch.manual_seed(TEST_SEED)
    transformers.AutoModelForCausalLM.from_config(config(len(tokenizer))).save_pretrained(out)
    return out
