"""Preference tuning's options and data mistakes: each refused in one line that names the option or file:line."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tasks.preference_tuning.module import PreferenceTuning
from tetraformer.errors import ConfigError, OptionError


@pytest.mark.parametrize(
    ("options", "option", "words"),
    [
        ({"loss": "kto"}, "loss", "must be one of dpo, ipo, simpo"),
        ({"beta": 0.0}, "beta", "must be more than 0"),
        ({"gamma": 0.5}, "gamma", "set --model.loss simpo"),
        ({"loss": "ipo", "label_smoothing": 0.1}, "label_smoothing", "does not apply to the ipo loss"),
        ({"label_smoothing": 0.5}, "label_smoothing", "less than 0.5"),
    ],
)
def test_a_knob_of_another_loss_or_out_of_range_is_refused(options: dict[str, Any], option: str, words: str) -> None:
    """A value the loss cannot use names its option and what it takes."""
    with pytest.raises(OptionError) as err:
        PreferenceTuning(init_from="sft.ckpt", **options)
    assert err.value.option == option and words in str(err.value)


def test_preference_tuning_needs_a_model_to_start_from() -> None:
    """Without --model.init_from there is no chat model to tune and no reference: one line says what to set."""
    with pytest.raises(ConfigError, match="set --model.init_from to an instruction-tuning checkpoint"):
        PreferenceTuning()


def test_a_bad_record_is_one_line(
    run_cli: Callable[..., Path], qwen2: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A pair without its rejected reply stops the fit with one error line naming the file and line."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "a", "chosen": "b", "rejected": "c"}\n{"prompt": "a", "chosen": "b"}\n')
    with pytest.raises(SystemExit) as exit_info:
        run_cli("fit", model={"init_from": str(qwen2)}, train_path=str(bad))
    assert exit_info.value.code == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    expected = "a preference record needs 'prompt', 'chosen' and 'rejected'; 'rejected' missing (keys present:"
    assert line.startswith(f"error: {bad}:2: {expected}")
