"""EntityScore: seqeval's entity-level precision, recall or F1 over a whole epoch, under DDP too.

Token accuracy counts words; entity scores count spans: a predicted entity is right only when its type and
both boundaries match a true one. The metric keeps every sentence's word-level label ids (list states, gathered
with `cat` across processes) and hands the epoch's tag sequences to seqeval once, at compute time.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import torch
from seqeval.metrics import classification_report, f1_score, precision_score, recall_score
from seqeval.scheme import IOB1, IOB2, IOBES, Token
from torch import Tensor
from torchmetrics import Metric
from torchmetrics.utilities import dim_zero_cat

from tetraformer.data.collate import IGNORE_INDEX
from tetraformer.data.tag_schemes import check_scheme, tag_problem

SCORES = {"precision": precision_score, "recall": recall_score, "f1": f1_score}
# seqeval's strict-mode scheme classes; IO has none: its tags cannot break the scheme (every O / I-X sequence
# is valid and its entities are the runs of one type), so strict IO scores as the default mode does.
STRICT_SCHEMES: dict[str, type[Token] | None] = {"IOB1": IOB1, "IOB2": IOB2, "BIOES": IOBES, "IO": None}
REPORT_COLUMNS = ["type", "precision", "recall", "f1", "support"]
AVERAGES = ("micro avg", "macro avg")  # the rows after the per-type rows


class EntityScore(Metric):
    """Micro precision, recall or F1 over entities (seqeval), from word-level label ids.

    `labels` names the ids (tags of `scheme`). Default mode reads entities leniently, as conlleval does (an
    I-X after O starts an entity); `strict=True` uses seqeval's strict mode, where only entities well formed
    in the scheme count (IOB2's I-X after O is no entity at all). See STRICT_SCHEMES for IO.
    """

    is_differentiable = False
    higher_is_better = True
    full_state_update = False
    preds: list[Tensor]
    targets: list[Tensor]
    lengths: list[Tensor]

    def __init__(
        self, labels: Sequence[str], scheme: str = "IOB2", strict: bool = False, score: str = "f1", **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        check_scheme(scheme)
        if score not in SCORES:
            raise ValueError(f"unknown score {score!r}; expected one of {', '.join(SCORES)}")
        problems = [p for p in (tag_problem(label, scheme) for label in labels) if p is not None]
        if problems:
            raise ValueError(problems[0])
        self.labels, self.scheme, self.strict, self.score = list(labels), scheme, strict, score
        self.add_state("preds", default=[], dist_reduce_fx="cat")  # flat word-level ids of every sentence
        self.add_state("targets", default=[], dist_reduce_fx="cat")
        self.add_state("lengths", default=[], dist_reduce_fx="cat")  # words per sentence, in order

    def update(self, preds: Tensor, targets: Tensor) -> None:
        """Add sentences: (B, W) predicted and true label ids, IGNORE_INDEX (-100) where a row has no word.

        Each row's positions whose target is not IGNORE_INDEX, in order, are one sentence. `preds` may also be
        (B, W, L) scores, read by argmax.
        """
        if preds.dim() == targets.dim() + 1:
            preds = preds.argmax(-1)  # (B, W)
        if preds.shape != targets.shape:
            raise ValueError(f"preds {tuple(preds.shape)} and targets {tuple(targets.shape)} differ in shape")
        words = targets != IGNORE_INDEX  # (B, W)
        kept = preds[words]  # (N,) row by row, in order
        if bool(((kept < 0) | (kept >= len(self.labels))).any()):
            raise ValueError(f"a predicted label id at a word is outside 0..{len(self.labels) - 1}")
        self.preds.append(kept.long())
        self.targets.append(targets[words].long())
        self.lengths.append(words.sum(dim=1).long())  # (B,)

    def compute(self) -> Tensor:
        """The micro-averaged score over every entity of every sentence seen (0 when undefined)."""
        y_true, y_pred = self._tag_sequences()
        if not y_true:
            return torch.tensor(0.0, device=self.device)
        value = SCORES[self.score](y_true, y_pred, average="micro", zero_division=0, **self._mode())
        return torch.tensor(float(value), device=self.device)

    def report_rows(self) -> list[list[Any]]:
        """[type, precision, recall, f1, support] per entity type (sorted), then "micro avg" and "macro avg".

        Computed from the states of every process (a collective under DDP: call it on every rank), with the
        metric's mode and scheme; REPORT_COLUMNS names the columns.
        """
        with self.sync_context(
            dist_sync_fn=self.dist_sync_fn,
            should_sync=self._to_sync and not self._is_synced,
            should_unsync=self._should_unsync,
        ):
            y_true, y_pred = self._tag_sequences()
        if not y_true:
            return [[name, 0.0, 0.0, 0.0, 0] for name in AVERAGES]
        with warnings.catch_warnings():  # no entity at all: seqeval averages an empty array (NaN, warned)
            warnings.simplefilter("ignore", RuntimeWarning)
            report = classification_report(y_true, y_pred, output_dict=True, zero_division=0, **self._mode())
        types = sorted(name for name in report if not name.endswith(" avg"))
        return [
            [
                name,
                *(_zero_if_nan(report[name][k]) for k in ("precision", "recall", "f1-score")),
                int(report[name]["support"]),
            ]
            for name in [*types, *AVERAGES]
        ]

    def _tag_sequences(self) -> tuple[list[list[str]], list[list[str]]]:
        """The true and predicted tag sequences of every sentence, from the (possibly gathered) states."""
        lengths, *flat = (_ids(state) for state in (self.lengths, self.targets, self.preds))
        sequences: tuple[list[list[str]], list[list[str]]] = ([], [])
        for ids, out in zip(flat, sequences, strict=True):
            start = 0
            for n in lengths:
                out.append([self.labels[i] for i in ids[start : start + n]])
                start += n
        return sequences

    def _mode(self) -> dict[str, Any]:
        """seqeval's mode and scheme arguments for this metric's settings."""
        strict_scheme = STRICT_SCHEMES[self.scheme] if self.strict else None
        return {"mode": "strict", "scheme": strict_scheme} if strict_scheme is not None else {}


def _ids(state: list[Tensor] | Tensor) -> list[int]:
    """A list state (local: a list of tensors; gathered: one tensor) as a flat list of ids."""
    if isinstance(state, list) and not state:
        return []
    return dim_zero_cat(state).long().tolist()  # a rank without data gathers as float: back to ids


def _zero_if_nan(value: float) -> float:
    """A report ratio as a float, 0 where seqeval left it undefined (NaN)."""
    value = float(value)
    return 0.0 if math.isnan(value) else value
