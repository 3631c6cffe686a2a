"""Where labelled images come from: class folders, CSV/TSV/JSON/JSONL of path + label, `.npz` arrays, datasets
(Parquet/Arrow tables or saved/cached Hugging Face datasets with an image column), or plain image files
(predict). Each source becomes an ImageSet of decoded uint8 images with raw labels."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor
from torch.utils.data import Dataset

from tetraformer.data.errors import DataError
from tetraformer.data.files import resolve_files
from tetraformer.data.hf_sources import check_columns, is_dataset_source, is_table_file, iter_table_rows
from tetraformer.data.images import IMAGE_SUFFIXES, ImageRef, Where, array_images, cache_key, decode_images
from tetraformer.data.labels import LabelVocabulary
from tetraformer.data.records import LINE_COLUMN, SOURCE_COLUMN, read_records

log = logging.getLogger(__name__)
CACHE_FOLDER = ".tetraformer-cache"  # beside the data: a hidden folder is never taken for a class
RECORD_FORMATS = ("csv", "tsv", "json", "jsonl")


@dataclass(eq=False)
class ImageSet(Dataset):
    """A split: (N, C, S, S) uint8 images, their paths, raw labels (None to predict) and where each came from.

    `targets` (N,) holds the class ids once a label vocabulary encodes the labels. A DataLoader fetches whole
    batches through `__getitems__` (one tensor index, no per-image dicts).
    """

    images: Tensor
    paths: list[str]
    labels: list[str] | None
    where: list[Where]
    targets: Tensor | None = field(default=None)

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> dict[str, Any]:
        return self.__getitems__([index])

    def __getitems__(self, indices: list[int]) -> dict[str, Any]:
        """A batch: pixels (B, C, S, S) uint8, labels (B,) class ids when known, and the images' paths."""
        index = torch.as_tensor(indices, dtype=torch.long)
        batch: dict[str, Any] = {"pixels": self.images[index]}
        if self.targets is not None:
            batch["labels"] = self.targets[index]
        batch["paths"] = [self.paths[i] for i in indices]
        return batch

    def select(self, indices: list[int]) -> ImageSet:
        """The rows at `indices` (train_val_split takes subsets through this)."""
        index = torch.as_tensor(indices, dtype=torch.long)
        pick = [self.paths[i] for i in indices], [self.where[i] for i in indices]
        labels = None if self.labels is None else [self.labels[i] for i in indices]
        targets = None if self.targets is None else self.targets[index]
        return ImageSet(self.images[index], pick[0], labels, pick[1], targets)

    def encode(self, vocabulary: LabelVocabulary) -> None:
        """Class ids of the labels; an unknown label is a DataError naming its folder or CSV row."""
        if self.labels is not None:
            ids = [vocabulary.encode(label, *where) for label, where in zip(self.labels, self.where, strict=True)]
            self.targets = torch.tensor(ids, dtype=torch.long)


@dataclass
class Reading:
    """How a source is decoded."""

    channels: int
    size: int
    cache_dir: Path | None  # None: next to the data (CACHE_FOLDER); the cache is off when `cache` is False
    cache: bool = True
    skip_bad: bool = False
    path_field: str = "path"
    label_field: str = "label"
    format: str | None = None  # folder, csv, tsv, json, jsonl, npz; None: from the path
    image_field: str = "image"  # a table's image column: an Image feature, encoded bytes or a path

    def cache_for(self, source: Path) -> Path | None:
        """The cache folder of a source: the configured one, or a hidden one beside the source."""
        if not self.cache:
            return None
        return self.cache_dir or source.parent / CACHE_FOLDER


def read_source(path: str, reading: Reading, labelled: bool) -> ImageSet:
    """The images (and labels, when `labelled`) of one source, its kind from `reading.format` or the path."""
    tables = _table_files(path)
    if tables:
        return _read_tables(tables, reading, labelled)
    source = Path(path)
    if not source.exists():
        raise DataError(f"no such file or folder: {source}")
    kind = reading.format or _kind(source)
    if kind == "npz":
        return _read_npz(source, reading, labelled)
    if kind == "folder":
        paths, labels, where = _folder_items(source, labelled, reading.skip_bad)
    elif kind == "image":
        paths, labels, where = [str(source)], None, [(str(source), None)]
    else:
        paths, labels, where = _record_items(source, kind, reading, labelled)
    decoded = decode_images(paths, where, reading.channels, reading.size, reading.cache_for(source), reading.skip_bad)
    keep = decoded.kept
    return ImageSet(
        decoded.images,
        [paths[i] for i in keep],
        None if labels is None else [labels[i] for i in keep],
        [where[i] for i in keep],
    )


def _table_files(path: str) -> list[Path] | None:
    """The Parquet/Arrow files of a dataset source, a table file, or a glob or folder holding only tables."""
    if is_dataset_source(path) or is_table_file(path):
        return resolve_files(path)
    folder = Path(path)
    if folder.is_dir():
        tops = [p for p in folder.iterdir() if not p.name.startswith(".")]
        if any(p.is_dir() for p in tops) or not any(is_table_file(p) for p in tops):
            return None  # class folders, or a folder of images to predict
    elif folder.exists() or not any(c in path for c in "*?["):
        return None
    files = resolve_files(path)
    return files if all(is_table_file(f) for f in files) else None


