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
    return loaded_after_each([code], names)[0]


def loaded_after_each(steps: list[str], names: tuple[str, ...]) -> list[list[str]]:
    """The `names` in sys.modules of one fresh interpreter after each of `steps` ran, in order (one interpreter's
    imports, ~6 s of CPU, for several looks)."""
    look = f"import sys\nprint('loaded:' + ','.join(n for n in {names!r} if n in sys.modules))"
    probe = "\n".join(f"{step}\n{look}" for step in steps)
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = [x.removeprefix("loaded:") for x in result.stdout.splitlines() if x.startswith("loaded:")]
    return [[name for name in line.split(",") if name] for line in lines]
