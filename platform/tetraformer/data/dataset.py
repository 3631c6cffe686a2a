"""Build a `datasets.Dataset` from a validating generator, cached by the files' contents."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tetraformer.data.errors import DataError

if TYPE_CHECKING:  # `datasets` loads when data is read: commands that read none (generate) start sooner
    from datasets import Dataset, Features
    from datasets.exceptions import DatasetGenerationError

logger = logging.getLogger(__name__)

RowGenerator = Callable[..., Iterator[dict[str, Any]]]


def build_dataset(
    generator: RowGenerator,
    paths: list[str],
    options: dict[str, Any],
    features: Features | None = None,
    cache_dir: str | Path | None = None,
) -> Dataset:
    """Run `generator(paths, **options)` through `Dataset.from_generator`, re-raising its DataErrors."""
    from datasets import Dataset
    from datasets.exceptions import DatasetGenerationError

    fingerprint = files_fingerprint(generator, paths, options)
    try:
        return Dataset.from_generator(
            generator,
            features=features,
            gen_kwargs={"paths": paths, **options},
            cache_dir=None if cache_dir is None else str(cache_dir),
            fingerprint=fingerprint,
        )
    except DatasetGenerationError as err:
        raise _unwrap(err, paths) from None


def files_fingerprint(generator: RowGenerator, paths: list[str], options: dict[str, Any]) -> str:
    """Hash of the reader, its options and each file's path, size and mtime (edits bust the cache)."""
    stats = [(str(Path(p).resolve()), Path(p).stat().st_size, Path(p).stat().st_mtime_ns) for p in paths]
    reader = f"{generator.__module__}.{generator.__qualname__}"
    payload = json.dumps([reader, options, stats], sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:32]


def _unwrap(err: DatasetGenerationError, paths: list[str]) -> DataError:
    """The DataError raised inside the generator, or a DataError describing the failure."""
    cause: BaseException | None = err
    while cause is not None:
        if isinstance(cause, DataError):
            return cause
        cause = cause.__cause__ or cause.__context__
    reason = err.__cause__ or err
    where = paths[0] if len(paths) == 1 else f"{len(paths)} files ({paths[0]}, ...)"
    logger.debug("dataset generation failed", exc_info=err)
    return DataError(f"could not build a dataset from {where}: {type(reason).__name__}: {reason}")
