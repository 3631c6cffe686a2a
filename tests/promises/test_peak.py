"""A matmul peak measured under load is not kept as truth: a run that goes faster than it re-measures and replaces
it, in a fresh process, so no later run reports an MFU above 100%. (The language model's reference run starts on a
cache holding such a peak, tests/promises/conftest.py; its killed twin, on an empty cache, ends with its weights.)"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import pytest
import torch

from tests.promises.conftest import BUSY_PEAK, Reference
from tetraformer.accel.chooser import device_machine_key
from tetraformer.training.callbacks.peak import peak_key

pytestmark = [pytest.mark.slow, pytest.mark.parametrize("task", ["language_modeling"])]  # beside its reference


def test_a_peak_a_run_exceeds_is_remeasured_and_replaced(task: str, reference: Callable[[str], Reference]) -> None:
    """A cached fp32 peak of 1e-5 TFLOP/s: the fit warns, reports MFU of at most 100%, and keeps a larger peak."""
    ref = reference(task)
    assert "above the kept matmul peak" in ref.said
    mfus = [float(m) for m in re.findall(r"MFU ([0-9.]+)% of", ref.said)]
    assert mfus and all(mfu <= 100.0 for mfu in mfus), mfus
    peaks = json.loads((ref.base / "cache-ref" / "matmul_peaks.json").read_text(encoding="utf-8"))
    assert peaks[device_machine_key()][peak_key(torch.device("cpu"), torch.float32)] > BUSY_PEAK
