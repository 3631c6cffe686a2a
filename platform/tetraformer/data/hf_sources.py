"""Hugging Face datasets as data sources: Parquet/Arrow files, `save_to_disk` folders, the local cache by name.

A source is a path the data options take (`--data.train_path` ...):

- a `.parquet` or `.arrow` file, or a folder or glob of them (read like any other data files);
- a `Dataset.save_to_disk` folder, or a `DatasetDict.save_to_disk` folder with a split: `PATH:SPLIT`;
- `hf:NAME[:SPLIT]` (NAME, ORG/NAME, NAME/CONFIG or ORG/NAME/CONFIG): a dataset already in the local Hugging Face
  datasets cache (HF_DATASETS_CACHE, else HF_HOME/datasets), found offline: nothing is ever downloaded.

A source with named splits and none chosen gets its role's (`dataset_splits`): `--data.split` (default train)
for the training path, validation for val_path, test for test_path and predict_path.

Each source resolves to the Arrow/Parquet files that back it (`source_files`), so whatever keys on files (path,
size, mtime: tokenizers, token stores, the records cache) keys on them. Files are read table by table, memory-
mapped (Arrow) or batch by batch (Parquet), with pyarrow; the `datasets` features stored in their schema turn
`ClassLabel` ids into names. A row's index in its file (0-based, as `dataset[i]`) is its "line" in errors.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tetraformer.data.errors import DataError
from tetraformer.errors import ConfigError

if TYPE_CHECKING:  # pyarrow and `datasets` load when a table is read
    import pyarrow as pa
    from datasets import Features

log = logging.getLogger(__name__)

HF_PREFIX = "hf:"
PARQUET_SUFFIXES = (".parquet", ".pq")
TABLE_SUFFIXES = (*PARQUET_SUFFIXES, ".arrow")
DICT_FILE, STATE_FILE = "dataset_dict.json", "state.json"  # what save_to_disk writes (datasets.config's names)
BATCH_ROWS = 1024
Row = dict[str, Any]


# --- what a source is -----------------------------------------------------------------------------------------
def is_table_file(path: str | Path) -> bool:
    """Whether a file is read as a table (Parquet or Arrow), by its suffix."""
    return Path(path).suffix.lower() in TABLE_SUFFIXES


def is_dataset_source(spec: str | Path) -> bool:
    """Whether a path names a saved dataset (a save_to_disk folder, `PATH:SPLIT` of one) or `hf:NAME`."""
    return _parse(spec) is not None


def has_splits(spec: str | Path) -> bool:
    """Whether a source holds named splits (a DatasetDict folder or a cached dataset) and names none yet."""
    parsed = _parse(spec)
    return parsed is not None and parsed[2] is None and (parsed[0] == "hub" or (parsed[1] / DICT_FILE).is_file())


def with_split(spec: str | None, split: str) -> str | None:
    """The spec with `:split` added when it holds splits and names none (a role's default split)."""
    return f"{spec}:{split}" if spec is not None and has_splits(spec) else spec


def dataset_splits(split: str | None, *paths: str | None) -> tuple[str | None, ...]:
    """The train, val, test and predict paths with their default splits (`split`, else train; validation; test;
    test); `split` for a training path that holds no splits is a ConfigError."""
    train = paths[0]
    if split is not None and train is not None and not has_splits(train):
        raise ConfigError(
            f"--data.split {split!r}: --data.train_path {train} has no splits to choose from (a DatasetDict folder "
            "or hf:NAME without :SPLIT has)"
        )
    defaults = [split or "train", "validation", "test", "test"]
    return tuple(with_split(path, default) for path, default in zip(paths, defaults, strict=True))


def _parse(spec: str | Path) -> tuple[str, Any, str | None] | None:
    """("hub", name, split) or ("disk", folder, split) for a dataset source, else None."""
    text = str(spec)
    if text.startswith(HF_PREFIX):
        name, _, split = text[len(HF_PREFIX) :].partition(":")
        return "hub", name.strip("/"), split or None
    if _is_saved(Path(text).expanduser()):
        return "disk", Path(text).expanduser(), None
    head, colon, split = text.rpartition(":")
    if colon and split and _is_saved(Path(head).expanduser()):
        return "disk", Path(head).expanduser(), split
    return None


def _is_saved(folder: Path) -> bool:
    """Whether a folder was written by Dataset.save_to_disk or DatasetDict.save_to_disk."""
    return (folder / DICT_FILE).is_file() or (folder / STATE_FILE).is_file()


# --- the files behind a source ----------------------------------------------------------------------------------
def source_files(spec: str | Path) -> list[Path]:
    """The Arrow files that back a saved or cached dataset's split (what its identity is keyed on)."""
    parsed = _parse(spec)
    if parsed is None:
        raise DataError("not a saved dataset folder nor hf:NAME", spec)
    kind, target, split = parsed
    dataset = _cached_split(target, split) if kind == "hub" else _saved_split(target, split)
    files = [Path(f["filename"]) for f in dataset.cache_files]
    if not files:
        raise DataError("the dataset is held in memory, not in files", spec)
    return files


def _saved_split(folder: Path, split: str | None) -> Any:
    """One Dataset of a save_to_disk folder, memory-mapped (`datasets.load_from_disk`)."""
    import pyarrow as pa
    from datasets import DatasetDict, load_from_disk

    try:
        saved = load_from_disk(str(folder))
    except (OSError, ValueError, KeyError, json.JSONDecodeError, pa.ArrowException) as err:
        raise DataError(f"cannot load the saved dataset: {_one_line(err)}", folder) from None
    if isinstance(saved, DatasetDict):
        return _pick_split(dict(saved), split, str(folder), "PATH:SPLIT")
    if split is not None:
        raise DataError(f"is one Dataset without splits: drop ':{split}'", folder)
    return saved


def _pick_split(splits: dict[str, Any], split: str | None, where: str, form: str) -> Any:
    """The named split; none named or an unknown one is a DataError listing the splits there are."""
    names = ", ".join(splits) or "none"
    if split is None:
        raise DataError(f"holds splits {names}: name one as {form} (--data.split sets the training path's)", where)
    if split not in splits:
        raise DataError(f"has no split {split!r} (splits: {names})", where)
    return splits[split]


def hf_datasets_cache() -> Path:
    """Where the Hugging Face datasets cache is: HF_DATASETS_CACHE now, else where `datasets` put it at import
    (HF_DATASETS_CACHE, else HF_HOME/datasets, else ~/.cache/huggingface/datasets)."""
    from datasets import config

    return Path(os.environ.get("HF_DATASETS_CACHE") or config.HF_DATASETS_CACHE).expanduser()


def _cached_split(name: str, split: str | None) -> Any:
    """A split of a dataset in the local datasets cache, through `datasets`' offline `Cache` builder (the latest
    cached version, as `load_dataset` finds it with HF_DATASETS_OFFLINE=1)."""
    from datasets.packaged_modules.cache.cache import Cache

    cache = hf_datasets_cache()
    dataset, config = _cached_name(name, cache)
    where = f"{HF_PREFIX}{name}"
    try:
        with _quiet(Cache.__module__):  # it warns "Found the latest cached dataset configuration" on every call
            builder = Cache(
                cache_dir=str(cache),
                dataset_name=dataset.split("/")[-1],
                repo_id=dataset,
                config_name=config,
                version="auto",
                hash="auto",
            )
        splits = {str(s): s for s in builder.info.splits or {}}
        chosen = _pick_split(splits, split, where, f"{where}:SPLIT")
        log.debug("%s: the cached dataset in %s", where, builder.cache_dir)
        return builder.as_dataset(split=chosen)
    except DataError:
        raise
    except (OSError, ValueError) as err:  # datasets' own (not cached for that config, several configs cached)
        raise DataError(f"{_one_line(err)} (the local datasets cache {cache})", where) from None


@contextmanager
def _quiet(logger: str) -> Iterator[None]:
    """Hold a logger's warnings for the duration."""
    target = logging.getLogger(logger)
    level = target.level
    target.setLevel(logging.ERROR)
    try:
        yield
    finally:
        target.setLevel(level)


def _cached_name(name: str, cache: Path) -> tuple[str, str | None]:
    """(dataset, config) of NAME, NAME/CONFIG, ORG/NAME or ORG/NAME/CONFIG, by what the cache holds."""
    from datasets.naming import camelcase_to_snakecase

    where = f"{HF_PREFIX}{name}"
    for dataset, config in _readings([part for part in name.split("/") if part]):
        folder = cache / "___".join([*dataset[:-1], camelcase_to_snakecase(dataset[-1])])
        if folder.is_dir():
            _check_config(sorted(p.name for p in folder.iterdir() if p.is_dir()), config, where)
            return "/".join(dataset), config
    raise DataError(
        f"not in the local Hugging Face datasets cache (looked in {cache}, set by HF_DATASETS_CACHE or HF_HOME); "
        "this machine is offline, no download is attempted: load it once where there is a network (or pass a "
        "save_to_disk folder or Parquet files)",
        where,
    )


def _check_config(cached: list[str], config: str | None, where: str) -> None:
    """A DataError unless the named configuration is cached, or none is named and only one is."""
    if config is not None and config not in cached:
        raise DataError(f"has no cached configuration {config!r} (cached: {', '.join(cached) or 'none'})", where)
    if config is None and len(cached) > 1:
        raise DataError(f"several configurations are cached ({', '.join(cached)}): name one as {where}/CONFIG", where)


def _readings(parts: list[str]) -> list[tuple[list[str], str | None]]:
    """(dataset, config) readings of a name's parts, ORG/NAME before NAME/CONFIG."""
    if len(parts) == 1:
        return [(parts, None)]
    if len(parts) == 2:
        return [(parts, None), (parts[:1], parts[1])]
    return [(parts[:2], parts[2])] if len(parts) == 3 else []


# --- reading tables -------------------------------------------------------------------------------------------
def table_features(path: str | Path) -> Features:
    """The `datasets` features of a Parquet/Arrow file: those stored in its schema, else inferred from it."""
    from datasets import Features

    return Features.from_arrow_schema(_schema(Path(path)))


def table_columns(path: str | Path) -> list[str]:
    """The column names of a Parquet/Arrow file."""
    return list(_schema(Path(path)).names)


def check_columns(path: str | Path, wanted: Sequence[str], hint: str = "") -> None:
    """A DataError naming the file when a wanted column is missing, listing the columns there are."""
    columns = table_columns(path)
    missing = [name for name in wanted if name not in columns]
    if missing:
        there = ", ".join(map(repr, columns)) or "none"
        raise DataError(f"no column {', '.join(map(repr, missing))} (columns: {there}){hint}", path)


def iter_table_rows(path: str | Path, columns: Sequence[str] | None = None) -> Iterator[tuple[int, Row]]:
    """(row index, row) of a Parquet/Arrow file, ClassLabel ids as their names (-1: None)."""
    path = Path(path)
    decode = _decoders(table_features(path))
    index = 0
    for batch in _batches(path, columns):
        for row in batch.to_pylist():
            yield index, {name: decode[name](value) if name in decode else value for name, value in row.items()}
            index += 1


def class_names(files: Sequence[Path], column: str) -> list[str] | None:
    """The names of a ClassLabel (or list-of-ClassLabel) column in the first table file, else None."""
    from datasets import ClassLabel

    tables = [f for f in files if is_table_file(f)]
    if not tables or column not in table_columns(tables[0]):
        return None
    feature = table_features(tables[0])[column]
    feature = getattr(feature, "feature", feature)  # List(ClassLabel) / Sequence(ClassLabel)
    return list(feature.names) if isinstance(feature, ClassLabel) else None


def _decoders(features: Features) -> dict[str, Callable[[Any], Any]]:
    """Per ClassLabel column (or list of them), a function from stored ids to names."""
    from datasets import ClassLabel

    decoders: dict[str, Callable[[Any], Any]] = {}
    for name, feature in features.items():
        inner = getattr(feature, "feature", None)
        if isinstance(feature, ClassLabel):
            decoders[name] = _label_name(feature.names)
        elif isinstance(inner, ClassLabel):
            one = _label_name(inner.names)
            decoders[name] = lambda ids, one=one: None if ids is None else [one(i) for i in ids]
    return decoders


def _label_name(names: list[str]) -> Callable[[Any], str | None]:
    """A ClassLabel id -> its name; -1 (no label, as in a test split) and None -> None."""
    return lambda i: None if i is None or i < 0 else names[i] if i < len(names) else str(i)


def _schema(path: Path) -> pa.Schema:
    """The Arrow schema of a Parquet/Arrow file; an unreadable file is a DataError naming it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return pq.read_schema(path) if path.suffix.lower() in PARQUET_SUFFIXES else _arrow_table(path).schema
    except (pa.ArrowException, OSError) as err:
        raise _corrupt(path, err) from None


def _batches(path: Path, columns: Sequence[str] | None) -> Iterator[pa.RecordBatch]:
    """Record batches of a file, an unreadable one a DataError naming it."""
    import pyarrow as pa

    try:
        yield from table_batches(path, columns)
    except (pa.ArrowException, OSError) as err:
        raise _corrupt(path, err) from None


def table_batches(path: Path, columns: Sequence[str] | None = None, start: int = 0) -> Iterator[pa.RecordBatch]:
    """Record batches of a Parquet/Arrow file from row `start` on: Parquet read batch by batch (whole row groups
    before `start` skipped by their metadata), Arrow memory-mapped. pyarrow's errors pass through."""
    import pyarrow.parquet as pq

    wanted = None if columns is None else list(columns)
    if Path(path).suffix.lower() in PARQUET_SUFFIXES:
        parquet = pq.ParquetFile(path)
        groups, first = _row_groups_from(parquet.metadata, start)
        batches = parquet.iter_batches(BATCH_ROWS, row_groups=groups, columns=wanted) if groups else iter(())
    else:
        table = _arrow_table(Path(path))
        first, batches = 0, iter((table if wanted is None else table.select(wanted)).to_batches(BATCH_ROWS))
    for batch in batches:
        skip = min(max(start - first, 0), batch.num_rows)
        first += batch.num_rows
        if skip < batch.num_rows:
            yield batch.slice(skip)


def _row_groups_from(metadata: Any, start: int) -> tuple[list[int], int]:
    """The row groups holding rows `start` on, and the number of the first row of the first of them."""
    first = 0
    for group in range(metadata.num_row_groups):
        rows = metadata.row_group(group).num_rows
        if first + rows > start:
            return list(range(group, metadata.num_row_groups)), first
        first += rows
    return [], first


def _arrow_table(path: Path) -> pa.Table:
    """A memory-mapped Arrow file: the IPC stream format `datasets` writes, or the IPC file format."""
    import pyarrow as pa

    source = pa.memory_map(str(path))
    try:
        return pa.ipc.open_stream(source).read_all()
    except pa.ArrowInvalid:
        source.seek(0)
        return pa.ipc.open_file(source).read_all()


def _corrupt(path: Path, err: BaseException) -> DataError:
    """A DataError for a file pyarrow cannot read."""
    kind = "Parquet" if path.suffix.lower() in PARQUET_SUFFIXES else "Arrow"
    return DataError(f"not a readable {kind} file ({_one_line(err)})", path)


def _one_line(err: BaseException) -> str:
    """An exception's message on one line."""
    return " ".join(str(err).split()) or type(err).__name__
