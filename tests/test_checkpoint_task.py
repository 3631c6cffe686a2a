"""Which checkpoint a command line names, which task its config is of, and the refusal when they differ."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tasks.text_classification.module import TextClassification
from tetraformer.cli.checkpoint_task import check_checkpoint_task, checkpoint_file, same_task, task_name
from tetraformer.cli.command_line import configured_class_path, configured_root
from tetraformer.errors import ConfigError
from tetraformer.payload import PAYLOAD_KEY

LM = "tasks.language_modeling.module.LanguageModeling"
LM_DATA = "tasks.language_modeling.data.LanguageModelingData"
CLASSIFIER = "tasks.text_classification.module.TextClassification"
CLASSIFIER_DATA = "tasks.text_classification.data.TextClassificationData"


class MyClassifier(TextClassification):
    """A user's classifier: it takes TextClassification checkpoints."""


def stored(model: str | None, data: str | None) -> dict[str, Any]:
    """A checkpoint dict as the check reads it: class paths in the hyper-parameters and the payload."""
    ckpt: dict[str, Any] = {PAYLOAD_KEY: {"class_path": model}}
    if model:
        ckpt["hyper_parameters"] = {"_class_path": model}
    if data:
        ckpt["datamodule_hyper_parameters"] = {"_class_path": data}
    return ckpt


def write_config(path: Path, model: str | None = None, data: str | None = None, root: str | None = None) -> Path:
    """A -c file with the given model and data class paths and default_root_dir."""
    config: dict[str, Any] = {"trainer": {"default_root_dir": root} if root else {}}
    if model:
        config["model"] = {"class_path": model, "init_args": {}}
    if data:
        config["data"] = {"class_path": data, "init_args": {}}
    path.write_text(yaml.safe_dump(config))
    return path


def test_class_paths_come_from_flags_then_the_last_config_that_names_one(tmp_path: Path) -> None:
    """Flags win over -c files, a later -c file over an earlier one; a config file given as a section is no class."""
    first = write_config(tmp_path / "a.yaml", model=LM, data=LM_DATA, root="runs/a")
    second = write_config(tmp_path / "b.yaml", model=CLASSIFIER)
    argv = ["test", "-c", str(first), f"--config={second}"]
    assert configured_class_path(argv, "model") == CLASSIFIER
    assert configured_class_path(argv, "data") == LM_DATA
    assert configured_root(argv) == "runs/a"
    assert configured_class_path([*argv, "--model.class_path", LM], "model") == LM
    assert configured_class_path([*argv, "--model", "TextClassification"], "model") == "TextClassification"
    assert configured_class_path(["test", "--model", "model.yaml"], "model") is None
    assert configured_class_path(["test", "-c", str(tmp_path / "missing.yaml")], "model") is None


def test_same_task_is_the_class_or_a_subclass() -> None:
    """Different tasks differ; a class and its subclass, or a short name of the class, are the same task."""
    mine = f"{__name__}.{MyClassifier.__name__}"
    assert not same_task(CLASSIFIER, LM) and not same_task(mine, LM)
    assert same_task(mine, CLASSIFIER) and same_task(CLASSIFIER, mine)
    assert same_task("TextClassification", CLASSIFIER) and not same_task("LanguageModeling", CLASSIFIER)
    assert task_name(LM) == "language_modeling" and task_name("my.pkg.Tagger") == "Tagger"


@pytest.mark.parametrize(
    ("argv_model", "argv_data", "fails_on"),
    [(CLASSIFIER, None, "model"), (LM, CLASSIFIER_DATA, "data"), (LM, LM_DATA, None), (None, None, None)],
)
def test_a_config_of_another_task_is_one_config_error(
    tmp_path: Path, argv_model: str | None, argv_data: str | None, fails_on: str | None
) -> None:
    """A language model's checkpoint against configs of each kind: only another task's model or data is refused."""
    config = write_config(tmp_path / "c.yaml", model=argv_model, data=argv_data)
    ckpt = tmp_path / "lm.ckpt"
    argv = ["test", "-c", str(config), "--ckpt_path", str(ckpt)]
    if fails_on is None:
        check_checkpoint_task(argv, ckpt, stored(LM, LM_DATA))
        return
    with pytest.raises(ConfigError) as error:
        check_checkpoint_task(argv, ckpt, stored(LM, LM_DATA))
    message = str(error.value)
    assert message.startswith(f"--ckpt_path {ckpt} is a language_modeling checkpoint (") and "\n" not in message
    assert f"the config's {fails_on} is {argv_model if fails_on == 'model' else argv_data}: " in message


def test_a_payload_class_path_alone_is_checked(tmp_path: Path) -> None:
    """A converted checkpoint without Lightning hyper-parameters is still known by its payload's class path."""
    config = write_config(tmp_path / "c.yaml", model=CLASSIFIER)
    ckpt = {PAYLOAD_KEY: {"class_path": LM}}
    with pytest.raises(ConfigError, match="is a language_modeling checkpoint"):
        check_checkpoint_task(["fit", "-c", str(config)], tmp_path / "x.ckpt", ckpt)


def test_last_and_best_name_the_configured_runs_files(tmp_path: Path) -> None:
    """`last` / `best` are RUN_DIR/checkpoints/NAME.ckpt; a missing one is an error for evaluation only."""
    config = write_config(tmp_path / "c.yaml", root=str(tmp_path / "run"))
    argv = ["test", "-c", str(config), "--ckpt_path", "best"]
    with pytest.raises(ConfigError, match=f"--ckpt_path best names {tmp_path / 'run' / 'checkpoints' / 'best.ckpt'}"):
        checkpoint_file(argv, required=True)
    assert checkpoint_file(argv, required=False) == tmp_path / "run" / "checkpoints" / "best.ckpt"
    (tmp_path / "run" / "checkpoints").mkdir(parents=True)
    (tmp_path / "run" / "checkpoints" / "best.ckpt").write_bytes(b"")
    assert checkpoint_file(argv, required=True) == tmp_path / "run" / "checkpoints" / "best.ckpt"
    assert checkpoint_file(["test", "--ckpt_path", "x/y.ckpt"], required=True) == Path("x/y.ckpt")
    assert checkpoint_file(["test", "--ckpt_path", "hpc"], required=True) is None
    assert checkpoint_file(["test"], required=True) is None
