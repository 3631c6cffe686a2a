"""TetraformerCLI: the LightningCLI of fit, validate, test, predict (and `prepare`, which builds it without running)."""

from __future__ import annotations

import sys
from argparse import ArgumentError
from pathlib import Path
from typing import Any

import yaml
from lightning.fabric.utilities.exceptions import MisconfigurationException
from lightning.pytorch import Trainer
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI, SaveConfigCallback

from tetraformer.cli.checkpoint_task import RUN_CHECKPOINTS, check_resumed_model
from tetraformer.cli.config_errors import one_line, trainer_config_error, yaml_error
from tetraformer.cli.eval_runs import EVAL_STAGES, evaluated_spec
from tetraformer.cli.option_errors import (
    check_init_from,
    check_trainer_ranges,
    instantiation_error,
    run_folder,
    told_in_one_line,
    trainer_option_error,
)
from tetraformer.cli.precision import PlatformTrainer, chosen_precision
from tetraformer.cli.quiet import quiet_unsharded_averaging
from tetraformer.errors import ConfigError
from tetraformer.payload import PAYLOAD_KEY, PRECISION_KEY, read_checkpoint
from tetraformer.safe_loading import (
    TRUST_FLAG,
    TRUST_HELP,
    checkpoints_trusted,
    trusted_objects_allowed,
)
from tetraformer.training.base.datamodule import TaskDataModule
from tetraformer.training.base.module import TaskModule
from tetraformer.training.callbacks.defaults import JsonlPredictionWriter, default_callbacks
from tetraformer.training.callbacks.spec_handover import DataSpecHandover
from tetraformer.training.checkpointing.atomic_io import with_atomic_io
from tetraformer.training.checkpointing.preemption import with_slurm_environment
from tetraformer.training.checkpointing.resume import resume_path
from tetraformer.training.distributed.failures import guard_ranks
from tetraformer.training.distributed.strategies import platform_strategy
from tetraformer.training.reports.loggers import RunConfig, make_loggers

SUBCOMMANDS = ("fit", "validate", "test", "predict")
PEAK_HELP = (
    "the peak MFU is taken against: auto (default: a matmul timed at train start), one device's TFLOP/s "
    "(e.g. 989: H100 bf16 dense), or null (no train/mfu)"
)
DESCRIPTION = """Train and use Transformers from one core.

Lightning subcommands: fit, validate, test, predict (each takes -c CONFIG and --section.key=value).
Other commands: `tetraformer generate --ckpt PATH --prompt TEXT`, `tetraformer tokenizer train ...`,
`tetraformer convert from-hf SRC_DIR OUT_CKPT | to-hf CKPT OUT_DIR`,
`tetraformer attention --ckpt PATH (--image FILE | --text TEXT)`,
`tetraformer compare -c COMPARISON.yaml [--budget.max_steps N] [--seeds N] [--out DIR]`,
`tetraformer evaluate --ckpt PATH --tasks NAMES [--include_path DIR]` (lm-evaluation-harness scores),
`tetraformer prepare -c CONFIG` (builds the tokenizer and token stores a fit reads),
`tetraformer vectors --input FILES --output DIR` (word vectors counted from text) (run each with --help)."""


