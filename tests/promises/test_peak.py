"""A matmul peak measured under load is not kept as truth: a run that goes faster than it re-measures and replaces
it, in a fresh process, so no later run reports an MFU above 100%."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from tests.processes import tetraformer, write_yaml
from tests.promises.tasks import tiny_task_config
from tetraformer.accel.chooser import device_machine_key
from tetraformer.training.callbacks.peak import peak_key

BUSY_PEAK = 1e7  # FLOP/s: what a measurement taken while the machine was busy might keep (far below any real rate)


@pytest.mark.slow
def test_a_peak_a_run_exceeds_is_remeasured_and_replaced(tmp_path: Path) -> None:
    """A cached fp32 peak of 1e-5 TFLOP/s: the fit warns, reports MFU of at most 100%, and keeps a larger peak."""
    cache = tmp_path / "cache"
    cache.mkdir()
    key = peak_key(torch.device("cpu"), torch.float32)
    machine = device_machine_key()  # the fit's own key: one torch thread here as there (OMP_NUM_THREADS=1)
    (cache / "matmul_peaks.json").write_text(json.dumps({machine: {key: BUSY_PEAK}}), encoding="utf-8")
    config = tiny_task_config("language_modeling", tmp_path / "data", tmp_path / "run", run={"peak_tflops": "auto"})
    done = tetraformer("fit", "-c", write_yaml(tmp_path / "fit.yaml", config), cache_dir=cache)
    assert "above the kept matmul peak" in done.stderr
    mfus = [float(m) for m in re.findall(r"MFU ([0-9.]+)% of", done.stderr)]
    assert mfus and all(mfu <= 100.0 for mfu in mfus), mfus
    kept = json.loads((cache / "matmul_peaks.json").read_text(encoding="utf-8"))[machine][key]
    assert kept > BUSY_PEAK
