"""Training-step throughput of core-built models against Hugging Face models of identical shape.

Times forward + backward + AdamW steps of BERT, GPT, T5 and ViT built from the Tetraformer core and
the same shapes built by `transformers` (random weights from configs, attn_implementation="sdpa"),
in fp32 and under bf16 autocast, in one run. Both sides get the same inputs, the same loss code and
the same optimizer (torch.optim.AdamW, identical settings), so the ratio measures the models.

Our models run bf16 on a CPU as training runs them there: with accel's layout-choosing Linear
(tetraformer/accel/bf16_linear.py); stock nn.Linear in fp32 and on GPUs.

Method: per dtype one warm-up step per side and family (on a CPU the first bf16 step
also times its matmul layouts, see accel/chooser.py), then up to --rounds rounds of --steps steps
that interleave ours and HF (alternating which goes first), so drift on a busy machine hits both
alike. Throughput comes from each side's median step time; the ratio is the median over rounds of
HF's step time over ours in the same round. A cell stops adding rounds after --budget seconds: on a
CPU without native bf16 matmuls (AVX2 only) a bf16 step takes ~40x an fp32 one, so it gets one round.
MFU is model training FLOPs/s over the best matmul FLOP/s this script measures for that dtype
(before and after the models run, keeping the better of the two).

    python scripts/bench.py                                  # every family, fp32 and bf16
    python scripts/bench.py --families gpt --dtypes fp32 --rounds 9 --markdown
    python scripts/bench.py --families t5 --profile          # top ops of slow cells, ours vs HF
    python scripts/bench.py --generation --markdown          # KV-cache generation instead (bench_generation.py)
    python scripts/bench.py --tasks [TASK ...]               # tasks end to end under fit vs bare (bench_tasks.py)
    python scripts/bench.py --long --markdown                # T = 1024..4096 and attention's O(T^2) (bench_long.py)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import torch
from bench_common import (
    ADAMW,
    BUILDERS,
    DTYPES,
    HF_ATTENTION,
    Pair,
    Result,
    Step,
    add_clock_option,
    bench,
    check_params,
    format_rows,
    layouts,
    machine,
    make_step,
    time_steps,
    to_device,
)

from tetraformer.training.callbacks.peak import measure_matmuls

FAMILIES = ("bert", "gpt", "t5", "vit")
SIBLINGS = {"--generation": "bench_generation.py", "--tasks": "bench_tasks.py", "--long": "bench_long.py"}


def cells(r: Result, peak: float) -> list[str]:
    """A result's table cells; MFU against the dtype's matmul peak in FLOP/s."""
    ours, hf = r.items / r.ours_s, r.items / r.hf_s
    ours_mfu, hf_mfu = r.flops / r.ours_s / peak, r.flops / r.hf_s / peak
    return [
        r.family,
        r.dtype,
        f"{rate(ours)} {r.unit}/s",
        f"{rate(hf)} {r.unit}/s",
        f"{r.ratio:.2f}",
        f"{ours_mfu:.1%}",
        f"{hf_mfu:.1%}",
        str(r.rounds),
    ]


def rate(per_s: float) -> str:
    """A throughput with thousands separators, or one decimal when small."""
    return f"{per_s:,.0f}" if per_s >= 100 else f"{per_s:.1f}"


# --- profiling -------------------------------------------------------------------------------------

SLOW = {"fp32": 1.0, "bf16": 1.3}  # ratios below these get profiled under --profile


def profile(pair: Pair, steps: dict[str, Step], dtype_name: str, args: argparse.Namespace) -> None:
    """Print the top ops by self time over a few steps, ours then HF."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    cuda = args.device.type == "cuda"
    activities = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if cuda else [])]
    for side, step in steps.items():
        with torch_profile(activities=activities) as prof:
            time_steps(step, DTYPES[dtype_name], args.steps, args.device)
        print(f"\n### {pair.family} {dtype_name}, {side}: {args.steps} step(s), top ops by self time")
        table = prof.key_averages().table(
            sort_by="self_device_time_total" if cuda else "self_cpu_time_total", row_limit=args.profile_top
        )
        print(table, flush=True)


# --- reporting -------------------------------------------------------------------------------------


def rows(results: list[Result], peaks: dict[str, float]) -> list[list[str]]:
    """Table cells: a header row, then one row per result."""
    header = ["family", "dtype", "ours", "HF", "ratio", "ours MFU", "HF MFU", "rounds"]
    return [header, *(cells(r, peaks[r.dtype]) for r in results)]


def format_table(results: list[Result], peaks: dict[str, float], markdown: bool) -> str:
    """Results as an aligned plain-text table, or a README-ready markdown table."""
    return format_rows(rows(results, peaks), markdown)


def describe(args: argparse.Namespace) -> str:
    """The run's setting: versions, device, threads and methodology."""
    return "\n".join(
        [
            machine(args.device),
            f"HF attn_implementation={HF_ATTENTION!r}; both sides: {args.adamw} AdamW {ADAMW}, same inputs and loss "
            f"code; ours: attention kernels {os.environ.get('TETRAFORMER_ATTENTION', 'auto')}",
            f"{args.warmup} warm-up step(s) per side, family and dtype; per dtype up to {args.rounds} interleaved "
            f"rounds of {args.steps} step(s), fewer once a cell's rounds pass {args.budget:.0f} s",
            f"{args.clock} clock; throughput and MFU from median step times; "
            "ratio = median over rounds of HF's step time / ours",
        ]
    )


