"""The LM task declares only its own options; the base classes' options still show, parse and are saved."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

from tests.tasks.language_modeling.conftest import reference_data, tiny_config
from tetraformer.cli import main

DATA_BASE = {
    "train_path",
    "val_path",
    "test_path",
    "predict_path",
    "tokenizer",
    "batch_size",
    "num_workers",
    "val_fraction",
    "seed",
}
MODEL_BASE = {"arch", "optim", "init_from", "label_smoothing"}


def test_print_config_lists_base_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`fit -c CONFIG --print_config` shows the TaskDataModule and TaskModule options with their values."""
    config = tmp_path / "fit.yaml"
    config.write_text(yaml.safe_dump(tiny_config(tmp_path / "run", train_path="corpus.txt")))
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "-c", str(config), "--data.num_workers", "2", "--print_config"])
    assert exit_info.value.code in (0, None)
    printed = yaml.safe_load(capsys.readouterr().out)
    data, model = printed["data"]["init_args"], printed["model"]["init_args"]
    assert set(data) >= DATA_BASE and set(model) >= MODEL_BASE
    assert (data["batch_size"], data["num_workers"], data["seed"], data["train_path"]) == (
        8,
        2,
        1234,
        "corpus.txt",
    )
    assert data["block_size"] == 16 and model["arch"]["d_model"] == 64 and model["label_smoothing"] == 0.0


@pytest.mark.parametrize(
    ("section", "class_path", "options"),
    [
        ("data", "tasks.language_modeling.data.LanguageModelingData", DATA_BASE),
        ("model", "tasks.language_modeling.module.LanguageModeling", MODEL_BASE),
    ],
)
def test_help_lists_base_options(
    section: str, class_path: str, options: set[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """`fit --data.help CLASS` / `--model.help CLASS` document the options passed through **kwargs."""
    with pytest.raises(SystemExit):
        main(["fit", f"--{section}.help", class_path])
    text = capsys.readouterr().out
    assert all(f"--{section}.{name} " in text for name in options), text


def test_checkpoint_hyperparameters_hold_base_options(trained_run: Path) -> None:
    """save_hyperparameters records the base options too, so `test --ckpt_path` can rebuild the config."""
    ckpt = torch.load(trained_run / "checkpoints" / "last.ckpt", weights_only=True)
    data, model = ckpt["datamodule_hyper_parameters"], ckpt["hyper_parameters"]
    assert set(data) >= DATA_BASE and set(model) >= MODEL_BASE
    assert (data["val_fraction"], data["batch_size"], data["train_path"]) == (
        0.2,
        8,
        reference_data(trained_run)["train_path"],
    )
    assert model["arch"]["d_model"] == 64 and model["arch"]["d_ff"] == 96 and model["optim"]["lr"] == 3e-3
