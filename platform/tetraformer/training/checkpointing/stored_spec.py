"""The DataSpec a checkpoint stores: read back with its tokenizer, or rebuilt from older checkpoints' task settings."""

from __future__ import annotations

from typing import Any

from tetraformer.data.spec import DataSpec
from tetraformer.payload import DATA_SPEC_KEY, tokenizer_from_state


def stored_spec(payload: dict[str, Any]) -> DataSpec:
    """The DataSpec a checkpoint's payload stores, with its tokenizer.

    Checkpoints from before DATA_SPEC_KEY (and ones imported from Hugging Face) keep what the data decided in the
    task settings: the label vocabulary under "labels", image reading under "images", the rest as task extras.
    """
    tokenizer = tokenizer_from_state(payload.get("tokenizer"))
    if DATA_SPEC_KEY in payload:
        return DataSpec.from_state(payload[DATA_SPEC_KEY], tokenizer)
    task = dict(payload.get("task") or {})
    images = task.pop("images", None)
    legacy = DataSpec.from_state({"labels": task.pop("labels", None), "image": images, "extras": task})
    return DataSpec.of(tokenizer, labels=legacy.labels, image=legacy.image, extras=legacy.extras)
