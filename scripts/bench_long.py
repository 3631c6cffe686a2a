"""Long sequences: training throughput and peak memory of core models against HF, and attention's O(T^2) cost.

Table A (models): per family (bert, gpt, t5, vit) and sequence length T (default 1024, 2048, 4096), the
bench_common model pairs (d_model 256, 4 layers, 4 heads) with positions covering T, trained by forward + backward +
fused AdamW steps at about --tokens tokens per step (batch = tokens // T, at least 1), under bf16 autocast by
default (--dtypes fp32 bf16 for both). Ours runs accel's measured attention kernels (bench_common.layouts), HF
attn_implementation="sdpa". T5: sources of T tokens and targets of T/4 (--t5-target full: T); its tokens count
both. ViT: square images in 4x4 patches, side 4 * round(sqrt(T)), so T is the patch count (1024, 2025, 4096;
plus the class token).

Table B (attention): one attention call, (B, H, Dh) = (1, 4, 64) without a mask, at T = 512 ... 8192, forward +
backward time and peak memory of the quadratic kernels, SDPA held to MATH and accel's "eager" batched matmuls,
against the flash path (SDPA's own pick on a CPU, which is its flash kernel; FLASH on CUDA, SDPA's own pick where
FLASH cannot take the dtype), in fp32 and bf16. A cell whose estimated memory passes half the free memory is
skipped.

Method: every cell runs in a fresh spawned process, so cells share no allocator state or caches in memory.
Memory: one process per side (family, T, dtype) builds the pair, keeps that side, takes a baseline (VmRSS on a
CPU, allocated bytes on CUDA), runs --warmup untimed steps (they also measure ours' kernels and layouts, cached
on disk), resets the high-water mark (/proc/self/clear_refs, or torch.cuda.reset_peak_memory_stats) and runs one
more step; peak = high-water mark (VmHWM, or max_memory_allocated) - baseline, so it counts optimizer state,
gradients, activations and workspace, not the weights. Speed: one more process holds both sides and times them
as scripts/bench.py does, --rounds interleaved rounds of --steps steps (alternating who goes first); rates from
median step times, and the ratio is the median over rounds of HF's step time over ours (> 1: ours is faster).
Attention cells take their baseline after the warm-up call, with glibc unmapping every buffer from 256 KiB when
freed (MALLOC_MMAP_THRESHOLD_), so a call's peak is its own; times are medians of --calls calls.

    python scripts/bench_long.py --threads 2 --markdown
    python scripts/bench.py --long --tables attention --attn-lengths 512 1024 --attn-dtypes fp32
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import math
import os
import statistics
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import TypeVar

import torch
from bench_common import (
    Pair,
    bench,
    bert_pair,
    format_rows,
    gpt_pair,
    layouts,
    machine,
    make_step,
    t5_pair,
    time_steps,
    to_device,
    vit_pair,
)

from tetraformer.training.callbacks.peak import synchronize

FAMILIES = ("bert", "gpt", "t5", "vit")
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
KERNELS = ("math", "eager", "flash")
ATTENTION = dict(batch=1, heads=4, head_dim=64)
PATCH = 4
GiB, MiB = 2**30, 2**20
MMAP_THRESHOLD = 256 * 1024  # attention cells: glibc maps buffers from this size and unmaps them when freed


# --- memory ----------------------------------------------------------------------------------------


def proc_status(field: str) -> int:
    """A /proc/self/status memory field (VmRSS, VmHWM) in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    raise KeyError(field)


def memory_now(device: torch.device) -> int:
    """Bytes in use now: CUDA's allocated bytes, else this process's resident set."""
    if device.type == "cuda":
        return torch.cuda.memory_allocated(device)
    gc.collect()
    return proc_status("VmRSS")


def reset_peak(device: torch.device) -> bool:
    """Restart the high-water mark from the present use; False where the kernel does not allow it."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        return True
    try:
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to VmRSS (Linux >= 4.0)
    except OSError:
        return False
    return True


def memory_peak(device: torch.device) -> int:
    """The high-water mark of bytes in use since the last reset (or since the process started)."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device)
    return proc_status("VmHWM")


def free_bytes(device: torch.device) -> int:
    """Bytes free on the device: CUDA's free memory, else the host's MemAvailable."""
    from tetraformer.accel.attention_kernels import free_memory

    return free_memory(device)


Result = TypeVar("Result")


@dataclass
class Measured:
    """One cell's median seconds per step and its peak memory over the baseline."""

    seconds: float
    peak: int  # bytes
    reset: bool  # whether the high-water mark was reset after the warm-up


