"""A corpus whose documents tell whose they are (document i is letter i repeated), and streams over it."""

from __future__ import annotations

import json
import string
from itertools import islice, takewhile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from transformers import PreTrainedTokenizerFast

from tetraformer.data import train_tokenizer
from tetraformer.data.token_stream_dataset import Share, ShareState, TokenStream

OPTIONS: dict[str, Any] = {"format": "auto", "field": "text", "documents": "line", "encoding": "utf-8"}
LETTERS = string.ascii_letters  # document i is letter i repeated: its blocks tell whose they are


def char_tokenizer(folder: Path) -> PreTrainedTokenizerFast:
    """A character tokenizer knowing letters, digits and punctuation, trained into `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "alphabet.txt").write_text(string.printable, encoding="utf-8")
    return train_tokenizer(folder / "alphabet.txt", "char", 200, folder / "tokenizer")


def letter_docs(folder: Path, n_files: int, per_file: int, suffix: str = ".txt") -> list[Path]:
    """`n_files` files of `per_file` one-line documents; document i (across files) is 7-13 copies of letter i."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for f in range(n_files):
        docs = [LETTERS[f * per_file + d] * (7 + (f * per_file + d) % 7) for d in range(per_file)]
        path = folder / f"part{f:02d}{suffix}"
        if suffix == ".txt":
            path.write_text("".join(f"{doc}\n" for doc in docs), encoding="utf-8")
        elif suffix == ".jsonl":
            path.write_text("".join(json.dumps({"text": doc}) + "\n" for doc in docs), encoding="utf-8")
        else:
            pq.write_table(pa.table({"id": list(range(len(docs))), "text": docs}), path, row_group_size=3)
        paths.append(path)
    return paths


def stream(files: list[Path], tokenizer: Any, **options: Any) -> TokenStream:
    """A stream of all the files from their first piece (block 4, batch 3, seed 0, in order unless told)."""
    settings = {"block_size": 4, "batch_size": 3, "seed": 0, "shuffle_blocks": 0, **options}
    read = {**OPTIONS, **settings.pop("read", {})}
    return TokenStream([(path, 0) for path in files], read, tokenizer, **settings)


def first_blocks(data: TokenStream, n: int, share: Share | None = None, state: ShareState | None = None) -> list:
    """The first n blocks (as lists) of a share from a state, with the state after each."""
    pairs = islice(data.blocks(share or Share(), state or ShareState()), n)
    return [(block.tolist(), after) for block, after in pairs]


def letters(tokenizer: Any, ids: list[int]) -> set[str]:
    """The letters (documents) some ids hold."""
    return set(tokenizer.decode(ids, skip_special_tokens=True)) & set(LETTERS)


def pass_letters(data: TokenStream, share: Share) -> set[str]:
    """The letters in the blocks of a share's first pass."""
    blocks = takewhile(lambda pair: pair[1].epoch == 0, data.blocks(share, ShareState()))
    return letters(data.tokenizer, [i for block, _ in blocks for i in block])


def pass_length(data: TokenStream) -> int:
    """How many blocks one in-order pass of one share holds."""
    return sum(1 for _ in data.packed(Share(), 0, ShareState().start))
