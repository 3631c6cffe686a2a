"""Data layer: checked readers, splits, LM packing, label vocabularies, padding, tokenizers (no model).

One pipeline for every task:

    source: files, globs, `datasets` folders, Parquet/Arrow, hf:NAME   (files.py, hf_sources.py, records.py, text.py)
      -> rendered rows (a task's build_rows, `tokenize_rows`)            or token pieces (corpus_store.py)
      -> ONE store: Arrow tables + manifest.json, keyed, checksummed   (store.py, store_integrity.py)
      -> rows by index (store_rows.py)  or  blocks by offset (token_blocks.py)
      -> ONE kind of training loader, a PositionLoader: its state is every rank's position after the last batch
         training took, resumed exactly (training/checkpointing/resume.py; a stream's: stream_loader.py)

A streamed corpus (`--data.streaming`) skips the store for training: it is tokenized as it is read
(token_stream_dataset.py), and its held-out start is a corpus store like any other.
"""

from tetraformer.data.collate import IGNORE_INDEX, PaddingCollator
from tetraformer.data.dataset import build_dataset
from tetraformer.data.errors import DataError
from tetraformer.data.files import resolve_files
from tetraformer.data.labels import LabelVocabulary
from tetraformer.data.lines import iter_lines
from tetraformer.data.packing import pack_documents, pack_token_ids
from tetraformer.data.records import Record, infer_format, iter_records, read_records
from tetraformer.data.splits import train_val_split
from tetraformer.data.text import iter_documents, read_text
from tetraformer.data.tokenizer import SPECIAL_TOKENS, load_tokenizer, train_tokenizer

__all__ = [
    "IGNORE_INDEX",
    "SPECIAL_TOKENS",
    "DataError",
    "LabelVocabulary",
    "PaddingCollator",
    "Record",
    "build_dataset",
    "infer_format",
    "iter_documents",
    "iter_lines",
    "iter_records",
    "load_tokenizer",
    "pack_documents",
    "pack_token_ids",
    "read_records",
    "read_text",
    "resolve_files",
    "train_tokenizer",
    "train_val_split",
]
