"""LightningDataModule for preference tuning: {prompt, chosen, rejected} JSONL -> the chat template -> both replies'
ids with labels on the reply tokens only."""

from __future__ import annotations

import json
import logging
from dataclasses import asdict
from pathlib import Path
from typing import Any

from tetraformer.data.errors import DataError
from tetraformer.data.preference import PairedExamples, PairRows, preference_pair
from tetraformer.data.records import Record, RecordFormat
from tetraformer.data.store import ROWS, Tables, tokenize_rows
from tetraformer.data.tokenizer import TokenizerKind
from tetraformer.training.base.chat_datamodule import ChatDataModule, is_prompt

log = logging.getLogger(__name__)


class PreferenceData(ChatDataModule):
    """Preference pairs from JSONL/JSON records: `{prompt, chosen, rejected}` strings (an optional `system`), or chat
    messages (data/preference.py).

    Each reply is rendered after the prompt with the tokenizer's chat template (ChatDataModule: the init_from
    source's, or ChatML and its special tokens when it has none) and labelled on its own assistant tokens only, once,
    into a row store under `cache_dir` reused by later runs. A batch of B pairs is 2B padded rows, the chosen replies
    then the rejected ones. A side longer than `max_length` is cut (counted in a warning); a pair either reply of
    which keeps no token is dropped. Without `val_path`, a seeded `val_fraction` of the pairs is held out. The first
    `samples` validation prompts are answered at each validation. The TextDataModule options (paths, tokenizer,
    batch_size, cache_dir, num_proc, ...) pass through `**kwargs`; predict reads prompts as instruction tuning does.
    """

    store_name = "preference"
    token_columns = ("chosen_ids", "rejected_ids")
    example_columns = ("chosen_ids", "chosen_labels", "rejected_ids", "rejected_labels")

    def __init__(
        self,
        format: RecordFormat | None = None,  # noqa: A002 - None: from the suffix
        max_length: int = 256,
        samples: int = 2,
        tokenizer_type: TokenizerKind = "bpe",
        **kwargs: Any,
    ) -> None:
        super().__init__(format=format, max_length=max_length, samples=samples, tokenizer_type=tokenizer_type, **kwargs)
        self.save_hyperparameters()

    def record_texts(self, record: Record) -> list[str]:
        """A pair's roles and contents."""
        return preference_pair(record).texts()

    def row_options(self, split: str) -> dict[str, Any]:
        """What changes a split's rows besides files and tokenizer: how records are read, the template, the cut."""
        template = self.tokenizer.chat_template
        return {"format": self.format, "encoding": self.encoding, "template": template, "max_length": self.max_length}

    def build_rows(self, split: str, path: str, scratch: Path) -> Tables:
        """The split's pairs rendered into shifted ids and labels per reply (data/preference.py's PairRows)."""
        from datasets import Dataset

        pairs = [json.dumps(asdict(preference_pair(r)), ensure_ascii=False) for r in self.records(path)]
        table = Dataset.from_dict({"pair": pairs})
        rows = tokenize_rows(
            table, PairRows(self.tokenizer, self.max_length), scratch, self.num_proc, f"rendering {split}"
        )
        cut = sum(rows["cut"])
        if cut:
            log.warning("%s: cut %d of %d pairs to --data.max_length %d", split, cut, len(pairs), self.max_length)
        if len(rows) < len(pairs):
            log.warning("%s: dropped %d pairs with a reply left without tokens", split, len(pairs) - len(rows))
        if not len(rows):
            raise DataError(f"no pair keeps a token of both replies within --data.max_length {self.max_length}", path)
        return {ROWS: rows}

    def collate(self, rows: list[Any]) -> dict[str, Any]:
        """(2B, T) padded rows of the chosen then the rejected replies; predict batches are lists of prompts."""
        if is_prompt(rows[0]):
            return {"prompts": rows}
        return PairedExamples(self.tokenizer.pad_token_id or 0)(rows)
