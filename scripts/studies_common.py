"""What the studies that run `tetraformer` in child processes share (hf_side_by_side.py, pretraining_curve.py,
cross_validate_ner.py): an environment that imports the platform and the tasks from this checkout. A library for
scripts/, never run itself; one of its users:

    python scripts/hf_side_by_side.py --families bert --size smoke --seeds 1
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def checkout_pythonpath() -> str:
    """PYTHONPATH for a child process that imports the platform and the tasks from this checkout."""
    return os.pathsep.join(filter(None, [str(ROOT / "platform"), str(ROOT), os.environ.get("PYTHONPATH")]))


def child_env() -> dict[str, str]:
    """One thread per run, W&B off, the platform and tasks of this checkout importable."""
    threads = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    return {**os.environ, "PYTHONPATH": checkout_pythonpath(), **threads, "WANDB_MODE": "disabled"}
