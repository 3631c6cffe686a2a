"""Training throughput and peak memory of a language model under training variants, through `tetraformer fit`.

Each variant (activation checkpointing, compile, a precision) is the same `tetraformer fit` with extra flags, run
as a child process on the CPU. Tokens/s is the median of the train/tokens_per_s rows the Throughput callback logs,
the first interval (warm-up, compilation) left out. CPU ms per token (this script's CpuClock callback: process CPU
time of all threads over the same intervals) is the compute cost, which other load on the machine changes far less
than tokens/s; give --threads 1 on a shared machine, since idle OpenMP threads spin and that counts as CPU time.
Peak RSS is the child's maximum resident set (os.wait4), the whole process (Python, torch, data) included, so
compare variants by their difference. Variants run interleaved over --repeats rounds, so drift on a busy machine
hits each alike; the table shows medians over the rounds. The corpus is the repository's Markdown, as characters.

    python scripts/bench_training.py --size tiny --markdown
    python scripts/bench_training.py --size d256 --variants plain checkpointing compile --steps 30 --repeats 2
    python scripts/bench_training.py --size tiny --threads 1 --repeats 3     # one core per run
    python scripts/bench_training.py --size d256 --variants plain lora --steps 30 --repeats 2   # LoRA vs full
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import lightning as L
import yaml
from lightning.pytorch.callbacks import Callback

ROOT = Path(__file__).resolve().parents[1]
SIZES: dict[str, dict[str, int]] = {  # model.arch fields, then data block_size and batch_size
    "tiny": dict(d_model=64, n_heads=2, n_layers=2, d_ff=128, block_size=16, batch_size=8),
    "d256": dict(d_model=256, n_heads=4, n_layers=4, d_ff=1024, block_size=256, batch_size=16),
}
VARIANTS: dict[str, list[str]] = {
    "plain": [],
    "checkpointing": ["--model.arch.activation_checkpointing", "true"],
    "compile": ["--model.compile", "true"],
    "compile+checkpointing": ["--model.compile", "true", "--model.arch.activation_checkpointing", "true"],
    "bf16-mixed": ["--trainer.precision", "bf16-mixed"],
    "bf16-true": ["--trainer.precision", "bf16-true"],
    "bf16-mixed+compile": ["--trainer.precision", "bf16-mixed", "--model.compile", "true"],  # compiled: stock layers
    "lora": ["--model.lora.rank", "16", "--model.lora.save", "merged"],  # q, k, v, o adapters; the base frozen
}


class CpuClock(Callback):
    """Logs train/cpu_ms_per_token: this process's CPU time (every thread) per trained token, per logging interval."""

    def __init__(self) -> None:
        self.start: float | None = None
        self.tokens = 0

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: Any, batch: Any, batch_idx: int) -> None:
        """Start the CPU clock on an interval's first batch."""
        if self.start is None:
            self.start = time.process_time()

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        """Count tokens; on the rows Lightning writes, log the interval's CPU milliseconds per token."""
        self.tokens += pl_module.batch_tokens(batch)
        if trainer._logger_connector.should_update_logs and self.start is not None:
            cpu_ms = (time.process_time() - self.start) * 1000
            pl_module.log("train/cpu_ms_per_token", cpu_ms / self.tokens, on_step=True, on_epoch=False)
            self.start, self.tokens = None, 0


