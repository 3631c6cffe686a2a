"""`tetraformer`: LightningCLI subcommands (fit, validate, test, predict) plus generate and tokenizer."""

from __future__ import annotations

import logging
import sys
import tempfile
from argparse import ArgumentError
from pathlib import Path
from typing import Any

import yaml
from lightning.pytorch import Trainer
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI, SaveConfigCallback

from tetraformer.config_errors import ConfigError, one_line
from tetraformer.errors import TetraformerError
from tetraformer.training.callbacks import JsonlPredictionWriter, default_callbacks
from tetraformer.training.checkpoint import PAYLOAD_KEY, read_checkpoint, tokenizer_from_state
from tetraformer.training.datamodule import TaskDataModule
from tetraformer.training.loggers import RunConfig, make_loggers, wandb_logger
from tetraformer.training.module import TaskModule

log = logging.getLogger(__name__)
SUBCOMMANDS = ("fit", "validate", "test", "predict")
DESCRIPTION = """Train and use Transformers from one core.

Lightning subcommands: fit, validate, test, predict (each takes -c CONFIG and --section.key=value).
Other commands: `tetraformer generate --ckpt PATH --prompt TEXT`, `tetraformer tokenizer train ...`,
`tetraformer convert from-hf SRC_DIR OUT_CKPT | to-hf CKPT OUT_DIR` (run each with --help)."""


class LogConfigCallback(SaveConfigCallback):
    """Saves the resolved config next to the run and logs it as hyper-parameters to every logger."""

    def save_config(self, trainer: Trainer, pl_module: Any, stage: str) -> None:
        """Log the whole resolved config (W&B config, CSV hparams.yaml)."""
        config = yaml.safe_load(self.parser.dump(self.config, skip_none=False))
        for logger in trainer.loggers:
            logger.log_hyperparams(config)


class TetraformerCLI(LightningCLI):
    """LightningCLI whose configs pick a task's module and datamodule by class_path."""

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        """Add the `run` section: W&B identity, checkpoint metric, early stopping, predictions file."""
        parser.add_class_arguments(RunConfig, "run")
        parser.add_argument(
            "--predictions", default=None, help="predict: JSONL output (default RUN_DIR/predictions.jsonl)"
        )

    def instantiate_trainer(self, **kwargs: Any) -> Trainer:
        """Default loggers and callbacks unless the config sets its own."""
        trainer_cfg = self._get(self.config_init, "trainer", default={})
        run: RunConfig = self._get(self.config_init, "run")
        root = Path(trainer_cfg.get("default_root_dir") or ".")
        if trainer_cfg.get("logger") in (None, True):
            kwargs["logger"] = make_loggers(
                root, run, resumed_wandb_id(self._get(self.config_init, "ckpt_path"), root)
            )
        callbacks = list(trainer_cfg.get("callbacks") or [])
        if trainer_cfg.get("enable_checkpointing", True) is not False:
            callbacks += default_callbacks(root, run)
        if self.subcommand == "predict":
            output = self._get(self.config_init, "predictions") or root / "predictions.jsonl"
            callbacks.append(JsonlPredictionWriter(output))
        kwargs["callbacks"] = callbacks
        return super().instantiate_trainer(**kwargs)


def resumed_wandb_id(ckpt_path: str | None, root: Path) -> str | None:
    """The W&B run id stored in the checkpoint a `fit --ckpt_path` resumes, so the W&B run continues too."""
    path = (
        root / "checkpoints" / "last.ckpt" if ckpt_path == "last" else Path(ckpt_path) if ckpt_path else None
    )
    if path is None or not path.is_file():
        return None
    return read_checkpoint(path)[PAYLOAD_KEY].get("wandb_run_id")


def checkpoint_config(argv: list[str]) -> list[str]:
    """For validate/test/predict with --ckpt_path and no config, rebuild the config from the checkpoint."""
    if not argv or argv[0] not in ("validate", "test", "predict") or _has_config(argv):
        return argv
    ckpt_path = _flag_value(argv, "--ckpt_path")
    if ckpt_path is None:
        return argv
    ckpt = read_checkpoint(ckpt_path)
    sections = {}
    for key, name in (("hyper_parameters", "model"), ("datamodule_hyper_parameters", "data")):
        hparams = dict(ckpt.get(key, {}))
        hparams.pop("_instantiator", None)
        class_path = hparams.pop("_class_path", None)
        if class_path:
            sections[name] = {"class_path": class_path, "init_args": hparams}
    workdir = Path(tempfile.mkdtemp(prefix="tetraformer-"))
    tokenizer = tokenizer_from_state(ckpt[PAYLOAD_KEY]["tokenizer"])
    if tokenizer is not None and "data" in sections and not sections["data"]["init_args"].get("tokenizer"):
        tokenizer.save_pretrained(workdir / "tokenizer")  # the datamodule tokenizes with the checkpoint's own
        sections["data"]["init_args"]["tokenizer"] = str(workdir / "tokenizer")
    config = workdir / "from_checkpoint.yaml"
    config.write_text(yaml.safe_dump(sections))
    return [argv[0], "-c", str(config), *argv[1:]]


def _has_config(argv: list[str]) -> bool:
    return any(a in ("-c", "--config") or a.startswith("--config=") for a in argv)


def _flag_value(argv: list[str], flag: str) -> str | None:
    """Value of `--flag value` or `--flag=value`, if present."""
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None


def run_lightning(argv: list[str]) -> None:
    """Run a LightningCLI subcommand (it parses sys.argv, so the rewritten arguments go there)."""
    sys.argv = [sys.argv[0], *checkpoint_config(argv)]
    quiet = {"exit_on_error": False}  # parse errors come back as exceptions, told in one line by main
    try:
        cli = TetraformerCLI(
            TaskModule,
            TaskDataModule,
            subclass_mode_model=True,
            subclass_mode_data=True,
            save_config_callback=LogConfigCallback,
            save_config_kwargs={"overwrite": True},
            auto_configure_optimizers=False,
            parser_kwargs={"description": DESCRIPTION, **quiet, **{s: quiet for s in SUBCOMMANDS}},
        )
    except ArgumentError as err:
        command = f"tetraformer {argv[0]}" if argv and argv[0] in SUBCOMMANDS else "tetraformer"
        raise ConfigError(f"{one_line(str(err))} (see {command} --help)") from None
    finish_wandb(cli.trainer)


def finish_wandb(trainer: Trainer) -> None:
    """Close the run's W&B run so its (offline) files are complete before the command returns."""
    logger = wandb_logger(trainer.loggers)
    if logger is not None and logger._experiment is not None:
        import wandb

        logger.experiment.finish()
        wandb.teardown()  # waits for the W&B service to write everything (offline finish alone may not)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the `tetraformer` console script."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    argv = list(sys.argv[1:] if argv is None else argv)
    from tetraformer.commands import COMMANDS

    try:
        if argv and argv[0] in COMMANDS:
            COMMANDS[argv[0]](argv[1:])
        else:
            run_lightning(argv)
    except (TetraformerError, FileNotFoundError) as err:  # the user can fix it: one line, no traceback
        sys.stderr.write(f"error: {err}\n")
        raise SystemExit(2) from err


if __name__ == "__main__":
    main()
