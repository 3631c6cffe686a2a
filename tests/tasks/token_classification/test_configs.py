"""What the shipped token-classification configs promise beyond parsing (tests/test_shipped_configs.py)."""

from __future__ import annotations

from pathlib import Path

import yaml


def test_english_config_is_word_level_with_a_cased_subword_tokenizer() -> None:
    """conll_en.yaml: whitespace words, a WordPiece or BPE tokenizer trained on them, first subwords labelled."""
    data = yaml.safe_load((Path(__file__).parents[3] / "configs/token_classification/conll_en.yaml").read_text())
    options = data["data"]["init_args"]
    assert options["tokenizer_type"] in ("wordpiece", "bpe") and options.get("word_split", "whitespace") == "whitespace"
    assert not options.get("label_all_subwords", False) and not options.get("lowercase", False)
