"""Training throughput of every task end to end (`tetraformer fit`) against its bare model step, on the demo data.

Per task, a shipped config (model shape overridden to a small one unless --shape config) runs in this process
through the CLI's own path (`tetraformer fit`'s build_cli: the task's datamodule and module, the platform's callbacks
and loggers, CSV on, W&B disabled unless --wandb offline), validation off. A StepClock callback (handed to the
Trainer as an object through the CLI's trainer defaults, so no class path has to be importable) stamps the start of
every training batch and keeps a copy of the timed batches; the loop's time is the wall time from the first
timed batch's start to the start of the batch after the last one (data loading, callbacks and logging included).
The bare step then runs the same module's `compute(batch, "train")["loss"]` + backward + its AdamW step on those
very batches, held in memory, no Lightning. Rounds alternate which side goes first; the table shows medians over
rounds: items/s of each side and overhead = loop time / bare time - 1 (median of the per-round ratios), of wall time
and of CPU time (this process's threads: steadier than wall time when other work shares the machine).

    python scripts/bench.py --tasks                                   # every task, ~5 minutes on 2 cores
    python scripts/bench_tasks.py --tasks seq2seq masked_lm --steps 30 --rounds 5 --markdown
    python scripts/bench_tasks.py --shape config                      # the configs' own model shapes
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lightning as L
import torch
import yaml
from bench_common import format_rows, machine
from lightning.pytorch.callbacks import Callback

ROOT = Path(__file__).resolve().parents[1]
TASKS: dict[str, str] = {  # task -> its shipped config
    "text_classification": "configs/text_classification/reuters_r8.yaml",
    "token_classification": "configs/token_classification/ner_ja.yaml",
    "masked_lm": "configs/masked_lm/reuters_r8_pretrain.yaml",
    "language_modeling": "configs/language_modeling/shakespeare_char.yaml",
    "seq2seq": "configs/seq2seq/de_en_t5.yaml",
    "image_classification": "configs/image_classification/fashion_mnist.yaml",
}
SMALL = {
    "d_model": 128,
    "n_heads": 4,
    "n_layers": 2,
    "d_ff": 512,
}  # --shape small (seq2seq: 2 decoder layers too)


class StepClock(Callback):
    """Stamps each training batch's start and keeps copies of the batches of the timed window."""

    def __init__(self, warmup: int = 3, steps: int = 20) -> None:
        self.warmup, self.steps = warmup, steps
        self.starts: list[tuple[float, float]] = []  # (wall, process CPU) seconds
        self.batches: list[Any] = []
        self.module: Any = None

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: Any, batch: Any, batch_idx: int) -> None:
        """Stamp the time; keep the batch when it is one of the timed ones."""
        self.starts.append(clocks())
        self.module = pl_module
        if self.warmup <= len(self.starts) - 1 < self.warmup + self.steps:
            self.batches.append(clone(batch))

    def loop_seconds(self) -> tuple[float, float]:
        """Wall and CPU time from the first timed batch's start to the start of the one after the last."""
        (wall0, cpu0), (wall1, cpu1) = self.starts[self.warmup], self.starts[self.warmup + self.steps]
        return wall1 - wall0, cpu1 - cpu0


def clocks() -> tuple[float, float]:
    """(wall, CPU time of this process's threads) in seconds: CPU time hardly moves with other load on the machine."""
    return time.perf_counter(), time.process_time()


def clone(batch: Any) -> Any:
    """A copy of a batch's tensors (dicts, lists and other values kept as they are)."""
    if isinstance(batch, torch.Tensor):
        return batch.detach().clone()
    if isinstance(batch, dict):
        return {k: clone(v) for k, v in batch.items()}
    return batch