def describe_matmuls(matmuls: dict[str, dict[str, float]]) -> str:
    """Measured matmul GFLOP/s per dtype and layout, and the peak MFU is taken against."""
    return "\n".join(
        f"{dtype} matmul GFLOP/s (best of start and end): "
        + ", ".join(f"{k} {v / 1e9:,.1f}" for k, v in layouts.items())
        + f"; MFU peak = the best, {max(layouts.values()) / 1e9:,.1f}"
        for dtype, layouts in matmuls.items()
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line flags."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=1, help="timed steps per side in each round")
    p.add_argument("--rounds", type=int, default=7, help="interleaved ours/HF rounds; medians are reported")
    p.add_argument("--warmup", type=int, default=1, help="untimed steps per side, family and dtype")
    p.add_argument("--budget", type=float, default=30.0, help="seconds after which a cell stops adding rounds")
    p.add_argument("--families", nargs="+", choices=FAMILIES, default=list(FAMILIES))
    p.add_argument(
        "--adamw", choices=["fused", "loop"], default="fused", help="both sides' AdamW kernel (fused: both defaults)"
    )
    p.add_argument("--dtypes", nargs="+", choices=list(DTYPES), default=list(DTYPES))
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)), help="CPU threads")
    add_clock_option(p)
    p.add_argument("--markdown", action="store_true", help="print a README-ready markdown table")
    p.add_argument("--profile", action="store_true", help=f"profile ours vs HF where the ratio is below {SLOW}")
    p.add_argument("--profile-top", type=int, default=12, help="ops listed per profile")
    p.add_argument(
        "--generation",
        action="store_true",
        help="time generation against HF instead; other flags: scripts/bench_generation.py --help",
    )
    p.add_argument(
        "--tasks",
        nargs="*",
        help="time every task (or those named) under fit against its bare step; flags: scripts/bench_tasks.py --help",
    )
    p.add_argument(
        "--long",
        action="store_true",
        help="long sequences and attention's O(T^2) instead; other flags: scripts/bench_long.py --help",
    )
    args = p.parse_args(argv)
    args.device = torch.device(args.device)
    return args


def run_family(family: str, args: argparse.Namespace) -> list[Result]:
    """Build one family's pair, check its parameter counts, and time it in every dtype."""
    pair = to_device(BUILDERS[family](), args.device)
    ours, hf = check_params(pair)
    print(f"{family}: {ours:,} parameters (ours) == {hf:,} (HF)", flush=True)
    steps = {
        "ours": make_step(pair.ours, pair.ours_loss, pair.batch, args.device, args.adamw == "fused"),
        "HF": make_step(pair.hf, pair.hf_loss, pair.batch, args.device, args.adamw == "fused"),
    }
    results = []
    for dtype in args.dtypes:
        with layouts(pair.ours, dtype, args.device):
            for step in steps.values():  # per dtype: the first bf16 step on a CPU also times its matmul layouts
                time_steps(step, DTYPES[dtype], args.warmup, args.device)
            result = bench(pair, steps, dtype, args)
            print(f"  {family} {dtype}: ratio {result.ratio:.2f} over {result.rounds} round(s)", flush=True)
            if args.profile and result.ratio < SLOW[dtype]:
                profile(pair, steps, dtype, args)
        results.append(result)
    return results


def measure_peaks(args: argparse.Namespace) -> dict[str, dict[str, float]]:
    """Matmul FLOP/s per dtype and layout."""
    return {name: measure_matmuls(args.device, DTYPES[name]) for name in args.dtypes}


def sibling_command(flag: str, argv: list[str]) -> list[str]:
    """The command line of the benchmark script a flag stands for, with the rest of the arguments (bench_tasks.py
    takes --tasks itself)."""
    rest = argv if flag == "--tasks" else [a for a in argv if a != flag]
    return [sys.executable, str(Path(__file__).with_name(SIBLINGS[flag])), *rest]


def run_sibling(flag: str, argv: list[str]) -> int:
    """Run that script in a process of its own (no script imports another); its exit status."""
    return subprocess.call(sibling_command(flag, argv))


def main(argv: list[str] | None = None) -> None:
    """Benchmark every requested family in every requested dtype and print the table (or --generation, --tasks,
    --long)."""
    argv = sys.argv[1:] if argv is None else argv
    for flag in SIBLINGS:
        if flag in argv:
            raise SystemExit(run_sibling(flag, argv))
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    print(describe(args), flush=True)
    before = measure_peaks(args)
    results = [r for family in args.families for r in run_family(family, args)]
    after = measure_peaks(args)  # measured again: a busy neighbour during either pass lowers only that one
    matmuls = {d: {k: max(v, after[d][k]) for k, v in layouts.items()} for d, layouts in before.items()}
    print(describe_matmuls(matmuls))
    print()
    print(format_table(results, {d: max(layouts.values()) for d, layouts in matmuls.items()}, args.markdown))


if __name__ == "__main__":
    main()
