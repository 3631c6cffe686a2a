"""Store integrity: content checksums written at build and verified on reuse, ids checked against the vocabulary,
manifest-less stores rebuilt with one warning, and the partial folders of dead builds removed (live ones kept)."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xxhash

from tests.data.test_store import TEXTS as ROW_TEXTS
from tests.data.test_store import Encode, row_store
from tetraformer.data import DataError, read_records, train_tokenizer
from tetraformer.data.corpus_store import TOKENS, corpus_store
from tetraformer.data.store import ARROW, MANIFEST, ROWS, open_store, tokenize_rows
from tetraformer.data.store_integrity import STALE_S, checksum_damage, file_checksum, remove_stale_partials
from tetraformer.data.token_blocks import CorpusIds

TABLE = f"{TOKENS}{ARROW}"
OPTIONS: dict[str, Any] = {"format": "auto", "field": "text", "documents": "line", "encoding": "utf-8"}
TEXT = "the cat sat on the mat\na dog barked twice at the cat\nthe end of it all\n" * 40


@pytest.fixture(scope="module")
def bpe(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A small byte-level BPE tokenizer of the text."""
    corpus = tmp_path_factory.mktemp("corpus") / "c.txt"
    corpus.write_text(TEXT, encoding="utf-8")
    return train_tokenizer(corpus, "bpe", 300, tmp_path_factory.mktemp("bpe"))


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """The text as one training file."""
    path = tmp_path / "corpus.txt"
    path.write_text(TEXT, encoding="utf-8")
    return path


def lm_store(corpus: Path, tokenizer: Any, cache: Path) -> Any:
    """The training store of the corpus under `cache`."""
    return corpus_store("lm-train", corpus, tokenizer, OPTIONS, cache)


class OneTooFar:
    """A tokenizer that reports one entry fewer than it has: its last id is past its vocabulary."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    def __len__(self) -> int:
        return len(self.tokenizer) - 1

    def __getattr__(self, name: str) -> Any:
        return getattr(self.tokenizer, name)


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The warning lines logged."""
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_a_checksum_is_xxh3_128_of_the_bytes(tmp_path: Path) -> None:
    path = tmp_path / "f.bin"
    path.write_bytes(os.urandom(3 << 20))
    assert file_checksum(path) == xxhash.xxh3_128(path.read_bytes()).hexdigest()
    assert checksum_damage(tmp_path, {"f.bin": file_checksum(path)}) is None
    assert "f.bin's content differs" in checksum_damage(tmp_path, {"f.bin": "0" * 32})
    assert "g.bin is missing" in checksum_damage(tmp_path, {"f.bin": file_checksum(path), "g.bin": "0"})
    assert "no content checksum" in checksum_damage(tmp_path, None)