class LogConfigCallback(SaveConfigCallback):
    """Saves the resolved config as RUN_DIR/config.yaml and logs it as hyper-parameters to every logger."""

    def save_config(self, trainer: Trainer, pl_module: Any, stage: str) -> None:
        """Write RUN_DIR/config.yaml (the latest command's) and log the whole config (W&B, CSV hparams.yaml)."""
        run_dir = Path(trainer.default_root_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        text = self.parser.dump(self.config, skip_unset=False, skip_validation=True)  # checked when parsed
        (run_dir / self.config_filename).write_text(text, encoding="utf-8")
        config = yaml.safe_load(text)
        for logger in trainer.loggers:
            logger.log_hyperparams(config)


class TetraformerCLI(LightningCLI):
    """LightningCLI whose configs pick a task's module and datamodule by class_path."""

    def __init__(self, *args: Any, subcommand: str | None = None, **kwargs: Any) -> None:
        """`subcommand`: the one the command line names, the only parser built (None: all of them, for `--help`)."""
        self._named_subcommand = subcommand
        super().__init__(*args, **kwargs)

    def subcommands(self) -> dict[str, set[str]]:  # type: ignore[override]  # Lightning's is static
        """Lightning's subcommands, or only the named one: each subcommand's parser takes ~0.1 s of CPU to build."""
        every = LightningCLI.subcommands()
        named = self._named_subcommand
        return {named: every[named]} if named in every else every

    def _dump_config(self) -> None:  # LightningCLI has no public hook for the dump it keeps as hyper-parameters
        """Lightning's dump of the config for the module's and datamodule's hyper-parameters, without checking the
        config once more: it was checked when parsed (the check took 4 of every 5 parts of the dump's time)."""
        if hasattr(self, "config_dump"):
            return
        text = self.parser.dump(
            self.config, format="yaml", skip_link_targets=False, skip_unset=False, skip_validation=True
        )
        dump = yaml.safe_load(text)
        self.config_dump = dump[self.config.subcommand] if "subcommand" in self.config else dump

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        """Add the `run` section: W&B identity, checkpoint metric, early stopping, predictions file."""
        parser.add_class_arguments(RunConfig, "run")
        # jsonargparse reads no help from the dataclass' comments, and argparse has no public way to change an
        # added argument's help: its action list (`_actions`) is where that help lives
        for action in parser._actions:
            if action.dest == "run.peak_tflops":
                action.help = PEAK_HELP
        parser.add_argument(
            "--predictions", default=None, help="predict: JSONL output (default RUN_DIR/predictions.jsonl)"
        )
        parser.add_argument(TRUST_FLAG, type=bool, default=False, help=TRUST_HELP)
        link_model_options(parser)

    def _parse_ckpt_path(self) -> None:  # LightningCLI has no public hook for its ckpt_path hyper-parameter pass
        """Evaluation stages took the checkpoint's hyper-parameters as defaults already (eval_runs), so what the user
        set stays; Lightning's own pass would lay them over the user's flags. `fit --ckpt_path` keeps Lightning's."""
        if self.config.get("subcommand") not in (None, *EVAL_STAGES):  # None: `prepare` (no checkpoint)
            self._check_resumed_model()
            with trusted_objects_allowed(self.config[self.config.subcommand].get("ckpt_path")):
                super()._parse_ckpt_path()

    def _check_resumed_model(self) -> None:
        """The config's model options against those of the checkpoint a fit resumes, parsed as Lightning parses
        them (`last` / `best` read from the run's checkpoints folder, where Lightning leaves the config's)."""
        section = self.config[self.config.subcommand]
        given = section.get("ckpt_path")
        path = resumed_checkpoint(given, Path(section.trainer.get("default_root_dir") or "."))
        hparams = dict(self._resumed_state(path).get("hyper_parameters") or {}) if path is not None else {}
        hparams.pop("_instantiator", None)
        if not hparams:
            return
        if "_class_path" in hparams:
            hparams = {"class_path": hparams.pop("_class_path"), "dict_kwargs": hparams}
        stored = self.parser.parse_object({self.config.subcommand: {"model": hparams}}, self.config.clone())
        laid_over = path == Path(given)  # a file path: Lightning's pass puts the checkpoint's over the config's
        check_resumed_model(section.model, stored[self.config.subcommand].model, path, laid_over)

    def _resumed_state(self, path: Path) -> dict[str, Any]:
        """The checkpoint a fit resumes without its tensors (weights, optimizer state): read once for the model
        check, the Trainer's precision and W&B run, and the data's comparison, not once for each."""
        states = self.__dict__.setdefault("_resumed_states", {})
        if path not in states:
            ckpt = read_checkpoint(path)
            states[path] = {k: v for k, v in ckpt.items() if k not in ("state_dict", "optimizer_states")}
        return states[path]

    def _load_weights_only(self) -> None:
        """Lightning's checkpoint loads take tensors and plain data only, unless --trust_checkpoint true."""
        method_kwargs = self.config_init[self.subcommand]
        if method_kwargs.get("weights_only") is None:
            method_kwargs["weights_only"] = not checkpoints_trusted()

    before_validate = before_test = before_predict = _load_weights_only

    def before_fit(self) -> None:
        """Safe loads; then, before the data is read, a resumed checkpoint handed to the data (its tokenizer kept,
        its data compared: changed data stops here), else the fingerprint of the data taken."""
        self._load_weights_only()
        check_fit_options(self.model)
        path = resumed_checkpoint(self.config_init.fit.ckpt_path, Path(self.trainer.default_root_dir))
        if path is None:
            self.datamodule.data_fingerprint()
        else:
            self.datamodule.trainer = self.trainer  # as fit attaches it: the run's directory holds its tokenizer
            self.datamodule.resume_from(self._resumed_state(path), path)

    def instantiate_classes(self) -> None:
        """Build the config's classes; a value one of them refuses is one line naming the option (option_errors)."""
        config = self.config.get(str(self.subcommand), self.config)
        with told_in_one_line(lambda err: instantiation_error(err, config), ValueError):
            super().instantiate_classes()

    def _config_value(self, key: str, default: Any = None) -> Any:
        """A value of the instantiated config, inside the subcommand's section when there is one."""
        return self.config_init.get(str(self.subcommand), self.config_init).get(key, default)

    def instantiate_trainer(self, **kwargs: Any) -> Trainer:
        """Default loggers and callbacks unless the config sets its own; FSDP by name wraps the core's blocks."""
        trainer_cfg = self._config_value("trainer", default={})
        kwargs["strategy"] = platform_strategy(trainer_cfg.get("strategy", "auto"))
        run: RunConfig = self._config_value("run")
        check_trainer_ranges(trainer_cfg)
        root = run_folder(trainer_cfg.get("default_root_dir") or ".", "--trainer.default_root_dir")
        ckpt, resumed = None, {}  # the checkpoint a fit resumes and its payload
        if self.subcommand == "fit":  # `--ckpt_path last` before any last.ckpt: from scratch (a requeued job)
            self.config_init.fit.ckpt_path = resume_path(self.config_init.fit.ckpt_path, root / "checkpoints")
            ckpt = resumed_checkpoint(self.config_init.fit.ckpt_path, root)
            resumed = self._resumed_state(ckpt)[PAYLOAD_KEY] if ckpt is not None else {}
        kwargs["plugins"] = with_slurm_environment(with_atomic_io(trainer_cfg.get("plugins")))
        kwargs["precision"] = chosen_precision(
            trainer_cfg.get("precision"),
            trainer_cfg.get("accelerator", "auto"),
            resumed.get(PRECISION_KEY),
            ckpt,
        )
        if trainer_cfg.get("logger") in (None, True):
            kwargs["logger"] = make_loggers(root, run, resumed.get("wandb_run_id"))
        callbacks = list(trainer_cfg.get("callbacks") or [])
        saving = trainer_cfg.get("enable_checkpointing", True) is not False  # else Lightning refuses checkpointers
        # unless asked, a bar only on a terminal: Lightning's default one redraws and reads the loss every step
        asked = trainer_cfg.get("enable_progress_bar")
        bar = kwargs["enable_progress_bar"] = sys.stdout.isatty() if asked is None else bool(asked)
        training = self.subcommand == "fit"  # without a bar, a fit logs progress lines (--run.progress_every_*)
        callbacks += default_callbacks(root, run, training=training, checkpoints=saving, progress_bar=bar)
        if self.subcommand == "predict":
            output = self._config_value("predictions") or root / "predictions.jsonl"
            callbacks.append(JsonlPredictionWriter(output))
        # the spec first: a callback that reads the network in its `setup` (weight averaging) finds it built
        kwargs["callbacks"] = self.spec_handover() + callbacks
        refusals = (MisconfigurationException, ValueError, TypeError)  # how Lightning refuses its settings
        with told_in_one_line(lambda err: trainer_option_error(err, trainer_cfg), *refusals):
            trainer = super().instantiate_trainer(**kwargs)
        quiet_unsharded_averaging(trainer.strategy)
        guard_ranks(trainer, run.collective_timeout_s)
        return trainer

    def spec_handover(self) -> list[DataSpecHandover]:
        """Evaluating a checkpoint file, the data reads with its DataSpec (the module builds from the checkpoint);
        otherwise the module is handed the data's spec once the data is set up."""
        stored = evaluated_spec(self.subcommand, self._get(self.config_init, "ckpt_path"))
        if stored is None:
            return [DataSpecHandover(self.datamodule)]
        self.datamodule.use_spec(stored)
        return []


def check_fit_options(model: TaskModule) -> None:
    """What a fit (or `prepare`) must refuse before it trains a tokenizer or builds a store: a missing
    --model.init_from (the classes check their own options when they are built)."""
    check_init_from(model.init_from)


def link_model_options(parser: LightningArgumentParser) -> None:
    """Model options that decide how the data is read, given to the datamodule when parsing (where it takes them):
    the `init_from` source's tokenizer, next-sentence pairs, the image size when --data.image_size is unset."""
    parser.link_arguments("model.init_args.init_from", "data.init_args.init_from")
    parser.link_arguments("model.init_args.next_sentence", "data.init_args.next_sentence")
    parser.link_arguments("model.init_args.arch", "data.init_args.model_image_size", compute_fn=arch_image_size)


def arch_image_size(arch: Any) -> int | None:
    """The image size of the model's `arch` as parsed (a namespace of class_path and init_args), None if unset."""
    return getattr(getattr(arch, "init_args", arch), "image_size", None)


def resumed_checkpoint(ckpt_path: str | None, root: Path) -> Path | None:
    """The checkpoint file a `fit --ckpt_path` resumes (its payload holds the W&B run id, so the W&B run continues
    too, and the precision it trained in); None when there is none."""
    named = ckpt_path in RUN_CHECKPOINTS  # `last` / `best`: RUN_DIR/checkpoints/NAME.ckpt
    path = root / "checkpoints" / f"{ckpt_path}.ckpt" if named else Path(ckpt_path) if ckpt_path else None
    return path if path is not None and path.is_file() else None


def build_cli(argv: list[str], command: str, **options: Any) -> TetraformerCLI:
    """Parse the command line (sys.argv, or `args` in `options`), build the config's classes and run the subcommand
    (unless `run=False`); a parse error is one ConfigError line pointing to `command --help`."""
    quiet = {"exit_on_error": False}  # parse errors come back as exceptions, told in one line by main
    named = argv[0] if argv and argv[0] in SUBCOMMANDS else None
    try:
        return TetraformerCLI(
            TaskModule,
            TaskDataModule,
            subcommand=named,
            trainer_class=PlatformTrainer,
            subclass_mode_model=True,
            subclass_mode_data=True,
            save_config_callback=LogConfigCallback,
            save_config_kwargs={"overwrite": True, "save_to_log_dir": False},
            auto_configure_optimizers=False,
            parser_kwargs={
                "description": DESCRIPTION,
                **quiet,
                **{s: quiet for s in ([named] if named else SUBCOMMANDS)},
            },
            **options,
        )
    except ArgumentError as err:
        raise yaml_error(str(err), argv) or ConfigError(f"{one_line(str(err))} (see {command} --help)") from None
    except ValueError as err:  # Lightning's check of trainer settings against the data
        config_error = trainer_config_error(err)
        if config_error is None:
            raise
        raise config_error from err