def measure(step: Callable[[], None], device: torch.device, warmup: int, steps: int, late: bool = False) -> Measured:
    """Baseline (before the warm-up, or after it when `late`), warm-up, reset of the high-water mark, then
    `steps` timed steps: median time and peak."""
    synchronize(device)
    baseline = memory_now(device)
    for _ in range(warmup):
        step()
    synchronize(device)
    baseline = memory_now(device) if late else baseline
    reset = reset_peak(device)
    times = []
    for _ in range(max(steps, 1)):
        start = time.perf_counter()
        step()
        synchronize(device)
        times.append(time.perf_counter() - start)
    return Measured(statistics.median(times), max(memory_peak(device) - baseline, 0), reset)


def setup_child(threads: int) -> None:
    """A spawned cell's torch settings."""
    torch.set_num_threads(threads)
    torch.manual_seed(0)


@contextlib.contextmanager
def environ(**values: str) -> Iterator[None]:
    """Within, these environment variables are set (for the processes spawned inside)."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)


def in_child(fn: Callable[..., Result], *args: object) -> Result | str:
    """Run one cell in a fresh spawned process; a message instead where the process failed."""
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
        try:
            return pool.submit(fn, *args).result()
        except BrokenProcessPool:
            return "failed (process died: out of memory?)"
        except RuntimeError as e:
            return f"failed ({str(e).splitlines()[0][:60]})"


# --- table A: models -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelCell:
    """One family at one length: what to build."""

    family: str
    length: int  # tokens per sequence (ViT: patches)
    batch: int
    target: int  # T5's target length; 0 elsewhere

    @property
    def tokens(self) -> int:
        """Tokens per step (T5: sources and targets)."""
        return self.batch * (self.length + self.target)


def model_cell(family: str, length: int, tokens: int, t5_target: str) -> ModelCell:
    """The cell for a family at a length: ViT's length rounded to a square patch grid; batch to the tokens."""
    if family == "vit":
        length = round(math.sqrt(length)) ** 2
    target = (length if t5_target == "full" else max(length // 4, 1)) if family == "t5" else 0
    return ModelCell(family, length, max(tokens // length, 1), target)


def build_pair(cell: ModelCell) -> Pair:
    """bench_common's pair for the family, with positions covering the cell's length."""
    if cell.family == "vit":
        return vit_pair(cell.batch, PATCH * math.isqrt(cell.length))
    if cell.family == "t5":
        return t5_pair(cell.batch, cell.length, cell.target)
    text = {"bert": bert_pair, "gpt": gpt_pair}
    return text[cell.family](cell.batch, cell.length)


def memory_cell(cell: ModelCell, side: str, dtype_name: str, device: str, args: dict) -> Measured:
    """In a child: build the pair, keep one side, and measure the peak memory of its training steps."""
    setup_child(args["threads"])
    dev = torch.device(device)
    pair = build_pair(cell)
    model, loss = (pair.ours, pair.ours_loss) if side == "ours" else (pair.hf, pair.hf_loss)
    del pair.ours, pair.hf  # the other side's weights must not count
    model.to(dev)
    batch = {k: v.to(dev) for k, v in pair.batch.items()}
    step = make_step(model, loss, batch, dev)
    dtype = DTYPES[dtype_name]
    with layouts(model, dtype_name, dev) if side == "ours" else contextlib.nullcontext():
        return measure(lambda: step(dtype), dev, args["warmup"], 1)


@dataclass
class Timed:
    """Median step times of both sides over interleaved rounds, and the median paired ratio."""

    ours_s: float
    hf_s: float
    ratio: float  # median over rounds of HF's step time / ours in the same round
    rounds: int


def time_cell(cell: ModelCell, dtype_name: str, device: str, args: dict) -> Timed:
    """In a child: both sides warmed up, then bench_common.bench's interleaved rounds (alternating who goes first)."""
    setup_child(args["threads"])
    dev = torch.device(device)
    pair = to_device(build_pair(cell), dev)
    steps = {
        "ours": make_step(pair.ours, pair.ours_loss, pair.batch, dev),
        "HF": make_step(pair.hf, pair.hf_loss, pair.batch, dev),
    }
    timing = argparse.Namespace(device=dev, rounds=args["rounds"], steps=args["steps"], clock="wall", budget=math.inf)
    with layouts(pair.ours, dtype_name, dev):
        for step in steps.values():
            time_steps(step, DTYPES[dtype_name], args["warmup"], dev)
        result = bench(pair, steps, dtype_name, timing)
    return Timed(result.ours_s, result.hf_s, result.ratio, result.rounds)


@dataclass
class ModelRow:
    """Both sides of one family at one length in one dtype."""

    cell: ModelCell
    dtype: str
    timed: Timed | str
    ours: Measured | str
    hf: Measured | str

    def cells(self) -> list[str]:
        """Table cells: rates and their paired ratio, peaks and their ratio (a failure's message instead)."""
        c, t = self.cell, self.timed
        shape = f"{c.batch}x{c.length}" + (f"+{c.target}" if c.target else "")
        speed = (
            [t, "", ""]
            if isinstance(t, str)
            else [rate(c.tokens / t.ours_s), rate(c.tokens / t.hf_s), f"{t.ratio:.2f}"]
        )
        if isinstance(self.ours, str) or isinstance(self.hf, str):
            memory = [m if isinstance(m, str) else "" for m in (self.ours, self.hf)] + [""]
        else:
            peaks = self.ours.peak, self.hf.peak
            memory = [f"{peaks[0] / MiB:,.0f}", f"{peaks[1] / MiB:,.0f}", f"{peaks[1] / max(peaks[0], 1):.2f}"]
        return [c.family, self.dtype, str(c.length), shape, *speed, *memory]


def rate(per_s: float) -> str:
    """A throughput with thousands separators."""
    return f"{per_s:,.0f}"


MODEL_HEADER = ["family", "dtype", "T", "batch x T", "ours tok/s", "HF tok/s", "speed HF/ours", "ours MiB"]
MODEL_HEADER += ["HF MiB", "memory HF/ours"]


def run_models(args: argparse.Namespace) -> list[ModelRow]:
    """Table A: every family, length and dtype: each side's memory in its own process, then both timed in one."""
    rows = []
    opts = {"threads": args.threads, "warmup": args.warmup, "steps": args.steps, "rounds": args.rounds}
    for dtype in args.dtypes:
        for family in args.families:
            for length in args.lengths:
                cell = model_cell(family, length, args.tokens, args.t5_target)
                device = str(args.device)
                ours, hf = (in_child(memory_cell, cell, side, dtype, device, opts) for side in ("ours", "HF"))
                row = ModelRow(cell, dtype, in_child(time_cell, cell, dtype, device, opts), ours, hf)
                print("  " + " ".join(row.cells()), flush=True)
                rows.append(row)
    return rows


# --- table B: attention ----------------------------------------------------------------------------


def attention_bytes(kernel: str, length: int, device: torch.device) -> int:
    """Estimated peak bytes of one forward + backward: quadratic kernels keep ~5 fp32 (B, H, T, T) tensors
    (scores, weights, their gradients, workspace; a CPU's math path computes reduced precision in fp32)."""
    b, h, d = ATTENTION["batch"], ATTENTION["heads"], ATTENTION["head_dim"]
    linear = 16 * b * h * length * d * 4  # q, k, v, output, their gradients and kernel buffers
    return linear + (5 * b * h * length * length * 4 if kernel != "flash" else 0)


def size(n: int) -> str:
    """Bytes in GB, or MB below a tenth of one."""
    return f"{n / GiB:.1f} GB" if n >= GiB // 10 else f"{n / MiB:.1f} MB"


def attention_fn(kernel: str, device: torch.device, dtype: torch.dtype) -> Callable:
    """The kernel as f(q, k, v) -> out: SDPA's MATH, accel's eager, or the flash path."""
    from tetraformer.accel.attention_kernels import KERNELS as ACCEL

    flash = "flash" if device.type == "cuda" and dtype != torch.float32 else "sdpa"
    name = flash if kernel == "flash" else kernel
    fn, scale = ACCEL[name], ATTENTION["head_dim"] ** -0.5
    return lambda q, k, v: fn(q, k, v, None, False, scale, 0.0)


def attention_cell(kernel: str, length: int, dtype_name: str, device: str, args: dict) -> Measured:
    """In a child: forward + backward of one attention call on random (1, 4, T, 64) inputs."""
    setup_child(args["threads"])
    dev, dtype = torch.device(device), DTYPES[dtype_name]
    b, h, d = ATTENTION["batch"], ATTENTION["heads"], ATTENTION["head_dim"]
    q, k, v = (torch.randn(b, h, length, d, device=dev, dtype=dtype, requires_grad=True) for _ in range(3))
    grad = torch.randn(b, h, length, d, device=dev, dtype=dtype)
    fn = attention_fn(kernel, dev, dtype)

    def step() -> None:
        fn(q, k, v).backward(grad)  # (B, H, T, Dh)
        q.grad = k.grad = v.grad = None

    return measure(step, dev, args["warmup"], args["calls"], late=True)  # the inputs stay; each call frees its own


@dataclass
class AttentionRow:
    """Every kernel at one length in one dtype."""

    length: int
    dtype: str
    got: dict[str, Measured | str]

    def cells(self) -> list[str]:
        """Table cells: per kernel ms per forward + backward and peak MiB."""
        out = [self.dtype, str(self.length)]
        for kernel in KERNELS:
            m = self.got[kernel]
            out += [m, ""] if isinstance(m, str) else [f"{m.seconds * 1e3:,.1f}", f"{m.peak / MiB:,.1f}"]
        return out


ATTENTION_HEADER = ["dtype", "T", *(f"{k} {unit}" for k in KERNELS for unit in ("ms", "MiB"))]


def run_attention(args: argparse.Namespace) -> list[AttentionRow]:
    """Table B: every dtype, length and kernel, each in its own process; cells that would not fit skipped."""
    rows = []
    opts = {"threads": args.threads, "warmup": args.warmup, "calls": args.calls}
    limit = free_bytes(args.device) // 2
    for dtype in args.attn_dtypes:
        for length in args.attn_lengths:
            got: dict[str, Measured | str] = {}
            for kernel in KERNELS:
                need = attention_bytes(kernel, length, args.device)
                if need > limit:
                    got[kernel] = f"skipped (needs {size(need)})"
                    continue
                with environ(MALLOC_MMAP_THRESHOLD_=str(MMAP_THRESHOLD)):  # freed buffers leave the resident set
                    got[kernel] = in_child(attention_cell, kernel, length, dtype, str(args.device), opts)
            row = AttentionRow(length, dtype, got)
            print("  " + " ".join(row.cells()), flush=True)
            rows.append(row)
    return rows


# --- reporting -------------------------------------------------------------------------------------


def model_table(rows: list[ModelRow], markdown: bool) -> str:
    """Table A as text or markdown."""
    return format_rows([MODEL_HEADER, *(r.cells() for r in rows)], markdown)


def attention_table(rows: list[AttentionRow], markdown: bool) -> str:
    """Table B as text or markdown."""
    return format_rows([ATTENTION_HEADER, *(r.cells() for r in rows)], markdown)


def describe(args: argparse.Namespace) -> str:
    """The machine line and the run's method."""
    reset = "reset after warm-up" if reset_peak(args.device) else "NOT resettable here: includes warm-up"
    return "\n".join(
        [
            machine(args.device),
            f"load average {Path('/proc/loadavg').read_text().split()[:3]}",
            f"each cell in a fresh spawned process, {args.warmup} warm-up step(s) or call(s); models: memory of each "
            f"side over 1 step in its own process, speed of both in one process over {args.rounds} interleaved "
            f"rounds of {args.steps} step(s) (ratio = median of paired HF/ours); attention: median of "
            f"{args.calls} call(s); peak = high-water mark ({reset}) - baseline (models: after build; attention: "
            "after the warm-up call, glibc unmapping buffers from 256 KiB)",
            f"models: ~{args.tokens} tokens per step, fused AdamW both sides, ours accel's measured attention "
            f"kernels, HF sdpa; T5 targets {'T' if args.t5_target == 'full' else 'T/4'}; ViT T = patches (4x4)",
            "attention: (B, H, Dh) = (1, 4, 64), no mask, forward + backward; "
            "flash = SDPA's own pick (CPU) / FLASH (CUDA, reduced precision)",
        ]
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line flags."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tables", nargs="+", choices=["models", "attention"], default=["models", "attention"])
    p.add_argument("--families", nargs="+", choices=FAMILIES, default=list(FAMILIES))
    p.add_argument("--lengths", nargs="+", type=int, default=[1024, 2048, 4096], help="table A sequence lengths")
    p.add_argument("--tokens", type=int, default=4096, help="tokens per step; batch = tokens // T, at least 1")
    p.add_argument("--t5-target", choices=["quarter", "full"], default="quarter", help="T5 target length: T/4 or T")
    p.add_argument("--dtypes", nargs="+", choices=list(DTYPES), default=["bf16"], help="table A dtypes")
    p.add_argument("--attn-lengths", nargs="+", type=int, default=[512, 1024, 2048, 4096, 8192])
    p.add_argument("--attn-dtypes", nargs="+", choices=list(DTYPES), default=list(DTYPES))
    p.add_argument("--warmup", type=int, default=1, help="untimed steps (calls) per cell")
    p.add_argument("--steps", type=int, default=1, help="timed training steps per side in each round")
    p.add_argument("--rounds", type=int, default=3, help="interleaved ours/HF timing rounds; medians are reported")
    p.add_argument("--calls", type=int, default=3, help="timed attention calls per cell; the median is reported")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)), help="CPU threads per cell")
    p.add_argument("--markdown", action="store_true", help="print README-ready markdown tables")
    args = p.parse_args(argv)
    args.device = torch.device(args.device)
    return args


def main(argv: list[str] | None = None) -> None:
    """Run the requested tables and print them after the machine line and the method."""
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    print(describe(args), flush=True)
    tables = []
    if "models" in args.tables:
        tables.append("A. training, ours vs HF\n\n" + model_table(run_models(args), args.markdown))
    if "attention" in args.tables:
        tables.append(
            "B. one attention call, forward + backward\n\n" + attention_table(run_attention(args), args.markdown)
        )
    print(f"load average at the end {Path('/proc/loadavg').read_text().split()[:3]}")
    for table in tables:
        print("\n" + table)


if __name__ == "__main__":
    main()