def test_reordered_ids_of_the_same_size_are_rebuilt_with_one_warning(
    corpus: Path, bpe: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = lm_store(corpus, bpe, tmp_path / "cache")
    table = store.path / TABLE
    built = table.read_bytes()
    ids = np.fromfile(table, dtype=store.manifest["dtype"])
    np.random.default_rng(0).permutation(ids).tofile(table)  # the same size, other order
    assert table.read_bytes() != built
    with caplog.at_level(logging.WARNING):
        rebuilt = lm_store(corpus, bpe, tmp_path / "cache")
    assert warnings(caplog) == [
        f"the corpus store {store.path} is damaged ({TABLE}'s content differs from the checksum its manifest "
        "recorded): building it again"
    ]
    assert (rebuilt.path / TABLE).read_bytes() == built


def test_ids_past_the_vocabulary_are_found_at_build_and_on_reuse(corpus: Path, bpe: Any, tmp_path: Path) -> None:
    store = lm_store(corpus, bpe, tmp_path / "cache")
    assert store.manifest["max_id"] == int(CorpusIds(store).slice(0, store.manifest["n_tokens"]).max()) < len(bpe)
    assert open_store(store.path, vocab_size=store.manifest["max_id"]) is None  # a smaller vocabulary than the ids
    assert store.path.is_dir()  # without `repair`, nothing is removed

    small = train_tokenizer(corpus, "char", 40, tmp_path / "char")  # the text uses every id of its characters
    with pytest.raises(DataError, match=rf"the tokenizer gave id \d+, past its own {len(small) - 1} entries"):
        corpus_store("lm-train", corpus, OneTooFar(small), OPTIONS, tmp_path / "other")
    assert list((tmp_path / "other").iterdir()) == []


@pytest.mark.parametrize("damage", ["no manifest", "no checksums"])
def test_a_store_without_manifest_or_checksums_is_rebuilt_with_one_warning(
    corpus: Path, bpe: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    store = lm_store(corpus, bpe, tmp_path / "cache")
    built = (store.path / TABLE).read_bytes()
    manifest = json.loads((store.path / MANIFEST).read_text())
    if damage == "no manifest":
        (store.path / MANIFEST).unlink()
    else:
        del manifest["checksums"]
        (store.path / MANIFEST).write_text(json.dumps(manifest))
    with caplog.at_level(logging.WARNING):
        rebuilt = lm_store(corpus, bpe, tmp_path / "cache")
    assert len(warnings(caplog)) == 1 and "is damaged" in warnings(caplog)[0]
    assert rebuilt.path == store.path and rebuilt.manifest["checksums"]
    assert (rebuilt.path / TABLE).read_bytes() == built


def dead_pid() -> int:
    """The id of a process that has ended."""
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(done.stdout)


def partial(cache: Path, name: str, age_s: float = 0.0) -> Path:
    """A partial folder with a file, its times set `age_s` in the past."""
    folder = cache / name
    folder.mkdir(parents=True)
    (folder / TABLE).write_bytes(b"12")
    then = time.time() - age_s
    for path in (folder / TABLE, folder):
        os.utime(path, (then, then))
    return folder


def test_partial_folders_of_dead_builds_are_removed_and_live_ones_kept(corpus: Path, bpe: Any, tmp_path: Path) -> None:
    cache, host = tmp_path / "cache", socket.gethostname()
    dead = partial(cache, f".partial-lm-train-0123@{host}-{dead_pid()}-abcd0123")
    live = partial(cache, f".partial-lm-train-0123@{host}-{os.getpid()}-abcd0123")
    foreign = partial(cache, ".partial-lm-train-0123@elsewhere-1-abcd0123")
    old = partial(cache, ".partial-lm-train-0123-x3k9", age_s=STALE_S + 60)  # named before pids were
    lm_store(corpus, bpe, cache)
    assert not dead.exists() and not old.exists()
    assert live.exists() and foreign.exists()
    os.utime(foreign, (time.time() - STALE_S - 60,) * 2)
    os.utime(foreign / TABLE, (time.time() - STALE_S - 60,) * 2)
    remove_stale_partials(cache)
    assert not foreign.exists() and live.exists()


@pytest.fixture(scope="module")
def wordpiece(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A small WordPiece tokenizer of the row texts."""
    corpus = tmp_path_factory.mktemp("rows") / "c.txt"
    corpus.write_text("\n".join(ROW_TEXTS * 5) + "\n", encoding="utf-8")
    return train_tokenizer(corpus, "wordpiece", 120, tmp_path_factory.mktemp("wp"))


def rows(records: Path, tokenizer: Any, cache: Path) -> Any:
    """The row store of a records file (its input_ids checked as ids)."""

    def build(scratch: Path) -> dict[str, Any]:
        return {ROWS: tokenize_rows(read_records(records), Encode(tokenizer), scratch)}

    return row_store([records], tokenizer, {"max_length": 8}, build, cache)


@pytest.mark.parametrize("damage", ["reordered", "no manifest", "dead partial"])
def test_a_damaged_row_store_is_rebuilt_with_one_warning(
    wordpiece: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    records = tmp_path / "rows.jsonl"
    records.write_text("".join(json.dumps({"text": t, "label": "a"}) + "\n" for t in ROW_TEXTS), encoding="utf-8")
    store = rows(records, wordpiece, tmp_path / "cache")
    assert store.manifest["max_id"] < len(wordpiece)
    assert open_store(store.path, vocab_size=store.manifest["max_id"]) is None
    arrow = store.path / f"{ROWS}{ARROW}"
    built = arrow.read_bytes()
    if damage == "reordered":
        arrow.write_bytes(built[len(built) // 2 :] + built[: len(built) // 2])
    if damage == "no manifest":
        (store.path / MANIFEST).unlink()
    stale = partial(tmp_path / "cache", f".partial-task-train-1@{socket.gethostname()}-{dead_pid()}-abcd0123")
    with caplog.at_level(logging.WARNING):
        rebuilt = rows(records, wordpiece, tmp_path / "cache")
    assert len(warnings(caplog)) == (damage != "dead partial")
    assert rebuilt.path == store.path and (rebuilt.path / f"{ROWS}{ARROW}").read_bytes() == built
    assert not stale.exists()
