"""A run's own tokenizer: trained once into RUN_DIR/tokenizer, retrained when what it was trained on changes."""

from __future__ import annotations

import json
import logging
from functools import partial
from pathlib import Path
from typing import Any

from tetraformer.data.tokenizer import SPECIAL_VOCAB, TokenizerKind, train_tokenizer, training_texts
from tetraformer.data.vocab_cap import MIN_COUNT, cap_vocab_size

log = logging.getLogger(__name__)
RECORD = "trained_with.json"  # beside tokenizer.json: the settings and files it was trained with
CAPPED = "vocab_size_capped_to"  # in the record: the size the text supported, when under vocab_size (not compared)


def training_record(
    files: list[Path],
    kind: TokenizerKind,
    vocab_size: int,
    extra_ids: int = 0,
    vocab_cap: bool = True,
    chinese_chars: bool = True,
    zero_digits: bool = False,
    min_count: int = MIN_COUNT,
    **read_options: Any,
) -> dict:
    """What a tokenizer is trained from: its settings, read options and each file's path, size and mtime.

    The settings are type, vocabulary size, sentinels and the vocabulary cap; `extra_ids` is recorded only when
    there are sentinels, `vocab_cap` and `tokenize_chinese_chars` only when off, `zero_digits` only when on and the
    cap's `min_count` only when it counts (the cap on) and is not MIN_COUNT, so the records written before they
    existed still match (a run trained before the cap keeps its vocabulary on
    resume).
    """
    stats = [(str(Path(f).resolve()), Path(f).stat()) for f in files]
    return {
        "tokenizer_type": kind,
        "vocab_size": vocab_size,
        **({"extra_ids": extra_ids} if extra_ids else {}),
        **({} if vocab_cap else {"vocab_cap": False}),
        **({"vocab_min_count": min_count} if vocab_cap and min_count != MIN_COUNT else {}),
        **({} if chinese_chars else {"tokenize_chinese_chars": False}),
        **({"zero_digits": True} if zero_digits else {}),
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
    vocab_cap: bool = True,
    chinese_chars: bool = True,
    zero_digits: bool = False,
    min_count: int = MIN_COUNT,
) -> None:
    """Reuse the tokenizer in `directory` if it was trained with these settings and files, else (re)train it.

    `extra_ids` reserves that many T5 sentinels (<extra_id_0>, ...) for span corruption. With `vocab_cap`, a
    vocab_size larger than the text supports is capped (data/vocab_cap.py, one warning line) and the size it was
    capped to recorded; the same files give the same cap, and a resumed run reuses the saved tokenizer uncounted.
    `min_count` is the times the text must show a piece for the cap to count it. `chinese_chars` False keeps CJK
    ideographs inside their words (WordPiece); `zero_digits` reads digits as 0.
    """
    settings = {"chinese_chars": chinese_chars, "zero_digits": zero_digits}
    options = {"field": field, "encoding": encoding}
    record = training_record(files, kind, vocab_size, extra_ids, vocab_cap, **settings, min_count=min_count, **options)
    if (directory / "tokenizer.json").is_file():
        previous = _read_record(directory)
        if previous is None:  # written before records existed: keep it, a resumed run needs its vocabulary
            log.warning("reusing %s: it has no %s to compare this run's settings with", directory, RECORD)
            return
        previous.pop(CAPPED, None)  # what the text gave, not a setting
        keys = [*record, *(key for key in previous if key not in record)]  # a setting dropped counts too
        changed = [key for key in keys if previous.get(key) != record.get(key)]
        if not changed:
            return
        log.warning("retraining the tokenizer in %s: %s changed since it was trained", directory, ", ".join(changed))
    size = vocab_size
    if vocab_cap:
        texts = partial(training_texts, files, field, encoding)  # read afresh by each count
        size = cap_vocab_size(texts, kind, vocab_size, len(SPECIAL_VOCAB) + extra_ids, **settings, min_count=min_count)
    log.info("training a %s tokenizer (vocab %d) on %d file(s)", kind, size, len(files))
    train_tokenizer(files, kind, size, directory, field=field, encoding=encoding, extra_ids=extra_ids, **settings)
    facts = {CAPPED: size} if size < vocab_size else {}
    (directory / RECORD).write_text(json.dumps({**record, **facts}, indent=1) + "\n", encoding="utf-8")


def _read_record(directory: Path) -> dict | None:
    """The training record beside a tokenizer, or None when there is none (or it is unreadable)."""
    try:
        return json.loads((directory / RECORD).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
