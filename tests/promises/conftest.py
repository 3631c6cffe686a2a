"""One reference run per task, fitted once in a fresh process and shared by the promise tests of that task, and the
task's run killed with -9 after its first checkpoint.

The promise tests of a task run on one pytest-xdist worker (tests/worker_groups.py), so each task's reference is
fitted once per `make test`. Its architecture has a Hugging Face twin (so the export applies). The references cover
the ways a run starts: the chat task from a Hugging Face Qwen2 folder with LoRA (its adapters on every projection and
the output head), text classification from a Hugging Face BERT folder, fully, in bf16-mixed (so exact resume and
cache-free numbers are proven under autocast too), the others from scratch with a tokenizer of their own. The
language model's reference starts on a cache holding a matmul peak far below the machine's (what a measurement taken
under load could keep): it re-measures it, and the killed run (on an empty cache) ends with its weights all the same.
After the fit its run folder is renamed and its last.ckpt copied alone into a folder of its own: a command run on
that copy cannot lean on the run's tokenizer or files.
"""

from __future__ import annotations

import dataclasses
import json
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.processes import killed_after, tetraformer, write_yaml
from tests.promises.tasks import hf_folder, tiny_task_config, write_task_data
from tests.training.resume_runs import paced
from tetraformer.accel.chooser import device_machine_key
from tetraformer.training.callbacks.peak import peak_key

LAST = Path("checkpoints") / "last.ckpt"
LLAMA_SHAPE = {"norm": "rmsnorm", "activation": "swiglu", "bias": False}
BERT_SHAPE = {"norm_position": "post", "embedding_norm": True}
REPLY_TOKENS = 24  # the chat reference's decoding budget, greedy: commands and the export use it as their default
CHAT_LORA = {"rank": 4, "alpha": 8, "targets": ["q", "k", "v", "o", "ff_in", "ff_out", "head"]}
REFERENCE: dict[str, dict[str, dict[str, Any]]] = {  # per task: the overrides of its reference config
    "language_modeling": {"arch": LLAMA_SHAPE, "run": {"peak_tflops": "auto"}},
    "instruction_tuning": {  # and --model.init_from: a Qwen2 folder (FROM_HF)
        "model": {"lora": CHAT_LORA, "generation": {"max_new_tokens": REPLY_TOKENS, "do_sample": False}}
    },
    "preference_tuning": {  # DPO on the chat reference's setting: LoRA on a Qwen2 folder (FROM_HF), adapters off for
        "model": {"lora": CHAT_LORA, "generation": {"max_new_tokens": REPLY_TOKENS, "do_sample": False}}  # the ref
    },
    "text_classification": {  # and --model.init_from: a BERT folder (FROM_HF)
        "model": {"pooling": "cls", "pooler": True},
        "trainer": {"precision": "bf16-mixed"},
    },
    "token_classification": {"arch": BERT_SHAPE},
    "masked_lm": {},
    "seq2seq": {},
    "image_classification": {},
}
FROM_HF = (
    "instruction_tuning",
    "preference_tuning",
    "text_classification",
)  # start from tests/promises/tasks.py's hf_folder
BUSY_PEAK = 1e7  # FLOP/s: the language-model reference's planted fp32 matmul peak (far below any real rate)
KILL_WITHIN_S = 1.0  # the kill lands this long at most after the first last.ckpt (the run is held at step 18)


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

    @property
    def hf(self) -> Path:
        """The Hugging Face folder the reference starts from (FROM_HF tasks)."""
        return hf_folder(self.task, self.base / "data")

    def config(self, run: Path, **overrides: dict[str, Any]) -> dict[str, Any]:
        """The reference's config for a run in `run`, with more section overrides (tiny_task_config's)."""
        sections = {name: dict(values) for name, values in REFERENCE[self.task].items()}
        if self.task in FROM_HF:
            sections["model"] = {"init_from": str(self.hf), **sections.get("model", {})}
        for name, values in overrides.items():
            sections[name] = {**sections.get(name, {}), **values}
        return tiny_task_config(self.task, self.base / "data", run, **sections)


@dataclass(frozen=True)
class Killed:
    """The reference's config run again on an empty cache of its own, killed with -9 after its first periodic
    checkpoint; not resumed (the test that takes it does), with a copy of its run folder as the kill left it."""

    config: Path
    run: Path
    cache: Path
    step: int  # the step its last.ckpt holds
    copy: Path  # the run folder as the kill left it


def plant_busy_peak(cache: Path) -> None:
    """A cache holding an fp32 matmul peak of BUSY_PEAK for this machine (the fits' key: one torch thread)."""
    cache.mkdir(parents=True, exist_ok=True)
    key = peak_key(torch.device("cpu"), torch.float32)
    (cache / "matmul_peaks.json").write_text(json.dumps({device_machine_key(): {key: BUSY_PEAK}}), encoding="utf-8")


@pytest.fixture(scope="session")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Reference]:
    """`reference(task)`: the task's reference run, fitted on the first call (on its own empty cache dir)."""
    done: dict[str, Reference] = {}

    def fitted(task: str) -> Reference:
        if task not in done:
            base = tmp_path_factory.mktemp(f"reference-{task}")
            ref = Reference(task, base, base / "ref-moved" / LAST, base / "alone" / "last.ckpt")
            config = write_yaml(base / "ref.yaml", ref.config(base / "ref"))
            if task == "language_modeling":
                plant_busy_peak(base / "cache-ref")
            said = tetraformer("fit", "-c", config, cache_dir=base / "cache-ref").stderr
            ref = dataclasses.replace(ref, said=said)
            (base / "ref").rename(base / "ref-moved")
            ref.alone.parent.mkdir()
            shutil.copy(ref.last, ref.alone)
            done[task] = ref
        return done[task]

    return fitted


@pytest.fixture(scope="session")
def killed(reference: Callable[[str], Reference]) -> Callable[[str], Killed]:
    """`killed(task)`: the task's reference config run on an empty cache and killed -9 at a random moment after its
    first periodic last.ckpt (once per task)."""
    done: dict[str, Killed] = {}

    def kill(task: str) -> Killed:
        if task not in done:
            ref = reference(task)
            config, step = killed_run(ref.config(ref.base / "killed"), ref.base, "killed", ref.base / "cache-killed")
            copy = ref.base / "killed-copy"
            shutil.copytree(ref.base / "killed", copy)
            done[task] = Killed(config, ref.base / "killed", ref.base / "cache-killed", step, copy)
        return done[task]

    return kill


def killed_run(config: dict[str, Any], base: Path, name: str, cache: Path) -> tuple[Path, int]:
    """Run `config` (paced) as run `name` in `base` on `cache`, killed with SIGKILL at a random moment after its first
    periodic last.ckpt: the config's path and the step its last.ckpt holds."""
    release = base / f"{name}.release"
    config["trainer"].setdefault("callbacks", []).extend(paced(release)["callbacks"])
    path = write_yaml(base / f"{name}.yaml", config)
    last = base / name / LAST
    kill_at: list[float] = []

    def ready() -> bool:
        if not kill_at and last.is_file():
            kill_at.append(time.monotonic() + random.uniform(0, KILL_WITHIN_S))
        return bool(kill_at) and time.monotonic() >= kill_at[0]

    killed_after("fit", "-c", path, cache_dir=cache, ready=ready)
    release.touch()  # a resumed run is not held
    return path, torch.load(last, map_location="cpu", weights_only=False)["global_step"]
