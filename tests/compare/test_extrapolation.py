"""Length extrapolation of tiny trained language models: losses beyond the training length, or why not."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest
import yaml

from tests.tasks.language_modeling.conftest import TEXT, tiny_config
from tetraformer.cli import main
from tetraformer.compare.extrapolation import extrapolate

pytestmark = pytest.mark.slow  # every test here runs the CLI

BLOCK = 16


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(train, val) text files; the validation text holds many blocks even at 4x the training block size."""
    root = tmp_path_factory.mktemp("corpus")
    train, val = root / "train.txt", root / "val.txt"
    train.write_text(TEXT * 12, encoding="utf-8")
    val.write_text(TEXT * 16, encoding="utf-8")
    return train, val


def train_lm(root: Path, corpus: tuple[Path, Path], position: str) -> Path:
    """A tiny char-level GPT with `position` encodings, trained 10 steps on blocks of 16 with max_len 16."""
    config = tiny_config(root / "run", train_path=str(corpus[0]), val_path=str(corpus[1]), documents="line")
    config["model"]["init_args"]["arch"].update(position=position, max_len=BLOCK)
    config["data"]["init_args"]["block_size"] = BLOCK
    config["trainer"].update(max_steps=10, limit_val_batches=None)
    path = root / "fit.yaml"
    path.write_text(yaml.safe_dump(config))
    main(["fit", "-c", str(path)])
    return root / "run"


def best_val_loss(run_dir: Path) -> float:
    """The lowest val/loss the run logged (the one best.ckpt was kept for)."""
    (metrics,) = (run_dir / "logs").glob("**/metrics.csv")
    with metrics.open(newline="") as f:
        return min(float(row["val/loss"]) for row in csv.DictReader(f) if row.get("val/loss"))


@pytest.mark.parametrize("position", ["rotary", "sinusoidal"])
def test_positions_computed_from_length_extrapolate(tmp_path: Path, corpus: tuple[Path, Path], position: str) -> None:
    """Rotary and sinusoidal models give a finite loss at 1x, 2x and 4x; 1x is the run's own best val/loss."""
    run_dir = train_lm(tmp_path, corpus, position)
    losses = extrapolate(run_dir, [1, 2, 4])
    assert list(losses) == ["1x", "2x", "4x"]
    assert all(isinstance(v, float) and math.isfinite(v) for v in losses.values()), losses
    assert losses["1x"] == pytest.approx(best_val_loss(run_dir), rel=1e-3)
    assert losses["4x"] != pytest.approx(losses["1x"], rel=1e-6)  # longer blocks are really evaluated


def test_learned_positions_say_they_cannot(tmp_path: Path, corpus: tuple[Path, Path]) -> None:
    """A learned table of 16 positions: 1x is a loss, 2x and 4x say why there is none."""
    losses = extrapolate(train_lm(tmp_path, corpus, "learned"), [1, 2, 4])
    assert isinstance(losses["1x"], float) and math.isfinite(losses["1x"])
    assert losses["2x"] == losses["4x"] == "n/a: learned positions cover 16 tokens"


def test_max_tokens_caps_the_evaluation(tmp_path: Path, corpus: tuple[Path, Path]) -> None:
    """With a token cap the loss is over the first blocks only, so it differs from the whole split's."""
    run_dir = train_lm(tmp_path, corpus, "alibi")
    whole, capped = extrapolate(run_dir, [2]), extrapolate(run_dir, [2], max_tokens=8 * 2 * BLOCK)
    assert isinstance(capped["2x"], float) and capped["2x"] != pytest.approx(whole["2x"], rel=1e-6)
