"""The non-finite guard: a NaN/inf loss or gradient norm stops training before the update, or skips the batch."""

from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import yaml
from lightning.pytorch.plugins.precision import MixedPrecision
from torch.multiprocessing import ProcessRaisedException

from tests.cli_runner import config_runner
from tests.tasks.language_modeling.conftest import TEXT, tiny_config
from tests.training.forked_ranks import own_port
from tests.training.nonfinite import flat_weights, regression_run
from tests.training.rank_faults import lm_config
from tetraformer.cli import main
from tetraformer.training.callbacks.numerics import NonFiniteError, gradient_norm


def test_nan_loss_stops_before_the_update() -> None:
    """A NaN loss at step 3 stops there, in one line naming step and learning rate; the weights are step 3's start."""
    run = regression_run("stop", nan_steps=(3,))
    with pytest.raises(NonFiniteError) as raised:
        run.fit()
    message = str(raised.value)
    assert "\n" not in message and message.startswith("step 3: the training loss is nan and the gradient norm is nan;")
    assert "learning rate 0.1" in message and "Last good checkpoint: none written yet" in message
    assert torch.equal(flat_weights(run.module), run.recorder.before[3]) and run.trainer.global_step == 3
    assert torch.isfinite(flat_weights(run.module)).all()


def test_infinite_gradient_with_a_finite_loss_stops() -> None:
    """A finite loss whose gradients overflow stops too: the gradient norm is judged."""
    run = regression_run("stop", inf_grad_steps=(2,))
    with pytest.raises(NonFiniteError, match=r"^step 2: the gradient norm is (inf|nan);"):
        run.fit()
    assert torch.equal(flat_weights(run.module), run.recorder.before[2])


def test_skip_leaves_weights_and_optimizer_state_alone() -> None:
    """Skipped batches change no weight and no AdamW state (its per-parameter step counts only applied updates)."""
    run = regression_run("skip", max_steps=8, nan_steps=(2, 5), inf_grad_steps=(6,))
    run.fit()
    recorded = run.recorder
    assert run.guard.skipped == 3 and run.guard.state_dict() == {"nonfinite_skipped": 3}
    for step in range(8):
        unchanged = torch.equal(recorded.before[step], recorded.after[step])
        assert unchanged == (step in (2, 5, 6)), step
    assert torch.isfinite(flat_weights(run.module)).all()
    adam_steps = {int(state["step"]) for state in run.trainer.optimizers[0].state.values()}
    assert adam_steps == {8 - 3}


def test_gradient_scaler_owns_infinite_gradients() -> None:
    """Under a gradient scaler (16-mixed) inf gradients are left to it: no stop, and it skips that update itself."""
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**8)
    run = regression_run("stop", precision=MixedPrecision("16-mixed", "cpu", scaler), inf_grad_steps=(2,))
    run.fit()
    assert run.trainer.global_step == 6 and scaler.get_scale() < 2.0**8
    assert torch.equal(run.recorder.before[2], run.recorder.after[2])


def test_gradient_scaler_still_stops_on_a_nan_loss() -> None:
    """Under a gradient scaler the loss is still judged."""
    scaler = torch.amp.GradScaler("cpu")
    run = regression_run("stop", precision=MixedPrecision("16-mixed", "cpu", scaler), nan_steps=(1,))
    with pytest.raises(NonFiniteError, match="^step 1: the training loss is nan"):
        run.fit()


def test_a_nan_in_any_accumulated_micro_batch_counts() -> None:
    """With gradient accumulation (2 batches a step) a NaN loss in the step's first batch stops that step, even
    where only the loss is judged (under a gradient scaler)."""
    scaler = torch.amp.GradScaler("cpu")
    run = regression_run("stop", precision=MixedPrecision("16-mixed", "cpu", scaler), accumulate=2, nan_batches=(4,))
    with pytest.raises(NonFiniteError, match="^step 2: the training loss is"):
        run.fit()


def test_gradient_norm_is_the_norm_of_all_gradients() -> None:
    """One norm over the parameters' gradients (as clipping computes it); None when none has a gradient."""
    layer = torch.nn.Linear(3, 2)
    assert gradient_norm(layer.parameters()) is None
    layer(torch.ones(1, 3)).sum().backward()
    expected = torch.cat([p.grad.flatten() for p in layer.parameters()]).norm()
    assert torch.allclose(gradient_norm(layer.parameters()), expected)


