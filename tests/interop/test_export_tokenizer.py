"""An export's tokenizer encodes text in transformers as the model was trained on it: a causal LM's without the
`<s> A </s>` a Tetraformer-trained tokenizer adds for encoders, an encoder's with them."""

from __future__ import annotations

from pathlib import Path

import pytest
import transformers

from tetraformer.core.config import TransformerConfig
from tetraformer.core.models import CausalLM, SequenceClassifier, TextEncoder
from tetraformer.data import train_tokenizer
from tetraformer.interop.convert import export_network

TEXT = "hello tiny world"
LLAMA = {"position": "rotary", "norm": "rmsnorm", "activation": "swiglu", "bias": False}


def trained(kind: str, tmp_path: Path) -> transformers.PreTrainedTokenizerFast:
    """A tokenizer of this kind trained on a few lines (byte-level BPE needs room for its 256 bytes)."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(f"{TEXT} of tokens\n" * 20, encoding="utf-8")
    return train_tokenizer([corpus], kind, 300 if kind == "bpe" else 100, tmp_path / "tokenizer")


@pytest.mark.parametrize("kind", ["char", "bpe"])
@pytest.mark.parametrize("shape", [{"position": "learned"}, LLAMA], ids=["gpt2", "llama"])
def test_a_causal_lm_export_encodes_a_prompt_without_document_ends(kind: str, shape: dict, tmp_path: Path) -> None:
    """transformers' `tokenizer(prompt)` on the export gives the ids `generate` and training use: no `</s>` ending
    the prompt, no `<s>` (training documents have none); decoding gives the text back."""
    tokenizer = trained(kind, tmp_path)
    cfg = TransformerConfig.preset("tiny", **shape).replace(vocab_size=len(tokenizer), n_layers=1)
    out = export_network(CausalLM(cfg), tokenizer, tmp_path / "exported")
    theirs = transformers.AutoTokenizer.from_pretrained(out)
    ids = theirs(TEXT)["input_ids"]
    assert ids == tokenizer(TEXT, add_special_tokens=False)["input_ids"]
    assert theirs.decode(ids) == TEXT
    assert tokenizer(TEXT)["input_ids"] != ids  # the run's own tokenizer still adds them (encoders need them)


def test_an_encoder_export_keeps_its_special_tokens(tmp_path: Path) -> None:
    """A classifier's export encodes `<s> text </s>` as its fine-tuning did."""
    tokenizer = trained("char", tmp_path)
    cfg = TransformerConfig.preset("tiny", norm_position="post", embedding_norm=True, type_vocab_size=2)
    cfg = cfg.replace(vocab_size=len(tokenizer), n_layers=1)
    net = SequenceClassifier(TextEncoder(cfg), 2, pooler=True)
    out = export_network(net, tokenizer, tmp_path / "exported", labels=["a", "b"])
    assert transformers.AutoTokenizer.from_pretrained(out)(TEXT)["input_ids"] == tokenizer(TEXT)["input_ids"]
