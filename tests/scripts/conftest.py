"""The scripts under test import as `python scripts/NAME.py` finds them: scripts/ is on sys.path, once, here (the
test files name no path of their own)."""

from __future__ import annotations

import sys
from pathlib import Path

SCRIPTS = str(Path(__file__).resolve().parents[2] / "scripts")
if SCRIPTS not in sys.path:
    sys.path.insert(0, SCRIPTS)  # before the test modules here are imported; spawned children inherit it