# --- through the CLI: a tiny language model whose loss turns NaN at step 7 (checkpoints at steps 5 and 10) ---------
def nan_lm_config(root: Path, nan_step: int = 7, **data: object) -> dict:
    """tiny_config with the task whose loss is NaN at `nan_step`."""
    config = tiny_config(root, **data)
    config["model"]["class_path"] = "tests.training.nonfinite.NaNLanguageModeling"
    config["model"]["init_args"]["nan_step"] = nan_step
    return config


@pytest.fixture
def nan_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Path]:
    """`nan_run(*ARGS)`: `tetraformer fit` of nan_lm_config on the fixture text; returns the run dir."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TEXT * 12, encoding="utf-8")
    run = config_runner(tmp_path, monkeypatch, nan_lm_config)
    return lambda *args: run("fit", "--trainer.max_steps", "12", *args, train_path=str(corpus), documents="line")


def test_cli_stops_at_the_nan_step_keeping_the_good_checkpoint(
    nan_run: Callable[..., Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`fit` exits 2 with one `error: step 7: ...` line naming last.ckpt (step 5) and the learning rate."""
    with pytest.raises(SystemExit) as exited:
        nan_run()
    assert exited.value.code == 2
    last = tmp_path / "run" / "checkpoints" / "last.ckpt"
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith("error: step 7: the training loss is nan")
    assert f"Last good checkpoint: {last} (step 5); learning rate 0.003" in errors[0]
    ckpt = torch.load(last, weights_only=True)
    assert ckpt["global_step"] == 5 and all(torch.isfinite(t).all() for t in ckpt["state_dict"].values())


def test_cli_skip_finishes_and_counts_the_skipped_batch(nan_run: Callable[..., Path], tmp_path: Path) -> None:
    """`--run.on_nonfinite skip` trains to the end with finite weights; the count is logged and checkpointed."""
    run = nan_run("--run.on_nonfinite", "skip")
    ckpt = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)
    assert ckpt["global_step"] == 12 and all(torch.isfinite(t).all() for t in ckpt["state_dict"].values())
    assert ckpt["callbacks"]["NonFiniteGuard"] == {"nonfinite_skipped": 1}
    counts = [row["train/nonfinite_skipped"] for row in metrics_rows(run) if row.get("train/nonfinite_skipped")]
    assert float(counts[0]) == 0.0 and float(counts[-1]) == 1.0


def metrics_rows(run: Path) -> list[dict[str, str]]:
    """Every row of the run's metrics.csv files."""
    rows: list[dict[str, str]] = []
    for path in sorted(run.rglob("metrics.csv")):
        with path.open(encoding="utf-8") as f:
            rows += list(csv.DictReader(f))
    return rows


@pytest.mark.distributed
def test_nan_on_one_rank_stops_both_ranks_at_the_same_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """NaN on rank 1 only: both ranks stop at step 7, each saying so, and last.ckpt stays at step 5.

    The decision is the guard's reduce over ranks, not the launcher's: the two ranks are forked from the test
    process (tests/training/forked_ranks.py), each writing the error that ended it."""
    monkeypatch.setenv("WANDB_MODE", "disabled")
    own_port(monkeypatch)
    config = lm_config(tmp_path)
    config["model"]["class_path"] = "tests.training.nonfinite.NaNLanguageModeling"
    errors = tmp_path / "errors"
    config["model"]["init_args"].update(nan_step=7, nan_rank=1, errors_dir=str(errors))
    config["trainer"].update(devices=2, strategy="ddp_fork", max_steps=12)
    path = tmp_path / "ddp.yaml"
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(ProcessRaisedException, match="NonFiniteError"):
        main(["fit", "-c", str(path)])
    said = {rank: (errors / f"rank{rank}").read_text() for rank in (0, 1)}
    assert said[1].startswith("step 7: rank 1: the training loss is nan"), said
    assert said[0].startswith("step 7: rank 0: "), said  # its gradients, all-reduced with rank 1's, are NaN too
    assert torch.load(tmp_path / "run" / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == 5
