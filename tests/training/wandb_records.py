"""Read the history rows of an offline W&B run file (a LevelDB-style log of protobuf records)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

from wandb.proto import wandb_internal_pb2

HEADER, BLOCK, RECORD_HEADER = 7, 32768, 7  # ":W&B" + magic + version; log block size; crc + length + type
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def _payloads(data: bytes) -> list[bytes]:
    """Reassemble the record payloads of the log."""
    payloads, pos, pending = [], HEADER, b""
    while pos + RECORD_HEADER <= len(data):
        if BLOCK - pos % BLOCK < RECORD_HEADER:  # block trailer too small for a header: skip to the next block
            pos += BLOCK - pos % BLOCK
            continue
        length, kind = struct.unpack("<HB", data[pos + 4 : pos + RECORD_HEADER])
        chunk = data[pos + RECORD_HEADER : pos + RECORD_HEADER + length]
        pos += RECORD_HEADER + length
        if kind in (FULL, LAST):
            payloads.append(pending + chunk)
            pending = b""
        elif kind in (FIRST, MIDDLE):
            pending += chunk
    return payloads


def history_rows(run_file: Path) -> list[dict]:
    """Every logged history row of a .wandb file as {key: value}."""
    rows = []
    for payload in _payloads(run_file.read_bytes()):
        record = wandb_internal_pb2.Record()
        record.ParseFromString(payload)
        if record.WhichOneof("record_type") == "history":
            rows.append(
                {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item}
            )
    return rows


def summary_items(run_file: Path) -> dict:
    """The run summary a .wandb file ends with: every summary update's {key: value}, later ones winning."""
    summary: dict = {}
    for payload in _payloads(run_file.read_bytes()):
        record = wandb_internal_pb2.Record()
        record.ParseFromString(payload)
        if record.WhichOneof("record_type") == "summary":
            for item in record.summary.update:
                summary[item.key or "/".join(item.nested_key)] = json.loads(item.value_json)
    return summary
