"""Which modules a fresh interpreter has loaded after running some code: the start-up tests' one probe."""

from __future__ import annotations

import subprocess
import sys

# what `import tetraformer.cli` leaves for the command to load (Lightning and torch: a fit or a checkpoint needs them)
HEAVY = ("torch", "lightning", "jsonargparse", "transformers", "datasets", "wandb", "matplotlib", "tetraformer.interop")
# what `generate` never needs: data reading, Hugging Face import/export, W&B, lm-eval (`evaluate` imports it to run)
NOT_FOR_GENERATE = ("datasets", "pandas", "pyarrow", "wandb", "tetraformer.interop", "lm_eval")


def loaded_after(code: str, names: tuple[str, ...]) -> list[str]:
    """The `names` that are in sys.modules of a fresh interpreter (this one's environment) after `code` ran."""
    probe = f"{code}\nimport sys\nprint('loaded:' + ','.join(n for n in {names!r} if n in sys.modules))"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-2000:]
    line = next(x for x in result.stdout.splitlines() if x.startswith("loaded:"))
    return [name for name in line.removeprefix("loaded:").split(",") if name]
