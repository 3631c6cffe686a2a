"""validate/test/predict from a checkpoint file: their own run directory, the checkpoint's tokenizer and config.

`tetraformer test --ckpt_path RUN_DIR/checkpoints/best.ckpt ...` runs in RUN_DIR/eval/test-N/ (N counts up),
unless `--trainer.default_root_dir` (or a `-c` config's) names another directory than RUN_DIR; the checkpoint's
tokenizer is saved there and used, and the datamodule reads the data with the checkpoint's DataSpec (its
labels, lengths, image size and normalisation). The model section is the checkpoint's (over any `-c` config's,
since the weights fix the architecture), and so is the data section when no `-c` is given; `--model.*` /
`--data.*` flags on the command line override both (e.g. `--model.top_k 5`).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import yaml

from tetraformer.data.spec import DataSpec
from tetraformer.payload import PAYLOAD_KEY, read_checkpoint, tokenizer_from_state
from tetraformer.training.checkpointing.stored_spec import stored_spec

EVAL_STAGES = ("validate", "test", "predict")
LIGHTNING_CKPT_NAMES = ("best", "last", "hpc", "registry")  # ckpt_path values Lightning resolves itself


def evaluation_args(argv: list[str]) -> list[str]:
    """The command line of an evaluation stage with a checkpoint file, completed with run dir, tokenizer, config."""
    if not argv or argv[0] not in EVAL_STAGES:
        return argv
    ckpt_path = flag_value(argv, "--ckpt_path")
    if ckpt_path is None or ckpt_path in LIGHTNING_CKPT_NAMES:
        return argv
    ckpt = read_checkpoint(ckpt_path)
    extra: list[str] = []
    root = configured_root(argv)
    if root is None or Path(root).resolve() == run_dir(Path(ckpt_path)).resolve():
        root = str(evaluation_dir(Path(ckpt_path), argv[0]))
        extra += ["--trainer.default_root_dir", root]
    tokenizer_dir = None
    tokenizer = tokenizer_from_state(ckpt[PAYLOAD_KEY]["tokenizer"])
    if tokenizer is not None and flag_value(argv, "--data.tokenizer") is None:
        tokenizer_dir = Path(root) / "tokenizer"
        tokenizer.save_pretrained(str(tokenizer_dir))  # the datamodule tokenizes with the checkpoint's own
    configs, flags = split_configs(argv[1:])
    if configs and tokenizer_dir is not None:
        extra += ["--data.tokenizer", str(tokenizer_dir)]
    sections = ("model",) if configs else ("model", "data")
    return [argv[0], *configs, "-c", str(checkpoint_config(ckpt, tokenizer_dir, sections)), *flags, *extra]


def evaluated_spec(stage: str, ckpt_path: str | None) -> DataSpec | None:
    """The DataSpec of the checkpoint file an evaluation stage runs (its labels, lengths, images), else None."""
    if stage not in EVAL_STAGES or ckpt_path is None or ckpt_path in LIGHTNING_CKPT_NAMES:
        return None
    return stored_spec(read_checkpoint(ckpt_path)[PAYLOAD_KEY])


def run_dir(ckpt: Path) -> Path:
    """The run a checkpoint belongs to: RUN_DIR for RUN_DIR/checkpoints/X.ckpt, else the file's folder."""
    return ckpt.parent.parent if ckpt.parent.name == "checkpoints" else ckpt.parent


def configured_root(argv: list[str]) -> str | None:
    """`--trainer.default_root_dir` from the command line, else from the last `-c` file that sets it."""
    root = flag_value(argv, "--trainer.default_root_dir")
    if root is not None:
        return root
    for config in reversed([v for i, v in enumerate(argv) if i and argv[i - 1] in ("-c", "--config")]):
        trainer = (yaml.safe_load(Path(config).read_text()) or {}).get("trainer") if Path(config).is_file() else None
        if isinstance(trainer, dict) and trainer.get("default_root_dir"):
            return str(trainer["default_root_dir"])
    return None


def evaluation_dir(ckpt: Path, stage: str) -> Path:
    """RUN_DIR/eval/STAGE-N for a checkpoint's run (see run_dir); N the next free number."""
    run = run_dir(ckpt)
    number = 1
    while (run / "eval" / f"{stage}-{number}").exists():
        number += 1
    return run / "eval" / f"{stage}-{number}"


def checkpoint_config(
    ckpt: dict[str, Any], tokenizer_dir: Path | None, names: tuple[str, ...] = ("model", "data")
) -> Path:
    """A config file with the named sections (model, data) rebuilt from a checkpoint's hyper-parameters."""
    sections = {}
    for key, name in (("hyper_parameters", "model"), ("datamodule_hyper_parameters", "data")):
        if name not in names:
            continue
        hparams = dict(ckpt.get(key, {}))
        hparams.pop("_instantiator", None)
        class_path = hparams.pop("_class_path", None)
        if class_path:
            sections[name] = {"class_path": class_path, "init_args": hparams}
    if tokenizer_dir is not None and "data" in sections:
        sections["data"]["init_args"]["tokenizer"] = str(tokenizer_dir)
    config = Path(tempfile.mkdtemp(prefix="tetraformer-")) / "from_checkpoint.yaml"
    config.write_text(yaml.safe_dump(sections))
    return config


def split_configs(args: list[str]) -> tuple[list[str], list[str]]:
    """(the `-c FILE` / `--config FILE` / `--config=FILE` arguments in order, every other argument in order)."""
    configs: list[str] = []
    flags: list[str] = []
    i = 0
    while i < len(args):
        if args[i] in ("-c", "--config") and i + 1 < len(args):
            configs += args[i : i + 2]
            i += 2
            continue
        (configs if args[i].startswith("--config=") else flags).append(args[i])
        i += 1
    return configs, flags


def flag_value(argv: list[str], flag: str) -> str | None:
    """Value of `--flag value` or `--flag=value`, if present (the last one wins, as in the parser)."""
    value = None
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith(flag + "="):
            value = arg.split("=", 1)[1]
    return value
