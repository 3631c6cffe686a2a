"""KV-cache generation speed of core models against transformers' `generate` on the same weights.

GPT-2 (`GPT2LMHeadModel`) and T5 (`T5ForConditionalGeneration`) are built by transformers from configs
with seeded random weights, saved, and imported into the core with `tetraformer.interop.load_hf`, so
both sides hold identical weights. Each setting ({gpt2, t5} x {greedy, beam4} x {batch 1, 8}) generates
--new-tokens tokens after --prompt-len-token prompts (T5: sources), with no EOS so both sides generate
the same count. Outputs are compared token for token: greedy ones must be equal (the run fails
otherwise); beam ones are reported.

Method: on --threads threads (default 1), --warmup untimed calls per side and setting, then --rounds
rounds that interleave ours and HF (alternating which goes first), timed on the --clock (wall, or this
process's CPU seconds). Tokens/s come from median times; the ratio is the median over rounds of HF's
time over ours in the same round (> 1: ours is faster).

    python scripts/bench_generation.py --markdown
    python scripts/bench.py --generation --markdown          # the same, from the benchmark entry point
    python scripts/bench_generation.py --models gpt2 --searches beam4 --batches 8 --rounds 9 --clock cpu
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import transformers
from bench_common import CLOCKS, HF_ATTENTION, SHAPE, VOCAB, add_clock_option, format_rows, machine, seeded
from torch import Tensor, nn

from tetraformer.accel import decoding
from tetraformer.core import GenerationConfig, generate
from tetraformer.interop import load_hf

MODELS = ("gpt2", "t5")
SEARCHES = {"greedy": 1, "beam4": 4}  # name -> num_beams
PAD = 0  # also T5's decoder start token

Generate = Callable[[], Tensor]  # -> (B, n) new tokens


@dataclass
class Result:
    """One setting: median seconds per call of each side, the median paired ratio, output equality."""

    model: str
    search: str
    batch: int
    new_tokens: int
    rounds: int
    ours_s: float
    hf_s: float
    ratio: float  # median over rounds of HF's time / ours in the same round
    equal: bool

    def cells(self) -> list[str]:
        """Table cells."""
        tokens = self.batch * self.new_tokens
        return [
            self.model,
            self.search,
            str(self.batch),
            f"{tokens / self.ours_s:,.0f}",
            f"{tokens / self.hf_s:,.0f}",
            f"{self.ratio:.2f}",
            "yes" if self.equal else "no",
        ]


# --- models ----------------------------------------------------------------------------------------


def hf_config(model: str, max_len: int) -> transformers.PreTrainedConfig:
    """The benchmark shape as a transformers config, without EOS (every call runs to max_new_tokens)."""
    special = dict(bos_token_id=None, eos_token_id=None, pad_token_id=PAD)
    if model == "gpt2":
        return transformers.GPT2Config(
            n_embd=SHAPE["d_model"],
            n_layer=SHAPE["n_layers"],
            n_head=SHAPE["n_heads"],
            n_inner=SHAPE["d_ff"],
            vocab_size=VOCAB,
            n_positions=max_len,
            **special,
        )
    return transformers.T5Config(
        d_model=SHAPE["d_model"],
        d_kv=SHAPE["d_model"] // SHAPE["n_heads"],
        d_ff=SHAPE["d_ff"],
        num_layers=SHAPE["n_layers"],
        num_heads=SHAPE["n_heads"],
        vocab_size=VOCAB,
        feed_forward_proj="relu",
        decoder_start_token_id=PAD,
        **special,
    )


def build(model: str, max_len: int) -> tuple[nn.Module, nn.Module]:
    """(ours, HF) in eval mode with identical weights: the HF model saved, then imported by the core."""
    cls = transformers.GPT2LMHeadModel if model == "gpt2" else transformers.T5ForConditionalGeneration
    hf = seeded(lambda: cls._from_config(hf_config(model, max_len), attn_implementation=HF_ATTENTION))
    transformers.utils.logging.disable_progress_bar()  # save_pretrained's bar would interleave with the table
    with tempfile.TemporaryDirectory() as tmp:
        hf.save_pretrained(tmp)
        ours = load_hf(Path(tmp)).core
    return ours.eval(), hf.eval()


def prompts(batch: int, length: int) -> Tensor:
    """(B, T) seeded random token ids, none of them the pad id."""
    return torch.randint(1, VOCAB, (batch, length), generator=torch.Generator().manual_seed(batch))


# --- the two generate calls ------------------------------------------------------------------------


def ours_call(model: nn.Module, ids: Tensor, beams: int, new_tokens: int) -> Generate:
    """Our generate on the prompts, in accel's decoding layouts; returns only the new tokens."""
    config = GenerationConfig(
        max_new_tokens=new_tokens,
        num_beams=beams,
        eos_token_id=None,
        pad_token_id=PAD,
        decoder_start_token_id=PAD,
    )
    mask = torch.ones_like(ids)
    prompt_len = 0 if hasattr(model, "encode") else ids.shape[1]

    def call() -> Tensor:
        with decoding(model, len(ids) * beams):  # as the platform's generation entry point decodes
            return generate(model, ids, mask, config)[:, prompt_len:]

    return call


