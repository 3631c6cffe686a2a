"""Images as uint8 tensors: Pillow decoding, channel conversion, resizing, arrays, and a decoded-image cache.

Every image becomes a (C, S, S) uint8 tensor, C = `channels` (1 or 3) and S the model's image size. A split's
decoded images are cached as one tensor file keyed by the files' paths, sizes and modification times (and the
channels and size), so later epochs and later runs never decode again; a changed file changes the key.
"""

from __future__ import annotations

import hashlib
import io
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image, UnidentifiedImageError
from torch import Tensor

from tetraformer.data.errors import DataError
from tetraformer.files import atomic_write

log = logging.getLogger(__name__)
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff", ".ppm", ".pgm")
CACHE_VERSION = 1  # bump when decoding changes, so older cache files are not reused
WIDE_GRAY_MODES = ("I;16", "I;16B", "I;16L", "I", "F")  # 16/32-bit gray: scaled to 0..255
CONVERTIBLE_MODES = (
    "1",
    "L",
    "LA",
    "P",
    "PA",
    "RGB",
    "RGBA",
    "RGBX",
    "CMYK",
    "YCbCr",
    "LAB",
    "HSV",
    "La",
    "RGBa",
)
GRAY_WEIGHTS = (0.299, 0.587, 0.114)  # ITU-R 601-2 luma, as Pillow's RGB -> L
Where = tuple[str, int | None]  # (file, line) an error names: the image itself, or the CSV row naming it
ImageRef = str | Path | bytes  # an image file, or an encoded image's bytes (a dataset's Image column)


@dataclass
class Decoded:
    """The images that decoded, (N, C, S, S) uint8, and the positions (in the input order) they came from."""

    images: Tensor
    kept: list[int]


def decode_image(path: ImageRef, channels: int, size: int) -> Tensor:
    """One image file (or an encoded image's bytes) -> (channels, size, size) uint8; unreadable, truncated or
    unconvertible: DataError."""
    name = None if isinstance(path, bytes) else path
    try:
        with Image.open(io.BytesIO(path) if isinstance(path, bytes) else path) as image:
            image.load()
            array = _pixels(image, channels)
    except (OSError, UnidentifiedImageError, SyntaxError, ValueError) as err:
        raise DataError(f"cannot read image: {_reason(err, name or '')}", name) from None
    return resize(torch.from_numpy(array.copy()).permute(2, 0, 1)[None], size)[0]


def _pixels(image: Image.Image, channels: int) -> np.ndarray:
    """(H, W, channels) uint8 from any Pillow mode: palette, alpha, 16-bit and float images included."""
    if image.mode in WIDE_GRAY_MODES:
        wide = np.asarray(image, dtype=np.float64)
        top = 65535.0 if image.mode.startswith("I;16") else max(float(wide.max()), 1.0)
        gray = np.clip(wide / top * 255.0 + 0.5, 0, 255).astype(np.uint8)[..., None]
        return np.repeat(gray, channels, axis=2)
    if image.mode in CONVERTIBLE_MODES:
        return np.asarray(image.convert("L" if channels == 1 else "RGB"), dtype=np.uint8).reshape(
            image.height, image.width, channels
        )
    raise ValueError(f"image mode {image.mode!r} cannot be converted to {channels} channel(s)")


def _reason(err: BaseException, path: str | Path) -> str:
    """Pillow's reason in one line, without the path the error names already."""
    text = " ".join(str(err).replace(f" {str(path)!r}", "").split()) or type(err).__name__
    return text.replace("image file is truncated", "the file is truncated")


def resize(images: Tensor, size: int) -> Tensor:
    """(N, C, H, W) uint8 -> (N, C, size, size) uint8 (antialiased bilinear; unchanged when already that
    size)."""
    if images.shape[-2:] == (size, size):
        return images.contiguous()
    out = F.interpolate(images.float(), size=(size, size), mode="bilinear", antialias=True, align_corners=False)
    return out.round().clamp(0, 255).to(torch.uint8)


def convert_channels(images: Tensor, channels: int, source: str) -> Tensor:
    """(N, C, H, W) uint8 with C of 1 (gray), 2 (gray + alpha), 3 (RGB) or 4 (RGBA) -> `channels` channels."""
    c = images.shape[1]
    if c not in (1, 2, 3, 4):
        raise DataError(f"images have {c} channels; cannot convert them to {channels} (expected 1, 2, 3 or 4)", source)
    colour = images[:, : 1 if c < 3 else 3]  # alpha dropped
    if channels == colour.shape[1]:
        return colour.contiguous()
    if channels == 3:
        return colour.expand(-1, 3, -1, -1).contiguous()
    weights = torch.tensor(GRAY_WEIGHTS).view(1, 3, 1, 1)
    return (colour.float() * weights).sum(1, keepdim=True).round().clamp(0, 255).to(torch.uint8)


