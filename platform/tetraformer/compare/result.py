"""RunResult: what one run of a comparison measured, stored as OUT/<variant>/seed<k>/result.json."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tetraformer.files import atomic_write

RESULT_FILE = "result.json"


@dataclass
class RunResult:
    """One run's measurements; the report (results.csv/.md, plots) is built from a list of these."""

    variant: str
    seed: int
    run_dir: str
    status: Literal["done", "failed"]
    error: str | None = None  # the failure's last line when status is "failed"
    params: int = 0  # trainable parameters of the checkpoint's network
    flops_per_token: float = 0.0  # training FLOPs per token (core accounting: forward + backward)
    monitor: str = ""  # the task's monitored validation metric, e.g. "val/loss"
    monitor_mode: Literal["min", "max"] = "min"
    best: float | None = None  # best monitor value over the validation rows
    final: float | None = None  # monitor value at the last validation
    test: dict[str, float] = field(default_factory=dict)  # test metrics on the best checkpoint
    tokens_per_s: float | None = None  # mean of the logged train/tokens_per_s
    mfu: float | None = None  # mean of the logged train/mfu (needs run.peak_tflops)
    peak_memory_mb: float = 0.0  # CUDA max allocated on GPU, else the run process's peak RSS
    wall_s: float = 0.0  # seconds of the whole run (fit and test)
    steps: int = 0  # optimizer steps done
    tokens: int = 0  # training tokens (or images) seen
    overrides: dict[str, Any] = field(default_factory=dict)  # the variant's dotted-key overrides
    extrapolation: dict[str, float | str] | None = None  # LM val loss per length: {"1x": 1.4, "4x": "n/a"}
    evaluation: dict[str, float | None] = field(default_factory=dict)  # lm-eval scores: {"quiz/acc": 0.6}

    @property
    def done(self) -> bool:
        """Whether the run finished and measured everything."""
        return self.status == "done"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict with the schema's keys."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunResult:
        """A RunResult from a result.json dict (unknown keys ignored, so older readers keep working)."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{key: value for key, value in data.items() if key in names})


def write_result(result: RunResult, run_dir: Path) -> Path:
    """Write RUN_DIR/result.json atomically (temp file + rename), so a half-written file never says done."""
    text = json.dumps(result.to_dict(), indent=2)
    return atomic_write(run_dir / RESULT_FILE, lambda out: out.write(text.encode("utf-8")))


def read_result(run_dir: Path) -> RunResult | None:
    """RUN_DIR/result.json as a RunResult; None when the run has none or it cannot be read."""
    path = run_dir / RESULT_FILE
    if not path.is_file():
        return None
    try:
        return RunResult.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (json.JSONDecodeError, TypeError):
        return None
