"""The first documents of a streamed corpus, held out for validation in a token store; training never reads them.

The held-out part is the first `n_documents` documents of the files in their resolved (sorted) order, the same on
every run and rank. Its store is keyed like a corpus store plus that count, and its manifest records where the
part ends (`held_out`: files wholly held out, then pieces held out of the next file), which is where the
training stream starts (`TokenStream`'s sources).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tetraformer.data.corpus_store import READ_OPTIONS, corpus_key, encode_batch
from tetraformer.data.errors import DataError
from tetraformer.data.files import FileSpec, resolve_files
from tetraformer.data.stream_sources import numbered_pieces
from tetraformer.data.token_store import (
    StoreWriter,
    TokenStore,
    prepare_store,
    store_folder,
    wait_for_store,
)
from tetraformer.data.token_stream import Encode, Piece, batch_encoder, batches

Source = tuple[Path, int]  # a file, and its first piece that training reads


def held_out_store(
    name: str,
    files: FileSpec,
    tokenizer: Any,
    options: dict[str, Any],
    n_documents: int,
    cache_dir: str | Path | None = None,
    build: bool = True,
) -> TokenStore:
    """The store of the corpus's first `n_documents` documents: reused, or built when `build`, else waited for."""
    paths = resolve_files(files)
    options = {k: options[k] for k in READ_OPTIONS}
    key = {**corpus_key(paths, tokenizer, options), "held_out_documents": n_documents}
    if not build:
        return wait_for_store(store_folder(cache_dir, name, key))
    return prepare_store(
        cache_dir,
        name,
        key,
        len(tokenizer),
        lambda writer: write_held_out(writer, paths, tokenizer, options, n_documents),
    )


def training_sources(files: FileSpec, store: TokenStore | None = None) -> list[Source]:
    """The files training streams, each with its first piece: those after the held-out part of `store`, if any."""
    paths = resolve_files(files)
    if store is None:
        return [(path, 0) for path in paths]
    held = store.manifest["held_out"]
    whole, pieces = int(held["files"]), int(held["pieces"])
    return [(path, pieces if index == whole else 0) for index, path in enumerate(paths) if index >= whole]


def write_held_out(
    writer: StoreWriter, paths: list[Path], tokenizer: Any, options: dict[str, Any], n_documents: int
) -> dict[str, Any]:
    """Tokenize the first `n_documents` documents into the writer (eos after each); returns where they end."""
    eos = tokenizer.eos_token_id
    if eos is None:
        raise DataError("the tokenizer has no eos token to separate documents")
    encode = batch_encoder(tokenizer)
    part = HeldOut(paths, options, encode, n_documents)
    for batch in batches(part.pieces()):
        writer.write(*encode_batch(encode, batch, eos, writer.dtype))
    return {"held_out": {"files": part.whole_files, "pieces": part.cut_pieces}}


class HeldOut:
    """Reads the first documents of a corpus; afterwards `whole_files` and `cut_pieces` say where they end."""

    def __init__(self, paths: list[Path], options: dict[str, Any], encode: Encode, n_documents: int) -> None:
        self.paths, self.options, self.encode, self.n_documents = paths, options, encode, n_documents
        self.whole_files = self.cut_pieces = 0

    def pieces(self) -> Iterator[Piece]:
        """The held-out pieces; a DataError when no document is left for training after them."""
        documents = 0
        for index, path in enumerate(self.paths):
            for number, text, ends in numbered_pieces(path, self.options, self.encode):
                if documents == self.n_documents:  # a document follows the held-out ones: training has data
                    self.whole_files, self.cut_pieces = index, number
                    return
                documents += ends
                yield text, ends
        raise DataError(
            f"--data.val_documents {self.n_documents} holds out every document of the training files "
            f"({documents}), leaving none to train on: lower it, or set --data.val_path"
        )
