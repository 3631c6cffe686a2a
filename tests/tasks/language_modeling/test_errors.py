"""Mistakes a new user makes are told in one line `error: ...` on stderr with exit code 2, never a traceback."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import yaml

from tasks.language_modeling.data import LanguageModelingData
from tests.tasks.language_modeling.conftest import tiny_config
from tetraformer.cli import main
from tetraformer.data.errors import DataError


def error_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """Run the CLI expecting exit code 2; return stderr's one `error:` line (nothing else may follow it)."""
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[-1].startswith("error: ") and not any(line.startswith("Traceback") for line in lines)
    return lines[-1]


POSITIONS = "sinusoidal, learned, relative, rotary, alibi, none"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--model.init_args.arch.position", "bogus"], f"--model.arch.position: 'bogus' is not one of: {POSITIONS}"),
        (["--model.arch.position", "bogus"], f"--model.arch.position: 'bogus' is not one of: {POSITIONS}"),
        (["--data.bogus", "1"], "unknown option --data.bogus"),
        (["--trainer.max_steps", "many"], "--trainer.max_steps: 'many' is not a valid int"),
    ],
)
def test_config_mistake_is_one_line_first(
    args: list[str],
    expected: str,
    tmp_path: Path,
    text_file: Path,
    capsys: pytest.CaptureFixture[str],
    run_cli: Callable[..., Path],
) -> None:
    """A bad value, an unknown key: the error line names the option and the accepted values, no usage dump."""
    with pytest.raises(SystemExit):
        run_cli("fit", *args, train_path=str(text_file))
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [f"error: {expected} (see tetraformer fit --help)"]


def test_missing_config_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A missing -c file is named in the one line."""
    line = error_line(capsys, ["fit", "-c", str(tmp_path / "nope.yaml")])
    assert "--config" in line and "nope.yaml" in line and "does not exist" in line


def test_val_check_interval_beyond_an_epoch(
    run_cli: Callable[..., Path], text_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """val_check_interval larger than an epoch: one line with the epoch's batches and what to set."""
    with pytest.raises(SystemExit) as exit_info:
        run_cli(
            "fit",
            "--trainer.val_check_interval",
            "500",
            "--trainer.check_val_every_n_epoch",
            "1",
            train_path=str(text_file),
            documents="line",
        )
    assert exit_info.value.code == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("error: --trainer.val_check_interval 500 is more than the 6 batches of one training epoch")
    assert "--trainer.check_val_every_n_epoch null" in line and "--trainer.val_check_interval 6 or less" in line


@pytest.mark.parametrize(
    ("name", "content", "options", "expected"),
    [
        ("missing.txt", None, {}, "missing.txt"),
        ("empty.txt", b"", {}, "empty.txt"),
        ("latin1.txt", b"good line\nbad \xff byte\n", {}, "latin1.txt:2: cannot decode byte 0xff"),
        (
            "bad.jsonl",
            b'{"text": "ok"}\n{"text": oops}\n',
            {},
            "bad.jsonl:2: line is not valid JSON: expecting value at column 10",
        ),
        (  # cut off after column 37: the error is at column 38 of line 2 (not column 1 of a line 3), CRLF or not
            "cut.jsonl",
            b'{"text": "ok"}\r\n{"text": "bank price today", "label":\r\n{"text": "ok"}\r\n',
            {},
            "cut.jsonl:2: line is not valid JSON: expecting value at column 38 (the line ends there: a JSON lines",
        ),
        ("nofield.jsonl", b'{"text": "ok"}\n{"body": "x"}\n', {}, "nofield.jsonl:2"),
        ("field.jsonl", b'{"body": "x"}\n', {"text_field": "content"}, "content"),
    ],
)
def test_bad_input_is_one_line_naming_file_and_line(
    name: str, content: bytes | None, options: dict, expected: str, tmp_path: Path
) -> None:
    """Each bad input stops the data preparation with one line naming the file (and line); a decode error names
    --data.encoding, a JSON error its line and column in the file, not a cut-off phrase. The CLI's one `error:` line
    for such a DataError is the next test's."""
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    data = LanguageModelingData(
        train_path=str(path), documents="line", tokenizer_type="char", block_size=16, batch_size=8, **options
    )
    with pytest.raises(DataError) as error:
        data.prepare_data()
        data.setup("fit")
    line = str(error.value)
    assert "\n" not in line and str(path) in line and expected in line
    assert "encoding=" not in line and ("--data.encoding latin-1" in line) == (name == "latin1.txt")


