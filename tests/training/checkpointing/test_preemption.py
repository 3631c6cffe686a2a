"""Preemption: SIGTERM / SIGUSR1 save last.ckpt at the next step boundary, exit 0 on every rank, and resume exactly.

A fit signalled in this process shows the single-device path (the boundary, the line, the requeue, the exact
resume); SIGTERM from outside, at whatever moment it lands, is sent to a rank process of a two-rank run (started as
SLURM's srun starts a job's tasks), which exits 0 with its partner and resumes exactly.
"""

from __future__ import annotations

import csv
import logging
import os
import signal
from pathlib import Path

import pytest
from lightning.fabric.plugins.environments import LightningEnvironment, SLURMEnvironment

from tests.training.forked_ranks import own_port
from tests.training.resume_runs import (
    STEPS,
    checkpoint,
    fit,
    paced,
    same_weights,
    signalled,
    start_ranks,
    wait_for_step,
    write_config,
)
from tetraformer.training.checkpointing.preemption import (
    requeue_slurm_job,
    resume_command,
    slurm_job_id,
    with_slurm_environment,
)

BATCHES_PER_EPOCH = 6  # the fixture run's 41 training blocks in batches of 8


def fake_scontrol(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exit_code: int = 0) -> Path:
    """Put an `scontrol` on PATH that records its arguments (and exits with `exit_code`); the record file."""
    record, bin_dir = tmp_path / "scontrol.args", tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "scontrol"
    script.write_text(f'#!/bin/sh\necho "$@" >> {record}\necho "scontrol says no" >&2\nexit {exit_code}\n')
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    return record


def validated_steps(run: Path) -> list[int]:
    """The steps the first fit of a run validated at (metrics rows sit at global_step - 1)."""
    with (run / "logs" / "version_0" / "metrics.csv").open() as f:
        return [int(row["step"]) + 1 for row in csv.DictReader(f) if row.get("val/loss")]


def data_position_matches(ckpt: dict, per_epoch: int = BATCHES_PER_EPOCH) -> bool:
    """Whether the saved loader position is exactly the saved step's on every rank (no half-done step)."""
    (state,) = ckpt["loops"]["fit_loop"]["state_dict"]["combined_loader"]
    position = state["ranks"][0]  # every rank's, gathered: data-parallel ranks are at the same batch
    same = all(other == position for other in state["ranks"])
    return same and position["epoch"] * per_epoch + position["batches"] == ckpt["global_step"]


