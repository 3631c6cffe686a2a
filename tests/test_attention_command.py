"""`tetraformer attention`: a valid PNG for a tiny trained checkpoint of each family, and one-line errors."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.trained_checkpoints import TEXT_FAMILIES, checkpoint_factory
from tetraformer.cli import main

TEXTS = {"language_model": "First Citizen", "seq2seq": "abcd"}


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """Factory: the last.ckpt of a 3-step run of one family, trained once per module (no validation: the maps need
    weights, not scores)."""
    return checkpoint_factory(tmp_path_factory, "--trainer.limit_val_batches", "0")


@pytest.fixture
def image_file(tmp_path: Path) -> Path:
    """A 20x20 RGB PNG (the command converts and resizes it as the task does)."""
    path = tmp_path / "picture.png"
    Image.fromarray(np.random.default_rng(0).integers(0, 255, (20, 20, 3), dtype=np.uint8)).save(path)
    return path


def assert_png(path: Path) -> tuple[int, int]:
    """The file is a PNG PIL can decode, of non-zero size; returns (width, height)."""
    with Image.open(path) as image:
        assert image.format == "PNG"
        image.load()
        assert min(image.size) > 0
        return image.size


def attention(*args: str) -> None:
    """Run `tetraformer attention ARGS` in-process."""
    main(["attention", *args])


@pytest.mark.slow
@pytest.mark.parametrize("family", list(TEXT_FAMILIES))
def test_text_checkpoints_draw_token_maps(family: str, checkpoint: Callable[[str], Path], tmp_path: Path) -> None:
    out = tmp_path / "map.png"
    attention(
        "--ckpt", str(checkpoint(family)), "--text", TEXTS.get(family, "the team won a match"), "--output", str(out)
    )
    assert_png(out)


@pytest.mark.slow
def test_seq2seq_cross_attention_over_the_greedy_output_and_a_given_target(
    checkpoint: Callable[[str], Path], tmp_path: Path
) -> None:
    ckpt = str(checkpoint("seq2seq"))
    attention("--ckpt", ckpt, "--text", "abcd", "--kind", "cross", "--output", str(tmp_path / "cross.png"))
    assert_png(tmp_path / "cross.png")
    attention(
        "--ckpt",
        ckpt,
        "--text",
        "abcd",
        "--kind",
        "decoder",
        "--target",
        "dcba",
        "--layer",
        "0",
        "--heads",
        "1,3",
        "--output",
        str(tmp_path / "decoder.png"),
    )
    assert_png(tmp_path / "decoder.png")


@pytest.mark.slow
def test_text_file_and_max_tokens(checkpoint: Callable[[str], Path], tmp_path: Path) -> None:
    text = tmp_path / "text.txt"
    text.write_text("today we read the news about a match and the team and the score\n", encoding="utf-8")
    ckpt = str(checkpoint("classifier_encoder"))
    attention("--ckpt", ckpt, "--text-file", str(text), "--output", str(tmp_path / "all.png"))
    attention("--ckpt", ckpt, "--text-file", str(text), "--max-tokens", "5", "--output", str(tmp_path / "cut.png"))
    assert assert_png(tmp_path / "cut.png")[1] < assert_png(tmp_path / "all.png")[1]


@pytest.mark.slow
def test_image_checkpoint_draws_heads_and_rollout(
    checkpoint: Callable[[str], Path], image_file: Path, tmp_path: Path
) -> None:
    ckpt = str(checkpoint("image"))
    attention("--ckpt", ckpt, "--image", str(image_file), "--output", str(tmp_path / "all.png"))
    attention("--ckpt", ckpt, "--image", str(image_file), "--heads", "1", "--output", str(tmp_path / "one.png"))
    assert assert_png(tmp_path / "one.png")[0] < assert_png(tmp_path / "all.png")[0]


ERRORS = [
    ("classifier_encoder", ["--image", "{image}"], "is a text checkpoint (TextClassification): pass --text"),
    ("image", ["--text", "hello"], "is an image checkpoint (TinyImageTask): pass --image PATH"),
    ("classifier_encoder", ["--text", "hello", "--layer", "2"], "--layer 2 is out of range: the model has 2 layers"),
    ("image", ["--image", "{image}", "--layer", "-3"], "--layer -3 is out of range: the encoder has 2 layers"),
    ("classifier_encoder", ["--text", "hello", "--kind", "cross"], "--kind cross needs an encoder-decoder checkpoint"),
    ("classifier_encoder", ["--text", "hello", "--heads", "0,2"], "--heads 0,2: the model has heads 0..1"),
    ("classifier_encoder", ["--text", "hello", "--max-tokens", "0"], "--max-tokens 0: draw at least 1 token"),
    ("seq2seq", ["--text", "abc", "--layer", "5", "--kind", "cross"], "the decoder has 2 layers"),
    ("image", ["--image", "{missing}"], "--image {missing}: file not found"),
    ("classifier_encoder", ["--text-file", "{missing}"], "--text-file {missing}: file not found"),
]


@pytest.mark.slow  # the checkpoint factory fits each family the first time it is asked for it
@pytest.mark.parametrize(("family", "args", "message"), ERRORS)
def test_errors_are_one_line(
    family: str,
    args: list[str],
    message: str,
    checkpoint: Callable[[str], Path],
    image_file: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    paths = {"image": str(image_file), "missing": str(tmp_path / "missing.png")}
    args = [a.format(**paths) for a in args]
    ckpt = str(checkpoint(family))
    capsys.readouterr()  # the fit that made the checkpoint, if this test made it
    with pytest.raises(SystemExit) as exit_info:
        attention("--ckpt", ckpt, *args, "--output", str(tmp_path / "out.png"))
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err
    assert message.format(**paths) in err
    assert not (tmp_path / "out.png").exists()


def test_a_missing_checkpoint_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        attention("--ckpt", str(tmp_path / "none.ckpt"), "--text", "hello")
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip() == f"error: checkpoint not found: {tmp_path / 'none.ckpt'}"
