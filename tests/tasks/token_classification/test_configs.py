"""The shipped token-classification configs parse with the CLI (nothing trained, no data read)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tetraformer.cli import main

CONFIGS = sorted((Path(__file__).parents[3] / "configs" / "token_classification").glob("*.yaml"))


@pytest.mark.parametrize("config", CONFIGS, ids=lambda path: path.name)
def test_shipped_config_parses(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`fit -c CONFIG --print_config` accepts every option of the shipped config and keeps its data paths."""
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "-c", str(config), "--print_config"])
    assert exit_info.value.code in (0, None)
    printed = yaml.safe_load(capsys.readouterr().out)
    shipped = yaml.safe_load(config.read_text())
    assert printed["data"]["init_args"]["train_path"] == shipped["data"]["init_args"]["train_path"]


def test_english_config_is_word_level_with_a_cased_subword_tokenizer() -> None:
    """conll_en.yaml: whitespace words, a WordPiece or BPE tokenizer trained on them, first subwords labelled."""
    data = yaml.safe_load((Path(__file__).parents[3] / "configs/token_classification/conll_en.yaml").read_text())
    options = data["data"]["init_args"]
    assert options["tokenizer_type"] in ("wordpiece", "bpe") and options.get("word_split", "whitespace") == "whitespace"
    assert not options.get("label_all_subwords", False) and not options.get("lowercase", False)
