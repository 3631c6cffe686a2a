"""validate/test/predict from a checkpoint: a fresh run directory, the checkpoint's tokenizer, config and task.

`tetraformer test --ckpt_path RUN_DIR/checkpoints/best.ckpt ...` runs in RUN_DIR/eval/test-N/ (N counts up, so
nothing an earlier run or evaluation wrote is overwritten); with `--trainer.default_root_dir ROOT` (or a `-c`
config's) it runs in ROOT/eval/test-N/ instead. `--ckpt_path last` / `best` name RUN_DIR/checkpoints/last.ckpt /
best.ckpt of the configured run and are evaluated as those files. The checkpoint's tokenizer is saved there and
used, and the datamodule reads the data with the checkpoint's DataSpec (its labels, lengths, image size and
normalisation). A `-c` config must be of the checkpoint's task (checkpoint_task). The model section is the
checkpoint's (over any `-c` config's, since the weights fix the architecture), and so is the data section when no
`-c` is given; `--model.*` / `--data.*` flags on the command line override both (e.g. `--model.top_k 5`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tetraformer.cli.checkpoint_task import (
    LIGHTNING_CKPT_NAMES,
    RUN_CHECKPOINTS,
    check_checkpoint_task,
    checkpoint_file,
)
from tetraformer.cli.command_line import configured_root, flag_value, split_configs
from tetraformer.data.spec import DataSpec
from tetraformer.payload import PAYLOAD_KEY, read_checkpoint, tokenizer_from_state
from tetraformer.training.checkpointing.stored_spec import stored_spec

EVAL_STAGES = ("validate", "test", "predict")


def evaluation_args(argv: list[str]) -> list[str]:
    """The command line of an evaluation stage with a checkpoint file, completed with run dir, tokenizer, config."""
    if not argv or argv[0] not in EVAL_STAGES:
        return argv
    ckpt_path = checkpoint_file(argv, required=True)
    if ckpt_path is None:
        return argv
    ckpt = read_checkpoint(ckpt_path)
    check_checkpoint_task(argv, ckpt_path, ckpt)
    root = evaluation_dir(Path(configured_root(argv) or run_dir(ckpt_path)), argv[0])
    extra = ["--ckpt_path", str(ckpt_path), "--trainer.default_root_dir", str(root)]
    tokenizer_dir = None
    tokenizer = tokenizer_from_state(ckpt[PAYLOAD_KEY]["tokenizer"])
    if tokenizer is not None and flag_value(argv, "--data.tokenizer") is None:
        tokenizer_dir = root / "tokenizer"
        tokenizer.save_pretrained(str(tokenizer_dir))  # the datamodule tokenizes with the checkpoint's own
    configs, flags = split_configs(argv[1:])
    if configs and tokenizer_dir is not None:
        extra += ["--data.tokenizer", str(tokenizer_dir)]
    sections = ("model",) if configs else ("model", "data")
    config = checkpoint_config(ckpt, tokenizer_dir, root, sections)
    return [argv[0], *configs, "-c", str(config), *flags, *extra]


def evaluated_spec(stage: str, ckpt_path: str | None) -> DataSpec | None:
    """The DataSpec of the checkpoint file an evaluation stage runs (its labels, lengths, images), else None."""
    if stage not in EVAL_STAGES or ckpt_path is None or ckpt_path in (*RUN_CHECKPOINTS, *LIGHTNING_CKPT_NAMES):
        return None
    return stored_spec(read_checkpoint(ckpt_path)[PAYLOAD_KEY])


def run_dir(ckpt: Path) -> Path:
    """The run a checkpoint belongs to: RUN_DIR for RUN_DIR/checkpoints/X.ckpt, else the file's folder."""
    return ckpt.parent.parent if ckpt.parent.name == "checkpoints" else ckpt.parent


def evaluation_dir(root: Path, stage: str) -> Path:
    """ROOT/eval/STAGE-N, N the next free number: a fresh directory, so no run's files are overwritten."""
    number = 1
    while (root / "eval" / f"{stage}-{number}").exists():
        number += 1
    return root / "eval" / f"{stage}-{number}"


def checkpoint_config(
    ckpt: dict[str, Any], tokenizer_dir: Path | None, root: Path, names: tuple[str, ...] = ("model", "data")
) -> Path:
    """ROOT/from_checkpoint.yaml: the named sections (model, data) rebuilt from a checkpoint's hyper-parameters, kept
    in the evaluation's own directory beside what it writes (not a temp file left behind)."""
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
    root.mkdir(parents=True, exist_ok=True)
    config = root / "from_checkpoint.yaml"
    config.write_text(yaml.safe_dump(sections))
    return config
