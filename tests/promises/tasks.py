"""Tiny configs and fixture data for every task, shared by the promise tests that run them in fresh processes.

Each task's config is its own test suite's `tiny_config` (tests/tasks/<task>/conftest.py), made into a run that
a promise can be checked on: dropout on (so a resume must restore the RNG), a fixed number of optimizer steps that
crosses an epoch's end, validations in the middle, and last.ckpt written every few steps.
"""

from __future__ import annotations

import copy
import shutil
from pathlib import Path
from typing import Any

from tests.data.quadrant_images import write_folder
from tests.hf_folders import tiny_bert
from tests.tasks.image_classification.conftest import tiny_config as image_config
from tests.tasks.instruction_tuning.conftest import CHATS, qwen2_folder
from tests.tasks.instruction_tuning.conftest import tiny_config as chat_config
from tests.tasks.language_modeling.conftest import TEXT
from tests.tasks.language_modeling.conftest import tiny_config as lm_config
from tests.tasks.masked_lm.conftest import tiny_config as mlm_config
from tests.tasks.masked_lm.conftest import topic_corpus
from tests.tasks.preference_tuning.conftest import reversed_pairs, write_pairs
from tests.tasks.preference_tuning.conftest import tiny_config as preference_config
from tests.tasks.seq2seq.conftest import reversal_pairs, write_jsonl
from tests.tasks.seq2seq.conftest import tiny_config as seq2seq_config
from tests.tasks.text_classification.conftest import labelled_rows, write_csv
from tests.tasks.text_classification.conftest import tiny_config as text_config
from tests.tasks.token_classification.conftest import tagged_sentences, write_conll
from tests.tasks.token_classification.conftest import tiny_config as tagger_config

TASKS = (
    "language_modeling",
    "instruction_tuning",
    "preference_tuning",
    "text_classification",
    "token_classification",
    "masked_lm",
    "seq2seq",
    "image_classification",
)
STEPS = 24  # every run trains this many optimizer steps (crossing an epoch's end in every task)
EPOCHS = 100  # more than STEPS takes: max_steps ends the run
VALIDATE_EVERY = 10  # a validation at steps 10 and 20 (and the last one)
SAVE_EVERY = 4  # last.ckpt at steps 4, 8, ... (`--run.save_every_n_steps`)
DROPOUT = 0.1

BUILDERS = {
    "language_modeling": lm_config,
    "instruction_tuning": chat_config,
    "preference_tuning": lambda run, **data: preference_config(run, {"arch": {}}, **data),
    "text_classification": text_config,
    "token_classification": tagger_config,
    "masked_lm": mlm_config,
    "seq2seq": seq2seq_config,
    "image_classification": image_config,
}
SECTIONS = ("trainer", "model", "arch", "data", "run")  # what `tiny_task_config`'s overrides may name


def write_task_data(task: str, root: Path) -> dict[str, str]:
    """Write the task's fixture files under `root` (once; a second call reuses them); the data options naming them."""
    root.mkdir(parents=True, exist_ok=True)
    if task == "language_modeling":
        corpus = _written(root / "corpus.txt", lambda p: p.write_text(TEXT * 12))
        return {"train_path": str(corpus), "documents": "line"}
    if task == "instruction_tuning":  # a copy of the packaged chats its tiny config reads (a test may edit it)
        return {"train_path": str(_written(root / "chats.jsonl", lambda p: shutil.copyfile(CHATS, p)))}
    if task == "preference_tuning":  # a quarter held out (its tiny config's val_fraction)
        return {"train_path": str(_written(root / "pairs.jsonl", lambda p: write_pairs(p, reversed_pairs())))}
    if task == "text_classification":
        return _splits(root, "csv", lambda path, n, seed: write_csv(path, labelled_rows(n, seed)))
    if task == "token_classification":
        return _splits(root, "conll", lambda path, n, seed: write_conll(path, tagged_sentences(n, seed)))
    if task == "masked_lm":
        return {"train_path": str(_written(root / "corpus.txt", lambda p: p.write_text(topic_corpus(200))))}
    if task == "seq2seq":
        return {"train_path": str(_written(root / "pairs.jsonl", lambda p: write_jsonl(p, reversal_pairs(400))))}
    if task == "image_classification":
        return _splits(root, "", lambda path, n, seed: write_folder(path, n, seed), n=(160, 40))
    raise ValueError(f"unknown task {task!r}; known: {', '.join(TASKS)}")


