"""A run's own tokenizer: trained once into RUN_DIR/tokenizer, retrained when what it was trained on changes."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from tetraformer.data.tokenizer import TokenizerKind, train_tokenizer

log = logging.getLogger(__name__)
RECORD = "trained_with.json"  # beside tokenizer.json: the settings and files it was trained with


def training_record(
    files: list[Path], kind: TokenizerKind, vocab_size: int, extra_ids: int = 0, **read_options: Any
) -> dict:
    """What a tokenizer is trained from: its settings, read options and each file's path, size and mtime.

    The settings are type, vocabulary size and sentinels; `extra_ids` is recorded only when there are
    sentinels, so the records written before it existed still match.
    """
    stats = [(str(Path(f).resolve()), Path(f).stat()) for f in files]
    return {
        "tokenizer_type": kind,
        "vocab_size": vocab_size,
        **({"extra_ids": extra_ids} if extra_ids else {}),
        **read_options,
        "files": [[path, stat.st_size, stat.st_mtime_ns] for path, stat in stats],
    }


def prepare_run_tokenizer(
    directory: Path,
    files: list[Path],
    kind: TokenizerKind,
    vocab_size: int,
    field: str,
    encoding: str,
    extra_ids: int = 0,
) -> None:
    """Reuse the tokenizer in `directory` if it was trained with these settings and files, else (re)train it.

    `extra_ids` reserves that many T5 sentinels (<extra_id_0>, ...) for span corruption.
    """
    record = training_record(files, kind, vocab_size, extra_ids, field=field, encoding=encoding)
    if (directory / "tokenizer.json").is_file():
        previous = _read_record(directory)
        if previous is None:  # written before records existed: keep it, a resumed run needs its vocabulary
            log.warning("reusing %s: it has no %s to compare this run's settings with", directory, RECORD)
            return
        keys = [*record, *(key for key in previous if key not in record)]  # a setting dropped counts too
        changed = [key for key in keys if previous.get(key) != record.get(key)]
        if not changed:
            return
        log.warning("retraining the tokenizer in %s: %s changed since it was trained", directory, ", ".join(changed))
    log.info("training a %s tokenizer (vocab %d) on %d file(s)", kind, vocab_size, len(files))
    train_tokenizer(files, kind, vocab_size, directory, field=field, encoding=encoding, extra_ids=extra_ids)
    (directory / RECORD).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


def _read_record(directory: Path) -> dict | None:
    """The training record beside a tokenizer, or None when there is none (or it is unreadable)."""
    try:
        return json.loads((directory / RECORD).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
