"""Pairs and texts -> the rows of the seq2seq row store, a batch at a time (source ids, labels, chunks)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tasks.seq2seq.reading import Pair

if TYPE_CHECKING:
    from datasets import Dataset

Batch = dict[str, list[Any]]
PAIR_COLUMNS = ("input_ids", "source", "target", "record", "labels")  # what a pair's row carries, in order


def pair_table(pairs: list[Pair]) -> Dataset:
    """The pairs as read: source (prefix included), target (None to predict), the record as JSON text."""
    from datasets import Dataset

    return Dataset.from_dict(
        {
            "source": [p.source for p in pairs],
            "target": [p.target for p in pairs],
            "record": [json.dumps(p.record, default=str) for p in pairs],
        }
    )


@dataclass(frozen=True)
class PairRows:
    """Tokenizes a batch of pairs: source ids and decoder labels, over-long ones truncated keeping EOS (flagged);
    a truncated source's text is what its ids decode to."""

    tokenizer: Any
    max_source_length: int
    max_target_length: int
    with_target: bool

    def __call__(self, batch: Batch) -> Batch:
        sources = self.tokenizer(batch["source"], add_special_tokens=True)["input_ids"]
        out: Batch = {"input_ids": [], "source": [], "target": batch["target"], "record": batch["record"]}
        out["source_truncated"] = [len(ids) > self.max_source_length for ids in sources]
        for text, ids in zip(batch["source"], sources, strict=True):
            kept = self._truncate(ids, self.max_source_length)
            out["input_ids"].append(kept)
            out["source"].append(
                text if len(kept) == len(ids) else self.tokenizer.decode(kept, skip_special_tokens=True)
            )
        if self.with_target:
            targets = [self._target_ids(ids) for ids in self.tokenizer(batch["target"])["input_ids"]]
            out["labels"] = [self._truncate(ids, self.max_target_length) for ids in targets]
            out["target_truncated"] = [len(ids) > self.max_target_length for ids in targets]
        return out

    def _target_ids(self, ids: list[int]) -> list[int]:
        """Decoder labels: the target's tokens without a leading BOS (the start token goes first), ending in EOS."""
        if ids and ids[0] == self.tokenizer.bos_token_id:
            ids = ids[1:]
        eos = self.tokenizer.eos_token_id
        return ids if ids and ids[-1] == eos else [*ids, eos]

    def _truncate(self, ids: list[int], limit: int) -> list[int]:
        """At most `limit` ids, keeping a final EOS."""
        if len(ids) <= limit:
            return ids
        return [*ids[: limit - 1], ids[-1]] if ids[-1] == self.tokenizer.eos_token_id else ids[:limit]


@dataclass(frozen=True)
class TextChunks:
    """Tokenizes a batch of texts (span corruption) into chunks of at most `size` ids, each text's in order."""

    tokenizer: Any
    size: int

    def __call__(self, batch: Batch) -> Batch:
        ids = self.tokenizer(batch["text"], add_special_tokens=False)["input_ids"]
        return {"input_ids": [doc[i : i + self.size] for doc in ids for i in range(0, len(doc), self.size)]}