def test_bad_input_through_the_cli_is_its_last_line(
    run_cli: Callable[..., Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bad file stops `fit` (exit code 2) with one error line, the last, naming the file and line."""
    path = tmp_path / "latin1.txt"
    path.write_bytes(b"good line\nbad \xff byte\n")
    with pytest.raises(SystemExit) as exit_info:
        run_cli("fit", "--trainer.fast_dev_run", "1", train_path=str(path), documents="line")
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    (line,) = [line for line in lines if line.startswith("error:")]
    assert line == lines[-1] and f"{path}:2: cannot decode byte 0xff" in line and "--data.encoding latin-1" in line


@pytest.mark.parametrize(
    "command",
    [
        ["generate", "--ckpt", "{bad}", "--prompt", "x"],
        ["test", "--ckpt_path", "{bad}", "--data.test_path", "{bad}"],
        ["predict", "--ckpt_path", "{bad}", "--data.predict_path", "{bad}"],
        ["fit", "-c", "{config}", "--ckpt_path", "{bad}"],
        pytest.param(["fit", "-c", "{config}", "--model.init_args.init_from", "{bad}"], marks=pytest.mark.slow),
    ],
)
def test_not_a_checkpoint_is_one_line(
    command: list[str], tmp_path: Path, text_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file that is not a checkpoint, wherever a checkpoint goes, is one line naming the file."""
    bad = tmp_path / "notes.ckpt"
    bad.write_text("not a checkpoint\n")
    config = tmp_path / "fit.yaml"
    config.write_text(yaml.safe_dump(tiny_config(tmp_path / "run", train_path=str(text_file))))
    argv = [a.format(bad=bad, config=config) for a in command]
    line = error_line(capsys, argv)
    assert str(bad) in line and "weights_only" not in line


def test_generate_needs_a_generative_task_and_a_tokenizer(
    trained_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A checkpoint without tokenizer asks for --tokenizer (and works with it); a non-generating task says so."""
    ckpt = torch.load(trained_run / "checkpoints" / "last.ckpt", weights_only=True)
    ckpt["tetraformer"]["tokenizer"] = None
    bare = tmp_path / "bare.ckpt"
    torch.save(ckpt, bare)
    line = error_line(capsys, ["generate", "--ckpt", str(bare), "--prompt", "First"])
    fix = "pass --tokenizer DIR (a tokenizer.json or a Hugging Face tokenizer folder)"
    assert line == f"error: {bare} holds no tokenizer: {fix}"
    main(
        [
            "generate",
            "--ckpt",
            str(bare),
            "--tokenizer",
            str(trained_run / "tokenizer"),
            "--prompt",
            "First",
            "--max-new-tokens",
            "4",
        ]
    )
    assert capsys.readouterr().out.startswith("First")
    ckpt["hyper_parameters"]["_class_path"] = "tests.tasks.language_modeling.silent.SilentLanguageModel"
    silent = tmp_path / "silent.ckpt"
    torch.save(ckpt, silent)
    line = error_line(capsys, ["generate", "--ckpt", str(silent), "--prompt", "First"])
    assert line == f"error: {silent}'s task (SilentLanguageModel) does not generate text"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["generate", "--prompt", "x"],
            "the following arguments are required: --ckpt (see tetraformer generate --help)",
        ),
        (
            ["generate", "--ckpt", "x.ckpt", "--prompt", "x", "--num-beams", "two"],
            "argument --num-beams: invalid int value: 'two'",
        ),
        (["tokenizer", "train", "--input", "a.txt"], "required: --output (see tetraformer tokenizer train --help)"),
        (["tokenizer", "train", "--input", "{missing}", "--output", "{out}"], "missing.txt: no such file or directory"),
    ],
)
def test_extra_commands_speak_the_same_style(
    argv: list[str], expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """generate and tokenizer mistakes are the same one `error:` line with exit code 2, no usage dump."""
    argv = [a.format(missing=tmp_path / "missing.txt", out=tmp_path / "tok") for a in argv]
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error: ") and expected in line