@dataclass
class TaskResult:
    """One task's medians over rounds."""

    task: str
    unit: str  # tokens or images
    items: int  # per timed window
    steps: int
    rounds: int
    loop_s: float  # median seconds of the timed window under Lightning
    bare_s: float  # median seconds of the same batches as bare steps
    overhead: float  # median over rounds of loop time / bare time - 1
    cpu_overhead: float  # the same of CPU times (this process, all threads)

    @property
    def loop_rate(self) -> float:
        """Items per second under `fit`."""
        return self.items / self.loop_s

    @property
    def bare_rate(self) -> float:
        """Items per second of the bare steps."""
        return self.items / self.bare_s


def batch_items(module: Any, batch: Any) -> tuple[int, str]:
    """(count, unit) of a batch: images for image batches, else the task's tokens."""
    if isinstance(batch, dict) and "pixels" in batch:
        return int(batch["pixels"].shape[0]), "images"
    return int(module.batch_tokens(batch)), "tokens"


def fit_config(task: str, work: Path, args: argparse.Namespace) -> Path:
    """The task's shipped config, validation off, a fixed step budget and the (small) shape."""
    config = yaml.safe_load((ROOT / TASKS[task]).read_text())
    trainer = config.setdefault("trainer", {})
    for key in ("max_time", "val_check_interval", "check_val_every_n_epoch", "limit_val_batches"):
        trainer.pop(key, None)
    trainer.update(
        default_root_dir=str(work / task),
        max_steps=args.warmup + args.steps + 1,
        max_epochs=-1,
        limit_val_batches=0,
        num_sanity_val_steps=0,
        enable_model_summary=False,
        precision=args.precision,
        log_every_n_steps=args.log_every,
        callbacks=[],  # the config's own callbacks off; run_fit adds the StepClock
    )
    arch = config["model"]["init_args"].setdefault("arch", {})
    if args.shape == "small":
        arch.update(SMALL, **({"n_decoder_layers": SMALL["n_layers"]} if "n_decoder_layers" in arch else {}))
    config.setdefault("run", {})["wandb"] = args.wandb
    path = work / f"{task}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def run_fit(config: Path, extra: list[str], args: argparse.Namespace) -> StepClock:
    """`tetraformer fit -c CONFIG EXTRA...` in this process with a new StepClock among its callbacks; that clock."""
    from tetraformer.cli.app import finish_wandb
    from tetraformer.cli.lightning_cli import build_cli
    from tetraformer.errors import TetraformerError

    clock = StepClock(args.warmup, args.steps)
    argv = ["fit", "-c", str(config), *extra]
    try:
        with contextlib.redirect_stderr(io.StringIO()) if args.quiet else contextlib.nullcontext():
            cli = build_cli(argv, "tetraformer fit", args=argv, trainer_defaults={"callbacks": [clock]})
    except TetraformerError as err:  # the CLI's one-line mistakes (e.g. demo data not prepared) end the bench
        raise SystemExit(f"{config}: fit failed: {err}") from None
    finish_wandb(cli.trainer)  # an offline W&B run complete before the next fit starts one
    if len(clock.starts) <= clock.warmup + clock.steps:
        raise RuntimeError(f"{config}: the fit ran fewer than warm-up + steps + 1 batches")
    return clock


def bare_seconds(module: Any, batches: list[Any]) -> tuple[float, float]:
    """Wall and CPU seconds of `compute` + backward + the module's AdamW step over the batches (after a warm-up)."""
    from tetraformer.training.base.optim import build_optimizer

    module.train()
    optimizer, _ = build_optimizer(module.net, module.optim, 1000, module.net.cfg.d_model)

    def step(batch: Any) -> None:
        optimizer.zero_grad(set_to_none=True)
        module.compute(batch, "train")["loss"].backward()
        optimizer.step()

    step(batches[0])
    wall, cpu = clocks()
    for batch in batches:
        step(batch)
    return time.perf_counter() - wall, time.process_time() - cpu


