"""scripts/pretraining_curve.py: a tiny masked-LM run's snapshots and a from-scratch run make a curve."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pretraining_curve
import pytest
import yaml

from tests.tasks.masked_lm.conftest import tiny_config as pretrain_config
from tests.tasks.text_classification.conftest import labelled_rows, tiny_config, write_csv
from tetraformer.cli import main as tetraformer


def write_yaml(path: Path, config: dict) -> Path:
    """A config file."""
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.slow  # a 4-step pretraining, then two fits and two tests in this process
def test_curve_from_scratch_and_a_snapshot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Budget 0 trains from scratch, budget 4 from the kept step-4.ckpt; both are tested on the test split, the
    table has a row each, and a second call reuses the finished runs instead of training again. The runs' commands
    go through the CLI in this process (`cli`'s child process is the next test's)."""
    splits = {
        n: write_csv(tmp_path / f"{n}.csv", labelled_rows(k, s)) for n, k, s in (("train", 96, 0), ("test", 30, 2))
    }
    pretrain = pretrain_config(tmp_path / "mlm", train_path=str(splits["train"]), text_field="text")
    pretrain["trainer"].update(max_steps=4, val_check_interval=4)
    pretrain["run"]["keep_every_n_steps"] = 4
    tetraformer(["fit", "-c", str(write_yaml(tmp_path / "mlm.yaml", pretrain))])

    shape = dict(pretrain["model"]["init_args"]["arch"])
    data = {"train_path": str(splits["train"]), "val_path": str(splits["test"]), "max_length": 32}
    scratch = tiny_config(tmp_path / "unused", model={"arch": shape}, **data)
    finetune = tiny_config(tmp_path / "unused", **data)
    for key in ("tokenizer_type", "vocab_size"):
        del finetune["data"]["init_args"][key]  # the snapshot's tokenizer
    finetune["model"]["init_args"]["arch"] = {"dropout": 0.0}
    argv = ["--pretrained", str(tmp_path / "mlm"), "--out", str(tmp_path / "curve"), "--test_path", str(splits["test"])]
    argv += ["--finetune", str(write_yaml(tmp_path / "ft.yaml", finetune))]
    argv += ["--scratch", str(write_yaml(tmp_path / "scratch.yaml", scratch)), "--", "--trainer.max_epochs", "2"]
    commands: list[str] = []
    monkeypatch.setattr(pretraining_curve, "cli", lambda *args: commands.append(args[0]) or tetraformer(list(args)))
    rows = pretraining_curve.main(argv)

    assert commands == ["fit", "test", "fit", "test"]
    assert [budget.steps for budget, _ in rows] == [0, 4]
    assert rows[1][0].mlm_accuracy is not None  # the pretraining validated at step 4
    for _, (result,) in rows:
        assert 0.0 <= result["test/acc"] <= 1.0
    curve = (tmp_path / "curve" / "curve.md").read_text()
    assert "| 0 (from scratch) |" in curve and "| 4 |" in curve

    monkeypatch.setattr(pretraining_curve, "cli", lambda *args: pytest.fail(f"ran again: {args}"))
    assert [r for _, r in pretraining_curve.main(argv)] == [r for _, r in rows]


def test_cli_runs_tetraformer_from_this_checkout_in_a_child(monkeypatch: pytest.MonkeyPatch) -> None:
    """`cli(ARGS...)` runs `python -m tetraformer.cli ARGS...` with this interpreter, in a child whose environment
    imports the platform and the tasks from this checkout (shown by a light child with that environment: the CLI's
    own imports cost a fresh interpreter ~6 s)."""
    calls: list[tuple[list[str], dict[str, str]]] = []
    with monkeypatch.context() as patch:  # the script's module is subprocess itself
        patch.setattr(pretraining_curve.subprocess, "run", lambda command, **kw: calls.append((command, kw["env"])))
        pretraining_curve.cli("--help")
    ((command, env),) = calls
    assert command == [sys.executable, "-m", "tetraformer.cli", "--help"]
    code = "import tetraformer, tasks; print(tetraformer.__file__); print(tasks.__file__)"
    found = subprocess.run([sys.executable, "-c", code], env=env, cwd="/", capture_output=True, text=True, check=True)
    root = Path(pretraining_curve.__file__).resolve().parents[1]
    assert found.stdout.split() == [str(root / "platform/tetraformer/__init__.py"), str(root / "tasks/__init__.py")]


def test_snapshots_sort_by_step(tmp_path: Path) -> None:
    """step-10 comes after step-9 (numbers, not names); other checkpoints are not budgets."""
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    for name in ("step-10.ckpt", "step-9.ckpt", "last.ckpt", "best.ckpt"):
        (folder / name).touch()
    assert [step for step, _ in pretraining_curve.snapshots(tmp_path)] == [9, 10]
