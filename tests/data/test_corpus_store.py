"""Corpus stores: built once (equal to in-memory tokenization), reused by key, rebuilt and logged on a key change."""

from __future__ import annotations

import json
import logging
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from tetraformer.data import DataError, pack_documents, read_text, train_tokenizer
from tetraformer.data import corpus_store as corpus_module
from tetraformer.data.corpus_store import TOKENS, corpus_store, n_tokens, token_dtype
from tetraformer.data.store import ARROW, MANIFEST, wait_for_store
from tetraformer.data.token_blocks import CorpusIds, TokenBlocks
from tetraformer.errors import ConfigError

OPTIONS: dict[str, Any] = {"format": "auto", "field": "text", "documents": "paragraph", "encoding": "utf-8"}
TEXT = "The cat sat.\nOn the mat.\n\nA second paragraph,\n  indented here.\n\nThird: é ü 42!\n"


@pytest.fixture(scope="module")
def bpe(tmp_path_factory: pytest.TempPathFactory) -> PreTrainedTokenizerFast:
    """A small byte-level BPE tokenizer."""
    corpus = tmp_path_factory.mktemp("corpus") / "c.txt"
    corpus.write_text(TEXT * 20, encoding="utf-8")
    return train_tokenizer(corpus, "bpe", 300, tmp_path_factory.mktemp("bpe"))


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """Two small text files in a folder."""
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "a.txt").write_text(TEXT * 3, encoding="utf-8")
    (folder / "b.txt").write_text(TEXT.upper(), encoding="utf-8")
    return folder


def build(corpus: Path, tokenizer: Any, cache: Path, **options: Any) -> Any:
    """The train store of the corpus under `cache`."""
    return corpus_store("lm-train", corpus, tokenizer, {**OPTIONS, **options}, cache)


def ids(store: Any) -> np.ndarray:
    """All ids of a corpus store, in order."""
    return CorpusIds(store).slice(0, n_tokens(store))


def rows(store: Any) -> list[list[int]]:
    """The rows of a corpus store's table: a document's (or piece's) ids each."""
    return store.table(TOKENS)["input_ids"]


@pytest.mark.parametrize("documents", ["file", "paragraph", "line"])
def test_store_holds_the_in_memory_tokenization(corpus: Path, bpe: Any, tmp_path: Path, documents: str) -> None:
    store = build(corpus, bpe, tmp_path / "cache", documents=documents)
    packed = pack_documents(read_text(corpus, **{**OPTIONS, "documents": documents}), bpe, block_size=8)
    blocks = TokenBlocks(store, 8)
    assert store.manifest["dtype"] == "uint16"
    assert store.table(TOKENS).features["input_ids"].feature.dtype == "uint16"
    assert torch.equal(torch.stack([blocks[i] for i in range(len(blocks))]), packed)
    assert blocks[0].dtype == torch.int64
    documents = read_text(corpus, **{**OPTIONS, "documents": documents})["text"]
    assert [row[-1] for row in rows(store)] == [bpe.eos_token_id] * len(documents)  # a row a document, eos last


