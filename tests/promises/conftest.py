"""One reference run per task, fitted once in a fresh process and shared by the promise tests of that task.

The promise tests of a task run on one pytest-xdist worker (tests/worker_groups.py), so each task's
reference is fitted once per `make test`. Its architecture has a Hugging Face twin (so the export applies); text
classification trains in bf16-mixed (so exact resume and cache-free numbers are proven under autocast too). After the
fit its run folder is renamed and its last.ckpt copied alone into a folder of its own: a command run on that copy
cannot lean on the run's tokenizer or files.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.processes import tetraformer, write_yaml
from tests.promises.tasks import tiny_task_config, write_task_data

LAST = Path("checkpoints") / "last.ckpt"
LLAMA_SHAPE = {"norm": "rmsnorm", "activation": "swiglu", "bias": False}
BERT_SHAPE = {"norm_position": "post", "embedding_norm": True}
REFERENCE: dict[str, dict[str, dict[str, Any]]] = {  # per task: the overrides of its reference config
    "language_modeling": {"arch": LLAMA_SHAPE},
    "instruction_tuning": {"arch": LLAMA_SHAPE},
    "text_classification": {
        "arch": BERT_SHAPE,
        "model": {"pooling": "cls", "pooler": True},
        "trainer": {"precision": "bf16-mixed"},
    },
    "token_classification": {"arch": BERT_SHAPE},
    "masked_lm": {},
    "seq2seq": {},
    "image_classification": {},
}


@dataclass(frozen=True)
class Reference:
    """A task's reference run: its folder, the config it was fitted from, its last.ckpt, and a copy of it alone."""

    task: str
    base: Path  # the task's folder: data/, the caches, and the runs a test adds beside the reference
    last: Path  # the reference's last.ckpt (in its run folder, renamed after the fit)
    alone: Path  # a copy of last.ckpt, alone in a folder of its own
    said: str = ""  # what the fit wrote to stderr

    @property
    def data(self) -> dict[str, str]:
        """The data options naming the fixture files the reference trained on."""
        return write_task_data(self.task, self.base / "data")

    def config(self, run: Path, **overrides: dict[str, Any]) -> dict[str, Any]:
        """The reference's config for a run in `run`, with more section overrides (tiny_task_config's)."""
        sections = {name: dict(values) for name, values in REFERENCE[self.task].items()}
        for name, values in overrides.items():
            sections[name] = {**sections.get(name, {}), **values}
        return tiny_task_config(self.task, self.base / "data", run, **sections)


@pytest.fixture(scope="session")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Reference]:
    """`reference(task)`: the task's reference run, fitted on the first call (on its own empty cache dir)."""
    done: dict[str, Reference] = {}

    def fitted(task: str) -> Reference:
        if task not in done:
            base = tmp_path_factory.mktemp(f"reference-{task}")
            ref = Reference(task, base, base / "ref-moved" / LAST, base / "alone" / "last.ckpt")
            config = write_yaml(base / "ref.yaml", ref.config(base / "ref"))
            said = tetraformer("fit", "-c", config, cache_dir=base / "cache-ref").stderr
            ref = dataclasses.replace(ref, said=said)
            (base / "ref").rename(base / "ref-moved")
            ref.alone.parent.mkdir()
            shutil.copy(ref.last, ref.alone)
            done[task] = ref
        return done[task]

    return fitted
