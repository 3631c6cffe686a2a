"""DataSpec: what the data tells the network (tokenizer, lengths, labels, images, task extras), in one object.

A datamodule publishes it (`TaskDataModule.spec()`), the module builds its network from it (`TaskModule.use_spec`),
and the checkpoint stores it (`state`, beside the tokenizer the payload keeps), so a checkpoint alone gives
`predict`, `test` and `generate` the same tokenizer, labels, lengths and normalisation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tetraformer.data.labels import LabelVocabulary
from tetraformer.data.tokenizer import decoder_start_token

SPECIAL_IDS = ("pad", "bos", "eos", "unk", "mask", "cls", "sep")  # the tokenizer's `<name>_token_id`s kept


@dataclass(frozen=True)
class ImageSpec:
    """How images are read: resized to `size`, `channels` of them, normalised per channel with mean and std."""

    size: int
    channels: int
    mean: tuple[float, ...]
    std: tuple[float, ...]


@dataclass(frozen=True)
class TrainingBatches:
    """How the training split is batched, for sizing a token budget's schedule (training/base/run_length.py)."""

    batch_size: int  # rows a batch holds (sentences, for a tagger)
    epoch_tokens: int | None = None  # real tokens one pass over the training rows holds; None: not known from them


@dataclass(frozen=True)
class DataSpec:
    """What the network needs from the data; equal specs build the same network and read data the same way."""

    tokenizer: Any = field(default=None, compare=False, repr=False)  # a Hugging Face fast tokenizer, or None
    vocab_size: int = 0  # tokens the tokenizer produces (0: no text)
    special_ids: Mapping[str, int] = field(default_factory=dict)  # pad, bos, eos, ..., decoder_start: token ids
    max_length: int = 0  # the longest sequence a batch holds (0: no limit from the data)
    length_option: str | None = None  # the option that sets max_length, e.g. "--data.max_length"
    labels: LabelVocabulary | None = None  # the label (tag) vocabulary of labelled data
    image: ImageSpec | None = None  # how images are read, for image data
    extras: Mapping[str, Any] = field(default_factory=dict)  # task settings, plain data: tag scheme, source prefix
    training: TrainingBatches | None = field(default=None, compare=False)  # this run's batches; not in checkpoints

    @classmethod
    def of(cls, tokenizer: Any = None, **fields: Any) -> DataSpec:
        """A spec with `tokenizer`, its vocabulary size and special ids filled in."""
        if tokenizer is None:
            return cls(**fields)
        return cls(tokenizer=tokenizer, vocab_size=len(tokenizer), special_ids=special_ids(tokenizer), **fields)

    def state(self) -> dict[str, Any]:
        """Plain data for the checkpoint; the tokenizer is stored beside it (payload "tokenizer")."""
        return {
            "vocab_size": self.vocab_size,
            "special_ids": dict(self.special_ids),
            "max_length": self.max_length,
            "length_option": self.length_option,
            "labels": self.labels.state() if self.labels is not None else None,
            "image": image_state(self.image),
            "extras": dict(self.extras),
        }

    @classmethod
    def from_state(cls, state: dict[str, Any], tokenizer: Any = None) -> DataSpec:
        """The spec `state` saved, with its tokenizer."""
        labels, image = state.get("labels"), state.get("image")
        return cls(
            tokenizer=tokenizer,
            vocab_size=state.get("vocab_size", 0),
            special_ids=dict(state.get("special_ids") or {}),
            max_length=state.get("max_length", 0),
            length_option=state.get("length_option"),
            labels=LabelVocabulary.from_state(labels) if labels else None,
            image=ImageSpec(image["size"], image["channels"], tuple(image["mean"]), tuple(image["std"]))
            if image
            else None,
            extras=dict(state.get("extras") or {}),
        )


def special_ids(tokenizer: Any) -> dict[str, int]:
    """The tokenizer's special token ids that it has, and the decoder start id an encoder-decoder begins with."""
    ids = {name: getattr(tokenizer, f"{name}_token_id", None) for name in SPECIAL_IDS}
    return {name: i for name, i in ids.items() if i is not None} | {"decoder_start": decoder_start_token(tokenizer)}


def image_state(image: ImageSpec | None) -> dict[str, Any] | None:
    """An ImageSpec as plain data."""
    if image is None:
        return None
    return {"size": image.size, "channels": image.channels, "mean": list(image.mean), "std": list(image.std)}
