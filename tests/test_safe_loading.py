"""Safe loading: checkpoints and weight files load tensors and plain data; pickled objects need --trust_checkpoint."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import yaml
from lightning.pytorch import Trainer

from tests.tasks.language_modeling.conftest import TEXT, tiny_config
from tetraformer.cli import main
from tetraformer.interop.files import read_weights
from tetraformer.payload import PAYLOAD_KEY, read_checkpoint
from tetraformer.safe_loading import (
    UnsafeCheckpointError,
    trust_requested,
    trusted_objects_allowed,
    trusting_checkpoints,
)

SOUVENIR = "tests.test_safe_loading.Souvenir"


class Souvenir:
    """A custom object someone left in a checkpoint: loading it means unpickling (running) this module's code."""

    def __init__(self, note: str = "hello") -> None:
        self.note = note


def tainted(clean: dict, path: Path) -> Path:
    """Save `clean` with a Souvenir added (as a Lightning callback might store a custom object)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({**clean, "souvenir": Souvenir()}, path)
    return path


# --- the loader ------------------------------------------------------------------------------------
def test_a_pickled_object_is_refused_in_one_line_naming_it(tmp_path: Path) -> None:
    """read_checkpoint refuses a checkpoint holding a custom object; the line names it and the flag."""
    path = tainted({PAYLOAD_KEY: {}}, tmp_path / "model.ckpt")
    with pytest.raises(UnsafeCheckpointError) as refused:
        read_checkpoint(path)
    message = str(refused.value)
    assert message.startswith(f"{path} holds pickled Python objects ({SOUVENIR})") and "\n" not in message
    assert "--trust_checkpoint true" in message


def test_trusted_loads_take_the_object(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """With --trust_checkpoint the same file loads, and the log says what was unpickled."""
    path = tainted({PAYLOAD_KEY: {}}, tmp_path / "model.ckpt")
    with trusting_checkpoints(), caplog.at_level(logging.WARNING):
        ckpt = read_checkpoint(path)
    assert isinstance(ckpt["souvenir"], Souvenir) and f"unpickling {SOUVENIR}" in caplog.text


def test_hugging_face_bin_weights_are_loaded_safely(tmp_path: Path) -> None:
    """pytorch_model.bin with a pickled object is refused; trusted, its tensors load."""
    weights = {"wte.weight": torch.ones(2, 2)}
    tainted(weights, tmp_path / "pytorch_model.bin")
    with pytest.raises(UnsafeCheckpointError, match=r"pytorch_model\.bin holds pickled Python objects"):
        read_weights(tmp_path)
    with trusting_checkpoints():
        assert torch.equal(read_weights(tmp_path)["wte.weight"], weights["wte.weight"])


def test_other_libraries_weights_only_loads_are_allowed_the_objects_only_when_trusted(tmp_path: Path) -> None:
    """trusted_objects_allowed lets a hard-coded `weights_only=True` load read a trusted file, and nothing else."""
    path = tainted({}, tmp_path / "model.ckpt")
    with trusted_objects_allowed(path), pytest.raises(Exception, match="Weights only load failed"):
        torch.load(path, weights_only=True)
    with trusting_checkpoints(), trusted_objects_allowed(path):
        assert torch.load(path, weights_only=True)["souvenir"].note == "hello"


@pytest.mark.parametrize(
    ("argv", "trusted"),
    [
        ([], False),
        (["--trust_checkpoint", "true"], True),
        (["--trust_checkpoint=Yes"], True),
        (["--trust_checkpoint", "true", "--trust_checkpoint", "false"], False),
        (["--trust_checkpoint"], False),
    ],
)
def test_the_flag_is_read_from_the_command_line(argv: list[str], trusted: bool) -> None:
    """`--trust_checkpoint VALUE` or `=VALUE`, the last one winning; a flag without a value trusts nothing."""
    assert trust_requested(["fit", *argv]) is trusted


# --- through the CLI -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 6-step tiny language-model run, its fit config, and a tainted copy of its last.ckpt."""
    root = tmp_path_factory.mktemp("safe")
    (root / "corpus.txt").write_text(TEXT * 12, encoding="utf-8")
    config = tiny_config(root / "run", train_path=str(root / "corpus.txt"), documents="line")
    (root / "fit.yaml").write_text(yaml.safe_dump(config))
    main(["fit", "-c", str(root / "fit.yaml"), "--trainer.max_steps", "6"])
    clean = torch.load(root / "run" / "checkpoints" / "last.ckpt", weights_only=True)
    tainted(clean, root / "tainted" / "checkpoints" / "last.ckpt")
    return root


def cli_commands(root: Path, ckpt: Path) -> dict[str, list[str]]:
    """Each way a checkpoint is loaded: resume a fit, test from it, generate from it."""
    fit = [
        "fit",
        "-c",
        str(root / "fit.yaml"),
        "--trainer.max_steps",
        "8",
        "--trainer.default_root_dir",
        str(root / "resumed"),
        "--ckpt_path",
        str(ckpt),
    ]
    return {
        "fit": fit,
        "test": ["test", "--ckpt_path", str(ckpt), "--data.test_path", str(root / "corpus.txt")],
        "generate": ["generate", "--ckpt", str(ckpt), "--prompt", "First", "--max-new-tokens", "4"],
    }


@pytest.fixture
def run_main(monkeypatch: pytest.MonkeyPatch) -> Callable[[list[str]], None]:
    """main() with W&B off."""
    monkeypatch.setenv("WANDB_MODE", "disabled")
    return main


@pytest.mark.parametrize("command", ["fit", "test", "generate"])
def test_cli_refuses_a_tainted_checkpoint_then_trusts_it(
    runs: Path, command: str, run_main: Callable, capsys: pytest.CaptureFixture[str]
) -> None:
    """fit --ckpt_path, test --ckpt_path and generate --ckpt refuse the file in one line; with the flag they run."""
    ckpt = runs / "tainted" / "checkpoints" / "last.ckpt"
    argv = cli_commands(runs, ckpt)[command]
    with pytest.raises(SystemExit) as exited:
        run_main(argv)
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert exited.value.code == 2 and len(errors) == 1 and "--trust_checkpoint true" in errors[0]
    assert errors[0].startswith(f"error: {ckpt} holds pickled Python objects ({SOUVENIR})")
    run_main([*argv, "--trust_checkpoint", "true"])
    if command == "fit":
        assert torch.load(runs / "resumed" / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == 8


def test_cli_loads_clean_checkpoints_with_no_weights_only_notice(
    runs: Path, run_main: Callable, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A clean checkpoint resumes, Lightning restoring it with weights_only=True, and no "weights_only was not set"
    notice is logged (neither on loading nor on saving)."""
    argv = cli_commands(runs, runs / "run" / "checkpoints" / "last.ckpt")["fit"]
    argv[argv.index(str(runs / "resumed"))] = str(runs / "clean-resumed")
    asked: list[bool | None] = []
    fit = Trainer.fit

    @functools.wraps(fit)  # keeps the signature LightningCLI reads the subcommand's flags from
    def spy(self: Trainer, *args: object, **kwargs: object) -> None:
        asked.append(kwargs["weights_only"])
        fit(self, *args, **kwargs)

    monkeypatch.setattr(Trainer, "fit", spy)
    with caplog.at_level(logging.INFO):
        run_main(argv)
    assert asked == [True] and "Restoring states from the checkpoint path" in caplog.text
    assert "weights_only` was not set" not in caplog.text