def tiny_task_config(task: str, root: Path, run_dir: Path, **overrides: dict[str, Any]) -> dict[str, Any]:
    """The promise config of `task`: its data written under `root`, the run in `run_dir`.

    `overrides` name sections, each merged into the config (nested dicts key by key, lists replaced): `trainer`,
    `model` (the model's init_args), `arch` (the model's arch), `data` (the data's init_args), `run`; e.g.
    `tiny_task_config("seq2seq", root, run, arch={"dropout": 0.0}, run={"save_every_n_steps": None})`.
    """
    unknown = set(overrides) - set(SECTIONS)
    if unknown:
        raise ValueError(f"unknown override sections {sorted(unknown)}; known: {', '.join(SECTIONS)}")
    config = BUILDERS[task](run_dir, **write_task_data(task, root))
    # bounded by epochs too, as most users' configs are: Lightning then sizes the schedule from the training loader
    # before it restores a checkpoint (the path that once dropped the loader's position on resume)
    trainer = {"max_steps": STEPS, "max_epochs": EPOCHS, "val_check_interval": VALIDATE_EVERY}
    _merge(config["trainer"], {**trainer, "check_val_every_n_epoch": None, "limit_val_batches": 2})
    _merge(config["model"]["init_args"]["arch"], {"dropout": DROPOUT, "attn_dropout": DROPOUT})
    _merge(config["run"], {"save_every_n_steps": SAVE_EVERY, "peak_tflops": None, "samples": False})
    for section, values in overrides.items():
        _merge(_section(config, section), values)
    return config


def _section(config: dict[str, Any], name: str) -> dict[str, Any]:
    """The dict a section override is merged into."""
    if name == "model":
        return config["model"]["init_args"]
    if name == "arch":
        return config["model"]["init_args"]["arch"]
    if name == "data":
        return config["data"]["init_args"]
    return config.setdefault(name, {})


def _merge(into: dict[str, Any], values: dict[str, Any]) -> None:
    """Merge `values` into `into`, nested dicts key by key (a copy: the caller's dicts are never shared)."""
    for key, value in values.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = copy.deepcopy(value)


def _written(path: Path, write: Any) -> Path:
    """`path`, written by `write(path)` unless it exists."""
    if not path.exists():
        write(path)
    return path


def _splits(root: Path, suffix: str, write: Any, n: tuple[int, int] = (240, 60)) -> dict[str, str]:
    """train/val files (or folders) of a labelled fixture, seeds 0 and 1."""
    paths = {}
    for split, count, seed in (("train", n[0], 0), ("val", n[1], 1)):
        path = root / (f"{split}.{suffix}" if suffix else split)
        paths[f"{split}_path"] = str(_written(path, lambda p, c=count, s=seed: write(p, c, s)))
    return paths


def hf_folder(task: str, root: Path) -> Path:
    """A tiny random Hugging Face model folder (weights and tokenizer) the task can start from: a Qwen2 for the chat
    tasks (instruction and preference tuning), a BertModel with a WordPiece tokenizer of the training rows for text
    classification."""
    out = root / "hf"
    root.mkdir(parents=True, exist_ok=True)
    if task in ("instruction_tuning", "preference_tuning"):
        return out if out.is_dir() else qwen2_folder(out)
    if task != "text_classification":
        raise ValueError(f"no Hugging Face folder for {task!r}")
    if not out.is_dir():
        tiny_bert(out, [Path(write_task_data(task, root)["train_path"])])
    return out
