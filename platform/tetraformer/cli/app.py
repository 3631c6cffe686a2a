"""`tetraformer`: LightningCLI subcommands (fit, validate, test, predict) plus generate and tokenizer."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from lightning.pytorch import Trainer
from lightning.pytorch.loggers import CSVLogger

from tetraformer.cli.checkpoint_task import check_resumed_task
from tetraformer.cli.commands import COMMANDS
from tetraformer.cli.eval_runs import EVAL_STAGES, evaluation_args
from tetraformer.cli.lightning_cli import SUBCOMMANDS, build_cli
from tetraformer.cli.reporting import reporting
from tetraformer.safe_loading import (
    trust_requested,
    trusting_checkpoints,
)
from tetraformer.training.callbacks.defaults import JsonlPredictionWriter
from tetraformer.training.reports.loggers import finish_wandb_run, started_wandb_run

log = logging.getLogger(__name__)


def launcher_path() -> str:
    """sys.argv[0] for LightningCLI: the console script's own path, which Lightning's DDP launcher runs again for
    each further rank (`python -m` is run again by module name), else `tetraformer`, the prog in usage lines."""
    current = Path(sys.argv[0]) if sys.argv else Path()
    return str(current) if current.name == "tetraformer" and current.is_file() else "tetraformer"


def run_lightning(argv: list[str]) -> None:
    """Run a LightningCLI subcommand (it parses sys.argv, so the rewritten arguments go there)."""
    if argv and argv[0] == "fit":
        check_resumed_task(argv)  # before LightningCLI's own torch.load of the checkpoint
    sys.argv = [launcher_path(), *evaluation_args(argv)]
    command = f"tetraformer {argv[0]}" if argv and argv[0] in SUBCOMMANDS else "tetraformer"
    cli = build_cli(argv, command)
    if cli.subcommand in EVAL_STAGES:
        report_outputs(cli.trainer)
    finish_wandb(cli.trainer)


def report_outputs(trainer: Trainer) -> None:
    """Say where an evaluation stage wrote its metrics, predictions and W&B run."""
    paths = [Path(lg.log_dir) / "metrics.csv" for lg in trainer.loggers if isinstance(lg, CSVLogger)]
    paths += [cb.output for cb in trainer.callbacks if isinstance(cb, JsonlPredictionWriter)]
    run = started_wandb_run(trainer.loggers)
    if run is not None:
        paths.append(Path(run.dir).parent)
    for path in paths:
        if path.exists():
            log.info("wrote %s", path)


def finish_wandb(trainer: Trainer) -> None:
    """Close the run's W&B run so its (offline) files are complete before the command returns."""
    run = started_wandb_run(trainer.loggers)
    if run is not None:
        finish_wandb_run(run)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the `tetraformer` console script, for the commands that need Lightning or a checkpoint."""
    argv = list(sys.argv[1:] if argv is None else argv)
    reporting(lambda: dispatch(argv))


def dispatch(argv: list[str]) -> None:
    """Run an extra command or a LightningCLI subcommand, trusting checkpoints as the arguments ask."""
    with trusting_checkpoints(trust_requested(argv)):
        if argv and argv[0] in COMMANDS:
            COMMANDS[argv[0]](argv[1:])
        else:
            run_lightning(argv)