def array_images(x: np.ndarray, channels: int, size: int, source: str) -> Tensor:
    """An array of images (N, H, W), (N, H, W, C) or (N, C, H, W), uint8 or float (0..1 or 0..255) ->
    uint8."""
    if x.ndim == 3:
        x = x[:, None]
    elif x.ndim == 4 and not (x.shape[1] in (1, 2, 3, 4) and x.shape[-1] not in (1, 2, 3, 4)):
        x = x.transpose(0, 3, 1, 2)  # (N, H, W, C) -> (N, C, H, W)
    elif x.ndim != 4:
        raise DataError(f"x has shape {x.shape}; expected (N, H, W), (N, H, W, C) or (N, C, H, W)", source)
    if x.dtype != np.uint8:
        if not np.issubdtype(x.dtype, np.number):
            raise DataError(f"x has dtype {x.dtype}; expected uint8 or float pixels", source)
        x = x.astype(np.float64)
        x = np.clip(x * 255.0 if x.max(initial=0.0) <= 1.0 else x, 0, 255).round().astype(np.uint8)
    return resize(convert_channels(torch.from_numpy(np.ascontiguousarray(x)), channels, source), size)


# --- decoding many files, through the cache -----------------------------------------------------------------
def cache_key(paths: Sequence[str], channels: int, size: int, extra: str = "") -> str:
    """A hash of the files (path, byte size, modification time), the decoding settings and `extra`."""
    digest = hashlib.sha256(f"v{CACHE_VERSION} c{channels} s{size} {extra}\n".encode())
    for path in paths:
        stat = Path(path).stat()
        digest.update(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:24]


def decode_images(
    paths: Sequence[ImageRef],
    where: Sequence[Where],
    channels: int,
    size: int,
    cache_dir: Path | None,
    skip_bad: bool = False,
    key: str | None = None,
) -> Decoded:
    """Decode every file (or load the cached tensor of an earlier decode); a bad file is a DataError at
    `where`. The cache is keyed on the files, or on `key` (images held in a table: its files' cache_key).

    With `skip_bad`, bad files are left out (kept says which stayed), counted and reported in one log line.
    """
    key = key or cache_key([str(p) for p in paths], channels, size)
    cache = cache_dir / f"images-{key}.pt" if cache_dir is not None else None
    if cache is not None and cache.is_file():
        stored = torch.load(cache, weights_only=True)
        log.info("read %d decoded images from the cache %s", len(stored["kept"]), cache)
        return Decoded(stored["images"], stored["kept"])
    decoded = _decode_all(paths, where, channels, size, skip_bad)
    if cache is not None:
        _write_cache(cache, decoded)
    return decoded


def _decode_all(paths: Sequence[ImageRef], where: Sequence[Where], channels: int, size: int, skip_bad: bool) -> Decoded:
    """Decode each file into one preallocated (N, C, S, S) tensor."""
    images = torch.empty(len(paths), channels, size, size, dtype=torch.uint8)
    kept: list[int] = []
    bad: list[str] = []
    for i, (path, (file, line)) in enumerate(zip(paths, where, strict=True)):
        try:
            images[len(kept)] = decode_image(path, channels, size)
        except DataError as err:
            named = err.message if isinstance(path, bytes) else f"{path}: {err.message}"
            located = err if line is None else DataError(named, file, line)  # a CSV or table row named it
            if not skip_bad:
                raise located from None
            bad.append(str(located))
            continue
        kept.append(i)
    if bad:
        log.warning(
            "skipped %d of %d images that could not be read (--data.skip_bad_images); first: %s",
            len(bad),
            len(paths),
            bad[0],
        )
    return Decoded(images[: len(kept)].clone() if bad else images, kept)


def _write_cache(cache: Path, decoded: Decoded) -> None:
    """Save the decoded split atomically; an unwritable cache folder costs a warning."""
    try:
        atomic_write(cache, lambda f: torch.save({"images": decoded.images, "kept": decoded.kept}, f))
        log.info("cached %d decoded images in %s", len(decoded.kept), cache)
    except OSError as err:
        log.warning("cannot write the image cache %s (%s); images will be decoded again next run", cache, err)


# --- normalisation ------------------------------------------------------------------------------------------
@dataclass
class Normalization:
    """Per-channel mean and std of pixel values in 0..1: the model sees (pixels / 255 - mean) / std."""

    mean: list[float]
    std: list[float]

    @classmethod
    def of(cls, images: Tensor, chunk: int = 4096) -> Normalization:
        """The mean and std of each channel over (N, C, H, W) uint8 images, summed in chunks (float64)."""
        total = torch.zeros(images.shape[1], dtype=torch.float64)
        squares = torch.zeros_like(total)
        for start in range(0, images.shape[0], chunk):
            part = images[start : start + chunk].double() / 255.0  # (n, C, H, W)
            total += part.sum((0, 2, 3))
            squares += part.square().sum((0, 2, 3))
        count = images.shape[0] * images.shape[2] * images.shape[3]
        mean = total / count
        std = (squares / count - mean.square()).clamp(min=0).sqrt().clamp(min=1e-3)
        return cls([round(float(v), 6) for v in mean], [round(float(v), 6) for v in std])

    def __call__(self, pixels: Tensor) -> Tensor:
        """(B, C, H, W) pixels in 0..255 (uint8, or float after mixing) -> normalised float32."""
        mean = torch.tensor(self.mean, device=pixels.device).view(1, -1, 1, 1)
        std = torch.tensor(self.std, device=pixels.device).view(1, -1, 1, 1)
        return (pixels.float() / 255.0 - mean) / std

    def state(self) -> dict[str, list[float]]:
        """Plain data for the checkpoint."""
        return {"mean": list(self.mean), "std": list(self.std)}