def write_config(work: Path, size: str, steps: int, log_every: int) -> Path:
    """A char-level GPT config of one size on the repository's Markdown, validation off."""
    corpus = work / "corpus.txt"
    corpus.write_text(
        "\n".join(p.read_text(encoding="utf-8") for p in sorted(ROOT.glob("**/*.md")) if ".venv" not in p.parts),
        encoding="utf-8",
    )
    shape = dict(SIZES[size])
    data = {"block_size": shape.pop("block_size"), "batch_size": shape.pop("batch_size")}
    config = {
        "seed_everything": 0,
        "trainer": {
            "accelerator": "cpu",
            "devices": 1,
            "max_steps": steps,
            "log_every_n_steps": log_every,
            "limit_val_batches": 0,
            "num_sanity_val_steps": 0,
            "enable_progress_bar": False,
            "enable_model_summary": False,
            "callbacks": [{"class_path": "bench_training.CpuClock"}],
        },
        "model": {
            "class_path": "tasks.language_modeling.module.LanguageModeling",
            "init_args": {
                "arch": {**shape, "max_len": data["block_size"], "position": "rotary"},
                "optim": {"lr": 1e-3, "schedule": "constant"},
                "sample_prompts": [],
            },
        },
        "data": {
            "class_path": "tasks.language_modeling.data.LanguageModelingData",
            "init_args": {"train_path": str(corpus), "tokenizer_type": "char", "documents": "line", **data},
        },
        "run": {"wandb": "disabled"},
    }
    path = work / f"{size}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def run_variant(config: Path, flags: list[str], root: Path, threads: int | None) -> tuple[float, float, float]:
    """(tokens/s, CPU ms per token: medians after the first logged interval; peak RSS in MiB) of one fit."""
    command = [
        sys.executable,
        "-m",
        "tetraformer.cli",
        "fit",
        "-c",
        str(config),
        "--trainer.default_root_dir",
        str(root),
        *flags,
    ]
    path = os.pathsep.join(filter(None, [str(ROOT / "scripts"), os.environ.get("PYTHONPATH")]))  # finds CpuClock
    log = root.with_suffix(".log")
    with log.open("w") as out:
        env = {**os.environ, "WANDB_MODE": "disabled", "PYTHONPATH": path}
        if threads:
            env["OMP_NUM_THREADS"] = str(threads)  # torch's intra-op threads
        child = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
        _, status, usage = os.wait4(child.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(command)} failed; see {log}")
    rates, cpu = _logged(root, "train/tokens_per_s"), _logged(root, "train/cpu_ms_per_token")
    return statistics.median(rates[1:] or rates), statistics.median(cpu[1:] or cpu), usage.ru_maxrss / 1024  # KiB


def _logged(root: Path, key: str) -> list[float]:
    """Every value of one metric in a run's metrics.csv files."""
    values = []
    for path in sorted(root.glob("logs/version_*/metrics.csv")):
        with path.open() as f:
            values += [float(r[key]) for r in csv.DictReader(f) if r.get(key)]
    return values


Result = tuple[float, float, float]  # tokens/s, CPU ms per token, peak RSS MiB


def bench(args: argparse.Namespace) -> dict[str, list[Result]]:
    """Each variant's results per round."""
    results: dict[str, list[Result]] = {name: [] for name in args.variants}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        config = write_config(work, args.size, args.steps, args.log_every)
        for round_ in range(args.repeats):
            for name in args.variants:
                results[name].append(run_variant(config, VARIANTS[name], work / f"{name}-{round_}", args.threads))
                rate, cpu, rss = results[name][-1]
                print(
                    f"round {round_} {name}: {rate:.0f} tokens/s, {cpu:.3f} CPU ms/token, {rss:.0f} MiB",
                    file=sys.stderr,
                    flush=True,
                )
    return results


def table(results: dict[str, list[Result]], markdown: bool) -> str:
    """Per variant: median tokens/s, CPU ms per token and peak RSS over the rounds, each against the first variant."""
    medians = {name: [statistics.median(r[i] for r in rounds) for i in range(3)] for name, rounds in results.items()}
    base = next(iter(medians.values()))
    header = ["variant", "tokens/s", "vs first", "CPU ms/token", "vs first", "peak RSS MiB", "vs first"]
    rows = [
        [
            name,
            f"{rate:.0f}",
            f"{rate / base[0]:.2f}x",
            f"{cpu:.3f}",
            f"{cpu / base[1]:.2f}x",
            f"{rss:.0f}",
            f"{rss - base[2]:+.0f} MiB",
        ]
        for name, (rate, cpu, rss) in medians.items()
    ]
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])
    return "\n".join("  ".join(f"{cell:>14}" for cell in row) for row in [header, *rows])


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Size, variants, steps and rounds."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=sorted(SIZES), default="tiny")
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    parser.add_argument("--steps", type=int, default=60, help="optimizer steps per fit")
    parser.add_argument("--log-every", type=int, default=10, help="steps per throughput interval")
    parser.add_argument("--repeats", type=int, default=1, help="interleaved rounds of all variants")
    parser.add_argument("--threads", type=int, default=None, help="torch threads per run (default: torch's)")
    parser.add_argument("--markdown", action="store_true")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    """Run the variants and print the table."""
    args = parse_args(argv)
    print(table(bench(args), args.markdown))


if __name__ == "__main__":
    main()