def _read_tables(files: list[Path], reading: Reading, labelled: bool) -> ImageSet:
    """The images of a table's image column (decoded bytes, or paths from the table's folder) and its labels."""
    columns = [reading.image_field, *([reading.label_field] if labelled else [])]
    refs: list[ImageRef] = []
    labels: list[str] = []
    where: list[Where] = []
    for file in files:
        check_columns(file, columns, " (set --data.image_field and --data.label_field)")
        for index, row in iter_table_rows(file, columns):
            refs.append(_image_ref(row[reading.image_field], file, index))
            where.append((str(file), index))
            if labelled:
                labels.append(row[reading.label_field])
    key = cache_key([str(f) for f in files], reading.channels, reading.size, f"table {reading.image_field}")
    decoded = decode_images(
        refs, where, reading.channels, reading.size, reading.cache_for(files[0]), reading.skip_bad, key
    )
    keep = decoded.kept
    return ImageSet(
        decoded.images,
        [f"{where[i][0]}#{where[i][1]}" for i in keep],
        [labels[i] for i in keep] if labelled else None,
        [where[i] for i in keep],
    )


def _image_ref(value: object, file: Path, index: int) -> ImageRef:
    """An Image feature's {bytes, path}, raw bytes, or a path (relative to the table's folder)."""
    if isinstance(value, dict):
        value = value.get("bytes") or value.get("path")
    if isinstance(value, bytes):
        return value
    if isinstance(value, str) and value.strip():
        return str(file.parent / value.strip())
    raise DataError(f"image column holds {type(value).__name__}, not an image (bytes or a path)", file, index)


def _kind(source: Path) -> str:
    """folder, npz, image or a record format, from the path."""
    if source.is_dir():
        return "folder"
    suffix = source.suffix.lower().lstrip(".")
    if suffix in ("npz", *RECORD_FORMATS):
        return suffix
    if source.suffix.lower() in IMAGE_SUFFIXES:
        return "image"
    raise DataError(f"cannot tell what {source} holds: expected a folder, an image, .npz, .csv, .tsv, .json or .jsonl")


def _images_in(folder: Path) -> list[Path]:
    """The image files under a folder (recursively, hidden folders left out), sorted."""
    return sorted(
        p
        for p in folder.rglob("*")
        if p.suffix.lower() in IMAGE_SUFFIXES
        and p.is_file()
        and not any(part.startswith(".") for part in p.relative_to(folder).parts)
    )


def _folder_items(root: Path, labelled: bool, skip_bad: bool) -> tuple[list[str], list[str] | None, list[Where]]:
    """`root/<class>/*` images labelled by folder name; to predict, every image under root."""
    if not labelled:
        files = _images_in(root)
        if not files:
            raise DataError("folder has no images", root)
        return [str(f) for f in files], None, [(str(f), None) for f in files]
    classes = sorted(d for d in root.iterdir() if d.is_dir() and not d.name.startswith("."))
    if not classes:
        raise DataError("folder has no class folders: expected ROOT/<class>/<image> files", root)
    paths: list[str] = []
    labels: list[str] = []
    empty = []
    for folder in classes:
        files = _images_in(folder)
        if not files:
            empty.append(folder)
            continue
        paths += [str(f) for f in files]
        labels += [folder.name] * len(files)
    if empty and not skip_bad:
        raise DataError(f"class folder has no images ({', '.join(IMAGE_SUFFIXES)})", empty[0])
    if empty:
        log.warning(
            "skipped %d empty class folder(s) (--data.skip_bad_images): %s",
            len(empty),
            ", ".join(str(f) for f in empty),
        )
    if not paths:
        raise DataError("no images in any class folder", root)
    # an unknown label at val/test names the class folder
    return paths, labels, [(str(root / label), None) for label in labels]


def _record_items(
    source: Path, kind: str, reading: Reading, labelled: bool
) -> tuple[list[str], list[str] | None, list[Where]]:
    """Rows of path (+ label); relative paths resolve against the file's own folder; a missing file is an
    error."""
    required = (reading.path_field, reading.label_field) if labelled else (reading.path_field,)
    paths: list[str] = []
    labels: list[str] = []
    where: list[Where] = []
    missing = []
    for record in read_records(str(source), kind, required):
        at = (str(record[SOURCE_COLUMN]), int(record[LINE_COLUMN]))
        image = Path(at[0]).parent / str(record[reading.path_field]).strip()
        if not image.is_file():
            if not reading.skip_bad:
                raise DataError(f"image file not found: {image}", *at)
            missing.append(f"{at[0]}:{at[1]}: {image}")
            continue
        paths.append(str(image))
        where.append(at)
        if labelled:
            labels.append(record[reading.label_field])
    if missing:
        log.warning(
            "skipped %d rows whose image file is missing (--data.skip_bad_images); first: %s",
            len(missing),
            missing[0],
        )
    return paths, labels if labelled else None, where


def _read_npz(source: Path, reading: Reading, labelled: bool) -> ImageSet:
    """`x` images and `y` labels (integers or strings) from a NumPy archive."""
    try:
        with np.load(source, allow_pickle=False) as archive:
            arrays = {key: archive[key] for key in archive.files}
    except (OSError, ValueError) as err:
        raise DataError(f"cannot read the NumPy archive: {err}", source) from None
    if "x" not in arrays or (labelled and "y" not in arrays):
        raise DataError(f"expected arrays 'x' and 'y', found {', '.join(map(repr, arrays)) or 'none'}", source)
    x = arrays["x"]
    images = array_images(x, reading.channels, reading.size, str(source))
    n = images.shape[0]
    labels = None
    if labelled:
        y = arrays["y"].reshape(-1)
        if len(y) != n:
            raise DataError(f"x holds {n} images but y holds {len(y)} labels", source)
        labels = [str(v) for v in y.tolist()]
    paths = [f"{source}#{i}" for i in range(n)]
    return ImageSet(images, paths, labels, [(str(source), None)] * n)
