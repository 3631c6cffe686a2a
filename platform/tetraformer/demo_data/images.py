"""Image-classification demo data as class folders of PNGs: Fashion-MNIST (Debian) and scikit-learn's digits."""

from __future__ import annotations

from pathlib import Path

from tetraformer.demo_data.formats import read_idx, sample_indices, stratified_split, write_images
from tetraformer.demo_data.options import Counts, Options, cap
from tetraformer.demo_data.sources import apt_package_files, pick_file, pip_package_dir

FASHION_CLASSES = (
    "t-shirt_top",
    "trouser",
    "pullover",
    "dress",
    "coat",
    "sandal",
    "shirt",
    "sneaker",
    "bag",
    "ankle_boot",
)


def build_fashion_mnist(root: Path, opts: Options) -> Counts:
    """Fashion-MNIST (Debian dataset-fashion-mnist) -> fashion_mnist/{train,test}/<class>/<index>.png."""
    files = apt_package_files("dataset-fashion-mnist")
    counts = {}
    for split, prefix, default in (("train", "train", 6000), ("test", "t10k", 1000)):
        images = read_idx(pick_file(files, f"{prefix}-images-idx3-ubyte.gz", "dataset-fashion-mnist"))
        labels = read_idx(pick_file(files, f"{prefix}-labels-idx1-ubyte.gz", "dataset-fashion-mnist"))
        chosen = sample_indices(len(labels), cap(opts.limit, default), opts.seed)
        items = ((FASHION_CLASSES[labels[i]], f"{i:05d}", images[i]) for i in chosen)
        counts[f"fashion_mnist/{split}"] = write_images(root / "fashion_mnist" / split, items)
    return counts


def build_digits(root: Path, opts: Options) -> Counts:
    """scikit-learn's bundled 8x8 digits -> digits/{train,test}/<digit>/<index>.png (80/20, stratified)."""
    pip_package_dir("scikit-learn", "sklearn")
    from sklearn.datasets import load_digits

    digits = load_digits()
    pixels = (digits.images * (255 / 16)).round().astype("uint8")
    parts = stratified_split(range(len(digits.target)), lambda i: int(digits.target[i]), [0.8, 0.2], opts.seed)
    counts = {}
    for split, indices in zip(("train", "test"), parts, strict=True):
        limit = cap(opts.limit, None)
        items = ((str(digits.target[i]), f"{i:04d}", pixels[i]) for i in sorted(indices)[:limit])
        counts[f"digits/{split}"] = write_images(root / "digits" / split, items)
    return counts
