"""Image classification (ViT) from image folders, CSV/JSONL of paths, or `.npz` arrays."""
