"""Stores are checked by content on reuse: a damaged token or row store (same-size reordering, ids past the
vocabulary) is rebuilt with one warning and trains the weights a fresh store gives; the partial folder of a build
killed with -9 (or of any process that has ended) is removed by the next fit. In fresh processes through the installed
`tetraformer` script (tests/processes.py), each fit a new run on the same cache dir. (A store without its manifest, and
each damage in-process: tests/data/test_store_integrity.py.)
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.processes import differing, killed_after, tetraformer, write_yaml
from tests.promises.tasks import tiny_task_config
from tests.tasks.language_modeling.conftest import TEXT

pytestmark = pytest.mark.slow

STEPS = 6


def fit(task: str, tmp_path: Path, name: str, **data: Any) -> tuple[Path, str]:
    """Fit the task's promise config (STEPS steps) into run `name` on the shared cache; its last.ckpt and stderr."""
    config = tiny_task_config(task, tmp_path / "data", tmp_path / name, trainer={"max_steps": STEPS}, data=data)
    done = tetraformer("fit", "-c", write_yaml(tmp_path / f"{name}.yaml", config), cache_dir=tmp_path / "cache")
    return tmp_path / name / "checkpoints" / "last.ckpt", done.stderr


def store(tmp_path: Path, name: str) -> Path:
    """The one built store folder `name-*` in the cache."""
    (found,) = [p for p in (tmp_path / "cache").rglob(f"{name}-*") if p.is_dir() and not p.name.startswith(".")]
    return found


def damaged_lines(stderr: str) -> list[str]:
    """The lines saying a store is damaged."""
    return [line for line in stderr.splitlines() if "is damaged" in line]


def dead_partial(beside: Path) -> Path:
    """A partial build folder beside a store, of a process that has ended (what a killed build leaves)."""
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    folder = beside.with_name(f".partial-{beside.name}@{socket.gethostname()}-{int(done.stdout)}-0a1b2c3d")
    folder.mkdir()
    (folder / "tokens.bin").write_bytes(b"\0\1")
    return folder


def test_a_killed_build_is_cleaned_up_and_a_damaged_token_store_rebuilt_trains_as_a_fresh_one(tmp_path: Path) -> None:
    """A build killed with -9 leaves a partial folder, which the next fit removes as it builds the store; reordered
    tokens, and ids past the vocabulary, are each rebuilt with one line and train the fresh store's weights."""
    corpus = tmp_path / "big.txt"
    corpus.write_text(TEXT * 15_000, encoding="utf-8")  # 0.9 MB: its store takes a second or more to build
    config = tiny_task_config(
        "language_modeling", tmp_path / "data", tmp_path / "killed", data={"train_path": str(corpus)}
    )
    partials = lambda: list((tmp_path / "cache").rglob(".partial-*"))  # noqa: E731
    path = write_yaml(tmp_path / "killed.yaml", config)
    killed_after("fit", "-c", path, cache_dir=tmp_path / "cache", ready=lambda: bool(partials()))
    (left,) = partials()

    data = {"train_path": str(corpus)}
    fresh, _ = fit("language_modeling", tmp_path, "fresh", **data)
    assert not left.exists() and partials() == []
    folder = store(tmp_path, "lm-train")
    tokens = folder / "tokens.arrow"
    dtype = np.dtype(json.loads((folder / "manifest.json").read_text())["dtype"])
    built = tokens.read_bytes()

    np.random.default_rng(0).permutation(np.fromfile(tokens, dtype)).astype(dtype).tofile(tokens)  # same size
    reordered, stderr = fit("language_modeling", tmp_path, "reordered", **data)
    assert len(damaged_lines(stderr)) == 1 and "content differs" in damaged_lines(stderr)[0]
    assert tokens.read_bytes() == built and differing(fresh, reordered) == []

    ids = np.fromfile(tokens, dtype)
    ids[::7] = np.iinfo(dtype).max  # ids past the vocabulary, the same size
    ids.tofile(tokens)
    partial = dead_partial(folder)
    past, stderr = fit("language_modeling", tmp_path, "past_vocabulary", **data)
    assert len(damaged_lines(stderr)) == 1 and "Traceback" not in stderr
    assert tokens.read_bytes() == built and differing(fresh, past) == []
    assert not partial.exists()


def test_a_damaged_row_store_is_rebuilt(tmp_path: Path) -> None:
    fit("text_classification", tmp_path, "fresh")
    folder = store(tmp_path, "text_classification-train")
    arrow = next(folder.rglob("*.arrow"))
    built = arrow.read_bytes()

    arrow.write_bytes(built[len(built) // 2 :] + built[: len(built) // 2])  # same size, other content
    _, stderr = fit("text_classification", tmp_path, "reordered")
    assert len(damaged_lines(stderr)) == 1 and "content differs" in damaged_lines(stderr)[0]
    assert arrow.read_bytes() == built