def bench_task(task: str, args: argparse.Namespace, work: Path, extra: Sequence[str] = ()) -> TaskResult:
    """Interleaved rounds of the fit and the bare steps of one task; medians over rounds."""
    config = fit_config(task, work, args)
    loops: list[tuple[float, float]] = []  # (wall, CPU) seconds per round
    bares: list[tuple[float, float]] = []
    clock: StepClock | None = None
    for r in range(args.rounds):
        if r % 2 == 1 and clock is not None:  # odd rounds: the bare steps (of the last fit's batches) first
            bares.append(bare_seconds(clock.module, clock.batches))
        clock = run_fit(config, list(extra), args)
        loops.append(clock.loop_seconds())
        if r % 2 == 0:
            bares.append(bare_seconds(clock.module, clock.batches))
        print(
            f"  {task} round {r}: loop {loops[-1][0]:.2f} s, bare {bares[-1][0]:.2f} s",
            file=sys.stderr,
            flush=True,
        )
    counts = [batch_items(clock.module, b) for b in clock.batches]
    overheads = [[a[i] / b[i] - 1 for a, b in zip(loops, bares, strict=True)] for i in (0, 1)]
    return TaskResult(
        task,
        counts[0][1],
        sum(n for n, _ in counts),
        args.steps,
        len(loops),
        statistics.median(a for a, _ in loops),
        statistics.median(b for b, _ in bares),
        statistics.median(overheads[0]),
        statistics.median(overheads[1]),
    )


def format_table(results: list[TaskResult], markdown: bool) -> str:
    """One row per task: items/s under fit and bare, and the overhead."""
    header = ["task", "unit", "loop items/s", "bare items/s", "overhead", "CPU overhead", "steps x rounds"]
    rows = [
        [
            r.task,
            r.unit,
            f"{r.loop_rate:,.0f}",
            f"{r.bare_rate:,.0f}",
            f"{r.overhead:+.1%}",
            f"{r.cpu_overhead:+.1%}",
            f"{r.steps} x {r.rounds}",
        ]
        for r in results
    ]
    return format_rows([header, *rows], markdown)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Tasks, steps, rounds and the fit's settings."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", nargs="*", choices=list(TASKS), default=None, help="default: every task")
    p.add_argument("--steps", type=int, default=30, help="timed steps per round")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps at the start of each fit")
    p.add_argument("--rounds", type=int, default=3, help="interleaved fit/bare rounds; medians are reported")
    p.add_argument("--shape", choices=["small", "config"], default="small", help=f"small: {SMALL}")
    p.add_argument("--precision", default="32-true", help="the fits' --trainer.precision")
    p.add_argument("--log-every", type=int, default=10, help="the fits' --trainer.log_every_n_steps")
    p.add_argument("--wandb", choices=["disabled", "offline"], default="disabled")
    p.add_argument("--threads", type=int, default=1, help="torch threads (1: steady on a shared machine; 0: torch's)")
    p.add_argument("--fit-args", nargs="+", default=[], metavar="ARG", help="more `tetraformer fit` arguments")
    p.add_argument("--markdown", action="store_true", help="print a markdown table")
    p.add_argument("--verbose", dest="quiet", action="store_false", help="show the fits' progress output")
    args = p.parse_args(argv)
    args.tasks = args.tasks or list(TASKS)
    return args


def main(argv: list[str] | None = None) -> list[TaskResult]:
    """Benchmark the tasks from the repository root and print the table."""
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    os.chdir(ROOT)  # the configs name their data relative to the repository
    print(machine(torch.device("cpu")), flush=True)
    print(
        f"{args.warmup} warm-up + {args.steps} timed "
        f"steps per fit, {args.rounds} rounds; shape {args.shape}; {args.precision}",
        flush=True,
    )
    with tempfile.TemporaryDirectory() as tmp:
        results = [bench_task(task, args, Path(tmp), args.fit_args) for task in args.tasks]
    print(format_table(results, args.markdown))
    return results


if __name__ == "__main__":
    main()