@pytest.mark.parametrize(
    ("signum", "step", "validating", "validated"),
    [(signal.SIGUSR1, 7, False, [5]), (signal.SIGTERM, 10, True, [5, 10])],
    ids=["SIGUSR1-in-a-step", "SIGTERM-in-a-validation"],
)  # SIGTERM in a step: the two-rank test's, sent from outside
def test_signal_stops_at_the_boundary_with_last_saved_and_resumes_exactly(
    signum: int,
    step: int,
    validating: bool,
    validated: list[int],
    uninterrupted: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A signal during step 7 (or the validation at step 10), under SLURM: fit returns normally right after it
    with last.ckpt of that step and no further validation or step, logs how to resume, requeues the job only
    for SIGUSR1, gives the signal back; the resumed run ends with the uninterrupted weights."""
    caplog.set_level(logging.INFO)
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    requeued = fake_scontrol(tmp_path, monkeypatch)
    handler = signal.getsignal(signum)
    config = write_config(tmp_path, tmp_path / "run", **signalled(step, signum, validating))
    fit(config)
    ckpt = checkpoint(tmp_path / "run")
    assert ckpt["global_step"] == step and data_position_matches(ckpt)
    assert validated_steps(tmp_path / "run") == validated
    resume = f"tetraformer fit -c {config} --ckpt_path last"
    assert (
        f"{signal.Signals(signum).name}: stopped at step {step} with last.ckpt saved; resume with: {resume}"
        in caplog.text
    )
    assert signal.getsignal(signum) == handler  # fit gave the signal back
    requeues = requeued.read_text().splitlines() if requeued.exists() else []
    assert requeues == (["requeue 4242"] if signum == signal.SIGUSR1 else [])
    fit(config, "--ckpt_path", "last")
    assert same_weights(tmp_path / "run", uninterrupted)


@pytest.mark.slow
def test_an_epoch_cut_by_an_integer_limit_resumes_mid_epoch_exactly(tmp_path: Path) -> None:
    """With `limit_train_batches 4` each epoch stops after 4 of its 6 batches; stopped at step 6 (epoch 1, batch 2)
    the run saves that position, and resumed it takes the epoch's last 2 batches and ends with the weights of the
    same limited run that never stopped."""
    end = ("--trainer.max_steps", "12")  # three epochs of 4 batches
    whole = write_config(tmp_path, tmp_path / "whole", limit_train_batches=4)
    fit(whole, *end)
    config = write_config(tmp_path, tmp_path / "run", limit_train_batches=4, **signalled(6, signal.SIGTERM))
    fit(config, *end)
    (state,) = checkpoint(tmp_path / "run")["loops"]["fit_loop"]["state_dict"]["combined_loader"]
    assert state == {"ranks": [{"epoch": 1, "batches": 2}]}
    fit(config, *end, "--ckpt_path", "last")
    epochs = [checkpoint(tmp_path / name)["epoch"] for name in ("run", "whole")]
    assert epochs == [2, 2]  # both end in their third epoch (counted from 0)
    assert same_weights(tmp_path / "run", tmp_path / "whole")


@pytest.mark.distributed
def test_sigterm_to_one_ddp_rank_stops_both_and_resumes_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two gloo ranks: SIGTERM to rank 1 only stops both at the same step, both exit 0; resumed, the run ends
    with the weights of an uninterrupted two-rank run (per-rank RNG states, per-rank batches). The signalled ranks
    are processes of their own, started as srun starts two tasks of a job, each with the command
    scripts/slurm/train.sbatch gives them (`--ckpt_path last`: a first job starts from scratch;
    tests/scripts/test_slurm_sbatch.py checks the script's command line). The uninterrupted run and the resumed one
    (the requeued job's `--ckpt_path last`) fork their two ranks from this process (tests/training/forked_ranks.py):
    a resume in fresh processes is the promise matrix's (tests/promises/test_resume.py)."""
    ddp = {"strategy": "ddp", "devices": 2}
    reference = tmp_path / "reference"
    own_port(monkeypatch)
    fit(write_config(tmp_path, reference, strategy="ddp_fork", devices=2))
    run, release = tmp_path / "run", tmp_path / "signalled"
    config = write_config(tmp_path, run, **ddp, **paced(release))
    ranks = start_ranks(config, "--ckpt_path", "last", logs=tmp_path)
    try:
        wait_for_step(run, 5, ranks[0])
        ranks[1].send_signal(signal.SIGTERM)
    finally:
        release.touch()
        codes = [rank.wait(timeout=600) for rank in ranks]
    logs = [(tmp_path / f"rank{rank}.log").read_text() for rank in (0, 1)]
    assert codes == [0, 0], logs[0][-3000:]
    # SLURMEnvironment's ranks (Lightning spawning its own would not make rank 1 MEMBER 2/2), a fresh first job
    assert "GLOBAL_RANK: 0, MEMBER: 1/2" in logs[0] and "GLOBAL_RANK: 1, MEMBER: 2/2" in logs[1], logs[1][-3000:]
    assert "Restoring states from the checkpoint path" not in logs[0]
    ckpt = checkpoint(run)
    assert ckpt["global_step"] < STEPS and data_position_matches(ckpt, per_epoch=BATCHES_PER_EPOCH // 2)
    assert len(ckpt["rng_states"]) == 2
    assert f"SIGTERM: stopped at step {ckpt['global_step']}" in logs[0]
    fit(config, "--trainer.strategy", "ddp_fork", "--ckpt_path", "last")  # the requeued job, its ranks forked here
    assert same_weights(run, reference)


def test_resume_command_asks_for_last() -> None:
    """The logged command is this one with `--ckpt_path last` in place of any --ckpt_path."""
    argv = ["fit", "-c", "my run.yaml", "--ckpt_path", "x.ckpt", "--ckpt_path=y", "--trainer.max_steps", "9"]
    assert resume_command(argv) == "tetraformer fit -c 'my run.yaml' --trainer.max_steps 9 --ckpt_path last"


def test_requeue_failures_are_logged_not_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """An array task is requeued as JOB_TASK; a failing or missing scontrol is an error line, not an exception."""
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    monkeypatch.setenv("SLURM_ARRAY_JOB_ID", "70")
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "3")
    assert slurm_job_id() == "70_3"
    fake_scontrol(tmp_path, monkeypatch, exit_code=1)
    assert requeue_slurm_job() is False
    assert "scontrol requeue 70_3 failed (exit 1): scontrol says no" in caplog.text
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    assert requeue_slurm_job() is False
    assert "could not requeue SLURM job 70_3" in caplog.text


def test_under_slurm_lightning_does_not_requeue(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under srun the trainer gets a SLURMEnvironment without auto-requeue; a configured environment is kept."""
    for name in ("SLURM_NTASKS", "SLURM_JOB_NAME"):
        monkeypatch.delenv(name, raising=False)
    assert with_slurm_environment([]) == []
    monkeypatch.setenv("SLURM_NTASKS", "2")
    monkeypatch.setenv("SLURM_NTASKS_PER_NODE", "2")
    monkeypatch.setenv("SLURM_JOB_NAME", "train")
    (environment,) = with_slurm_environment([])
    assert isinstance(environment, SLURMEnvironment) and environment.auto_requeue is False
    own = LightningEnvironment()
    assert with_slurm_environment([own]) == [own]