def hf_call(model: nn.Module, ids: Tensor, beams: int, new_tokens: int) -> Generate:
    """transformers' generate with the same search; returns only the new tokens (no prompt, no start token)."""
    kwargs = dict(
        input_ids=ids,
        attention_mask=torch.ones_like(ids),
        do_sample=False,
        num_beams=beams,
        max_new_tokens=new_tokens,
        min_new_tokens=new_tokens,
        length_penalty=1.0,
        early_stopping=False,
        use_cache=True,
    )
    skip = 1 if model.config.is_encoder_decoder else ids.shape[1]
    return lambda: model.generate(**kwargs)[:, skip:]


# --- timing ----------------------------------------------------------------------------------------


def seconds(call: Generate, clock: str = "wall") -> tuple[float, Tensor]:
    """Seconds of one call on the clock, and what it returned."""
    now = CLOCKS[clock]
    start = now()
    with torch.inference_mode():
        out = call()
    return now() - start, out


def bench(model: str, search: str, batch: int, pair: tuple[nn.Module, nn.Module], args: argparse.Namespace) -> Result:
    """Warm up, then interleave rounds of ours and HF; medians of times and of paired ratios."""
    ids, beams = prompts(batch, args.prompt_len), SEARCHES[search]
    calls = {
        "ours": ours_call(pair[0], ids, beams, args.new_tokens),
        "HF": hf_call(pair[1], ids, beams, args.new_tokens),
    }
    outs = {side: seconds(call)[1] for side, call in calls.items() for _ in range(args.warmup)}
    times: dict[str, list[float]] = {"ours": [], "HF": []}
    for r in range(args.rounds):
        for side in ("ours", "HF") if r % 2 == 0 else ("HF", "ours"):  # alternate who goes first
            elapsed, outs[side] = seconds(calls[side], args.clock)
            times[side].append(elapsed)
    equal = outs["ours"].shape == outs["HF"].shape and torch.equal(outs["ours"], outs["HF"])
    if search == "greedy" and not equal:
        raise AssertionError(f"{model} greedy batch {batch}: our tokens differ from transformers'")
    ratio = statistics.median(hf / ours for ours, hf in zip(times["ours"], times["HF"], strict=True))
    return Result(
        model,
        search,
        batch,
        args.new_tokens,
        args.rounds,
        statistics.median(times["ours"]),
        statistics.median(times["HF"]),
        ratio,
        equal,
    )


def run(args: argparse.Namespace) -> list[Result]:
    """Every requested setting, one model pair at a time; a line per setting as it finishes."""
    results = []
    for model in args.models:
        pair = build(model, args.prompt_len + args.new_tokens)
        for search in args.searches:
            for batch in args.batches:
                result = bench(model, search, batch, pair, args)
                print(f"  {model} {search} batch {batch}: ratio {result.ratio:.2f}", flush=True)
                results.append(result)
    return results


# --- reporting -------------------------------------------------------------------------------------


def format_table(results: list[Result], markdown: bool) -> str:
    """Results as an aligned plain-text table, or a README-ready markdown table."""
    header = ["model", "search", "batch", "ours tok/s", "HF tok/s", "ratio", "outputs equal"]
    return format_rows([header, *(r.cells() for r in results)], markdown)


def describe(args: argparse.Namespace) -> str:
    """The run's setting: versions, device, threads, shapes and methodology."""
    return "\n".join(
        [
            machine(torch.device("cpu")),
            f"HF attn_implementation={HF_ATTENTION!r}, use_cache=True; shape {SHAPE}, vocab {VOCAB}, fp32, "
            f"random weights; {args.prompt_len}-token prompts, {args.new_tokens} new tokens, no EOS",
            f"{args.warmup} warm-up call(s) per side and setting, then {args.rounds} interleaved rounds; "
            f"{args.clock} clock; tok/s = batch * new tokens / median time; ratio = median over rounds of HF's "
            "time / ours",
        ]
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line flags."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    p.add_argument("--searches", nargs="+", choices=list(SEARCHES), default=list(SEARCHES))
    p.add_argument("--batches", nargs="+", type=int, default=[1, 8])
    p.add_argument("--prompt-len", type=int, default=32, help="prompt (T5: source) tokens")
    p.add_argument("--new-tokens", type=int, default=128, help="tokens each call generates")
    p.add_argument("--rounds", type=int, default=5, help="interleaved ours/HF rounds; medians are reported")
    p.add_argument("--warmup", type=int, default=1, help="untimed calls per side and setting")
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="CPU threads (default 1: a decoding step is a chain of small ops, and on a shared machine a busy "
        f"neighbour stalls multi-threaded ones for whole seconds; this machine has {len(os.sched_getaffinity(0))})",
    )
    add_clock_option(p)
    p.add_argument("--markdown", action="store_true", help="print a README-ready markdown table")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> list[Result]:
    """Benchmark every requested setting and print the table."""
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    print(describe(args), flush=True)
    results = run(args)
    print()
    print(format_table(results, args.markdown))
    return results


if __name__ == "__main__":
    main()