def test_second_build_is_a_reuse(
    corpus: Path, bpe: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    first = build(corpus, bpe, tmp_path)
    monkeypatch.setattr(corpus_module, "write_corpus", _refuse)
    with caplog.at_level(logging.INFO):
        second = build(corpus, bpe, tmp_path)
    assert second.path == first.path and np.array_equal(ids(second), ids(first))
    assert f"reusing the corpus store {first.path}" in caplog.text


@pytest.mark.parametrize(
    ("key", "change"),
    [
        ("files", lambda corpus, tok, opts: (_append(corpus / "a.txt"), tok, opts)),
        ("tokenizer", lambda corpus, tok, opts: (corpus, _char_tokenizer(corpus), opts)),
        ("documents", lambda corpus, tok, opts: (corpus, tok, {**opts, "documents": "line"})),
        ("encoding", lambda corpus, tok, opts: (corpus, tok, {**opts, "encoding": "latin-1"})),
        ("format", lambda corpus, tok, opts: (corpus, tok, {**opts, "format": "text"})),
        ("text_field", lambda corpus, tok, opts: (corpus, tok, {**opts, "field": "body"})),
    ],
)
def test_each_key_change_rebuilds_and_says_which(
    corpus: Path, bpe: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture, key: str, change: Any
) -> None:
    first = build(corpus, bpe, tmp_path / "cache")
    files, tokenizer, options = change(corpus, bpe, OPTIONS)
    with caplog.at_level(logging.INFO):
        second = corpus_store("lm-train", files, tokenizer, options, tmp_path / "cache")
    assert second.path != first.path
    assert f"{key} changed since {first.path.name}" in caplog.text


def test_block_size_is_not_part_of_the_key(corpus: Path, bpe: Any, tmp_path: Path) -> None:
    store = build(corpus, bpe, tmp_path)
    assert len(TokenBlocks(store, 4)) == (n_tokens(store) - 1) // 4
    assert len(TokenBlocks(store, 16)) == (n_tokens(store) - 1) // 16


def test_dtype_is_the_smallest_that_holds_the_vocabulary(tmp_path: Path) -> None:
    assert token_dtype(65536) == np.uint16 and token_dtype(65537) == np.uint32
    words = [f"w{i}" for i in range(70_000)]
    backend = Tokenizer(models.WordLevel({w: i for i, w in enumerate(["</s>", *words])}, unk_token="</s>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="</s>")
    corpus = tmp_path / "big.txt"
    corpus.write_text("w1 w69999 w65536\n", encoding="utf-8")
    store = build(corpus, tokenizer, tmp_path / "cache", documents="line")
    assert store.manifest["dtype"] == "uint32"
    assert ids(store).tolist() == [2, 70_000, 65_537, 0]


def test_a_build_that_fails_half_way_leaves_nothing_reused(
    corpus: Path, bpe: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = corpus_module.encode_batch

    def dies_after_one_batch(*args: Any) -> Any:
        monkeypatch.setattr(corpus_module, "encode_batch", _refuse)
        return real(*args)

    monkeypatch.setattr(corpus_module, "encode_batch", dies_after_one_batch)
    monkeypatch.setattr(corpus_module, "batches", lambda pieces: ([piece] for piece in pieces))
    with pytest.raises(RuntimeError, match="tokenizer called"):
        build(corpus, bpe, tmp_path / "cache")
    assert list((tmp_path / "cache").iterdir()) == []  # no store, no partial folder
    monkeypatch.undo()
    store = build(corpus, bpe, tmp_path / "cache")
    assert n_tokens(store) == n_tokens(build(corpus, bpe, tmp_path / "other"))


def test_a_killed_builds_partial_folder_is_never_reused(corpus: Path, bpe: Any, tmp_path: Path) -> None:
    store = build(corpus, bpe, tmp_path / "cache")
    partial = store.path.with_name(f".partial-{store.path.name}-x")
    store.path.rename(partial)
    (partial / MANIFEST).unlink()  # what SIGKILL before the manifest leaves
    rebuilt = build(corpus, bpe, tmp_path / "cache")
    assert rebuilt.path == store.path and n_tokens(rebuilt) > 0


def test_a_short_store_file_is_detected_and_rebuilt(
    corpus: Path, bpe: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = build(corpus, bpe, tmp_path)
    table = store.path / f"{TOKENS}{ARROW}"
    tokens = table.read_bytes()
    table.write_bytes(tokens[:-6])
    with caplog.at_level(logging.WARNING):
        rebuilt = build(corpus, bpe, tmp_path)
    assert f"{TOKENS}{ARROW}'s content differs from the checksum its manifest recorded" in caplog.text
    assert (rebuilt.path / f"{TOKENS}{ARROW}").read_bytes() == tokens


def test_an_unwritable_cache_dir_names_the_option(corpus: Path, bpe: Any, tmp_path: Path) -> None:
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    with pytest.raises(ConfigError, match=r"^--data.cache_dir='.*a_file/stores': cannot write there") as caught:
        build(corpus, bpe, blocker / "stores")
    assert "\n" not in str(caught.value)


def test_a_rank_waiting_for_a_store_that_never_comes_gets_one_line(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="no store appeared in .* within 0 s") as caught:
        wait_for_store(tmp_path / "lm-train-0123", timeout_s=0)
    assert "\n" not in str(caught.value)


def test_a_rank_that_does_not_build_maps_the_built_store(corpus: Path, bpe: Any, tmp_path: Path) -> None:
    built = build(corpus, bpe, tmp_path)
    mapped = corpus_store("lm-train", corpus, bpe, OPTIONS, tmp_path, build=False)
    assert mapped.path == built.path
    assert json.loads((built.path / MANIFEST).read_text())["n_tokens"] == n_tokens(mapped)


def test_blocks_pickle_without_the_tokens(corpus: Path, bpe: Any, tmp_path: Path) -> None:
    blocks = TokenBlocks(build(corpus, bpe, tmp_path), 4)
    first = blocks[0]  # maps the file
    copy = pickle.loads(pickle.dumps(blocks))
    assert copy._tokens is None and torch.equal(copy[0], first)


def _refuse(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("tokenizer called")


def _append(path: Path) -> Path:
    """Add a line to a corpus file; the corpus folder."""
    with path.open("a", encoding="utf-8") as handle:
        handle.write("One more line.\n")
    return path.parent


def _char_tokenizer(corpus: Path) -> Any:
    """A char tokenizer trained on the corpus."""
    return train_tokenizer(sorted(corpus.iterdir()), "char", 100, corpus.parent / "char")


@pytest.mark.slow  # each pool process imports the data stack (about 5 s)
def test_files_tokenized_in_processes_give_the_same_store(corpus: Path, bpe: Any, tmp_path: Path) -> None:
    """`num_proc` 2 tokenizes whole files in two processes; ids and document ends equal one process's. Documents
    of a line each (the most ends to keep in order); a pool process reads a file as this one does, whatever the
    documents option (one pool proves the order of the parts: each pool costs its processes' imports)."""
    (corpus / "c.txt").write_text(TEXT * 2000, encoding="utf-8")  # longer than one batch of pieces
    one = build(corpus, bpe, tmp_path / "one", documents="line")
    two = corpus_store("lm-train", corpus, bpe, {**OPTIONS, "documents": "line"}, tmp_path / "two", num_proc=2)
    assert n_tokens(two) == n_tokens(one) > 0
    assert np.array_equal(ids(two), ids(one))
    assert rows(two) == rows(one)


@pytest.mark.slow
def test_a_data_error_in_a_tokenizing_process_keeps_file_and_line(bpe: Any, tmp_path: Path) -> None:
    """A bad JSONL line read in a pool process is the same one-line DataError, naming its file and line."""
    folder = tmp_path / "jsonl"
    folder.mkdir()
    (folder / "a.jsonl").write_text('{"text": "fine"}\n', encoding="utf-8")
    (folder / "b.jsonl").write_text('{"text": "fine"}\n{"words": "no text"}\n', encoding="utf-8")
    with pytest.raises(DataError) as caught:
        corpus_store("lm-train", folder, bpe, {**OPTIONS, "documents": "file"}, tmp_path / "cache", num_proc=2)
    assert caught.value.path is not None and caught.value.path.endswith("b.jsonl")
    assert caught.value.line == 2
