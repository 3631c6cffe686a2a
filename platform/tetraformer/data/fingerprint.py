"""The fingerprint of the data a fit reads: each split's files with their size, modification time and content
checksum. Checkpoints record it, so a resume can tell whether the data is still what the checkpoint trained on.

Content decides: a file moved, copied or touched is the same data, an edit of the same size is not. A file whose
path, size and modification time are those recorded keeps its recorded checksum without being read, so a resume
on unchanged files reads nothing; the first fit reads each file once (data/store_integrity.py: ~0.3 s per GB).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tetraformer.data.files import file_identities
from tetraformer.data.store_integrity import file_checksum

Fingerprint = dict[str, list[list[Any]]]  # split -> [[path, size, mtime_ns, checksum], ...] in reading order
SPLIT_NAMES = {"train": "training", "val": "validation"}


def data_fingerprint(splits: Mapping[str, Sequence[Path]], known: Fingerprint | None = None) -> Fingerprint:
    """Each split's files (a folder's, recursively) with their content checksum, taken from `known` where a file's
    path, size and modification time are the same."""
    memo = {tuple(entry[:3]): entry[3] for entries in (known or {}).values() for entry in entries}
    found: Fingerprint = {}
    for split, paths in splits.items():
        found[split] = []
        for identity in file_identities(paths):
            checksum = memo.get(tuple(identity)) or file_checksum(Path(str(identity[0])))
            memo[tuple(identity)] = checksum
            found[split].append([*identity, checksum])
    return found


def data_change(recorded: Fingerprint, current: Fingerprint) -> str | None:
    """How the data's content differs from the recorded (the first difference, in words), or None when it is the
    same content (wherever its files now are)."""
    for split in [*recorded, *(s for s in current if s not in recorded)]:
        name = SPLIT_NAMES.get(split, split)
        before, now = recorded.get(split), current.get(split)
        if before is None or now is None:
            return f"the {name} data is {'read now but was not' if before is None else 'not read now but was'}"
        for old, new in zip(before, now, strict=False):
            if old[3] != new[3]:
                where = new[0] if old[0] == new[0] else f"{new[0]} (where {old[0]} was)"
                return f"the {name} file {where} differs in content"
        if len(before) != len(now):
            return f"the {name} data has {len(now)} file(s), it had {len(before)}"
    return None
