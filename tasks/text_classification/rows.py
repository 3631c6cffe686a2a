"""Labelled records -> classification rows, a batch at a time: what the task's row store holds."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tetraformer.data import DataError
from tetraformer.data.records import LINE_COLUMN, SOURCE_COLUMN

Batch = dict[str, list[Any]]  # a column per field, as `datasets.map` hands batches


@dataclass(frozen=True)
class ClassificationRows:
    """Tokenizes a batch of records: ids and segment ids (truncated to max_length, flagged), the label as read
    (JSON text, encoded by the run's vocabulary when the data is set up) or, to predict, the record (JSON text),
    and each row's file and line."""

    tokenizer: Any
    text_field: str
    pair_field: str | None
    label_field: str
    multi_label: bool
    label_separator: str | None
    max_length: int
    predict: bool

    def __call__(self, batch: Batch) -> Batch:
        where = list(zip(batch[SOURCE_COLUMN], batch[LINE_COLUMN], strict=True))
        fields = [self.text_field] + ([self.pair_field] if self.pair_field else [])
        texts = [[_text(batch, field, i, at) for i, at in enumerate(where)] for field in fields]
        out = self.encode(texts[0], texts[1] if self.pair_field else None)
        if self.predict:
            kept = [k for k in batch if k not in (SOURCE_COLUMN, LINE_COLUMN)]
            out["record"] = [_json({k: batch[k][i] for k in kept}) for i in range(len(where))]
        else:
            out["label"] = [
                _json(self.parse_label(v, at)) for v, at in zip(batch[self.label_field], where, strict=True)
            ]
        out[SOURCE_COLUMN], out[LINE_COLUMN] = batch[SOURCE_COLUMN], batch[LINE_COLUMN]
        return out

    def encode(self, texts: list[str], pairs: list[str] | None) -> Batch:
        """Token ids and segment ids through the tokenizer's own template; `truncated` marks rows cut to max_length."""
        full = self.tokenizer(texts, pairs, add_special_tokens=True)["input_ids"]
        long = [len(ids) > self.max_length for ids in full]
        out = self.tokenizer(texts, pairs, truncation=any(long), max_length=self.max_length if any(long) else None)
        # segment ids from the tokenizer's own template (its type ids), whether or not it returns them itself
        types = [e.type_ids for e in out.encodings] if out.encodings else out.get("token_type_ids")
        types = types or [[0] * len(ids) for ids in out["input_ids"]]
        return {"input_ids": out["input_ids"], "token_type_ids": types, "truncated": long}

    def parse_label(self, value: Any, where: tuple[str, int]) -> Any:
        """A label as read, or for multi-label data a list (a JSON list, a delimited string or one label)."""
        if not self.multi_label or isinstance(value, list):
            return value
        text = str(value).strip()
        if self.label_separator:
            return [part.strip() for part in text.split(self.label_separator) if part.strip()]
        if text.startswith("["):
            try:
                return json.loads(text)
            except json.JSONDecodeError as err:
                raise DataError(f"labels are not a valid JSON list: {err.msg}", *where) from None
        return [text] if text else []


def _text(batch: Batch, field: str, row: int, where: tuple[str, int]) -> str:
    """A record's non-empty text field; a missing field or an empty text is a DataError at the row."""
    if field not in batch or batch[field][row] is None:
        keys = ", ".join(repr(k) for k in batch if k not in (SOURCE_COLUMN, LINE_COLUMN))
        raise DataError(f"missing field {field!r} (keys present: {keys})", *where)
    text = str(batch[field][row])
    if not text.strip():
        raise DataError(f"empty text in field {field!r}", *where)
    return text


def _json(value: Any) -> str:
    """A value as JSON text (what Arrow keeps of labels and records of any shape)."""
    return json.dumps(value, default=str)
