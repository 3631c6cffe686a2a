"""`fit --ckpt_path` with model options other than the checkpoint's: another architecture is refused in one line
(the weights fix it), other options the checkpoint's replace are named in one warning (cli/checkpoint_task.py)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from jsonargparse import Namespace

from tetraformer.cli.checkpoint_task import check_resumed_model
from tetraformer.errors import ConfigError

CKPT = Path("runs/x/checkpoints/last.ckpt")


def model(d_model: int = 64, lr: float = 1e-3) -> Namespace:
    """A parsed model section as jsonargparse holds it."""
    arch = Namespace(d_model=d_model, n_heads=2, dropout=0.1)
    return Namespace(class_path="tasks.x.X", init_args=Namespace(arch=arch, optim=Namespace(lr=lr)))


def test_another_architecture_is_refused_naming_the_option_and_the_way(caplog: pytest.LogCaptureFixture) -> None:
    """--model.arch.d_model 32 on a d_model 64 checkpoint: one line naming both values and --model.init_from."""
    for laid_over in (True, False):  # a file path (Lightning lays the checkpoint's over) or `last` (it does not)
        with pytest.raises(ConfigError) as err:
            check_resumed_model(model(d_model=32), model(d_model=64), CKPT, laid_over)
        said = str(err.value)
        assert "--model.arch.d_model 32 (the checkpoint's: 64)" in said, said
        assert "comes from its checkpoint" in said and f"--model.init_from {CKPT}" in said, said


def test_other_dropped_options_get_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    """An optimizer option the checkpoint's replaces is named once; where Lightning keeps the config's, nothing."""
    with caplog.at_level(logging.WARNING):
        check_resumed_model(model(lr=1e-2), model(lr=1e-3), CKPT, laid_over=True)
        check_resumed_model(model(lr=1e-2), model(lr=1e-3), CKPT, laid_over=False)
    [record] = caplog.records
    assert "--model.optim.lr 0.01 (the checkpoint's: 0.001)" in record.getMessage()


def test_the_same_options_pass_quietly(caplog: pytest.LogCaptureFixture) -> None:
    """Resuming with the config the run trained with says nothing."""
    with caplog.at_level(logging.WARNING):
        check_resumed_model(model(), model(), CKPT, laid_over=True)
    assert not caplog.records
