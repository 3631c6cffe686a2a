"""What the benchmark scripts share: same-shape model pairs (core vs transformers), timed training steps, clocks,
the machine line and tables. A library for scripts/bench*.py, never run itself; no script imports another script.

    python scripts/bench.py --help       # the benchmarks that use it: bench.py, bench_generation.py, bench_long.py,
                                         # bench_tasks.py, bench_tokenize.py (see each one's first lines)
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
import torch.nn.functional as F
import transformers
from torch import Tensor, nn
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    GPT2Config,
    GPT2LMHeadModel,
    T5Config,
    T5ForConditionalGeneration,
    ViTConfig,
    ViTForImageClassification,
)

from tetraformer.accel import bf16_layouts, measured_attention
from tetraformer.accel.chooser import cpu_flags, cpu_model
from tetraformer.accel.linear_cross_entropy import lm_loss
from tetraformer.core import (
    CausalLM,
    ImageEncoder,
    Seq2SeqLM,
    SequenceClassifier,
    TextEncoder,
    TransformerConfig,
    flops_per_token,
)
from tetraformer.core.accounting import token_cost
from tetraformer.training.callbacks.peak import synchronize

# --- machine and tables ----------------------------------------------------------------------------

CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}  # cpu: this process's CPU seconds


def add_clock_option(parser: argparse.ArgumentParser) -> None:
    """--clock: wall seconds, or this process's CPU seconds (steadier ratios on a shared machine, one thread)."""
    parser.add_argument(
        "--clock",
        choices=list(CLOCKS),
        default="wall",
        help="wall seconds, or this process's CPU seconds: steady on a busy machine with --threads 1",
    )


def format_rows(table: list[list[str]], markdown: bool, text_columns: int = 2) -> str:
    """A header row and data rows as an aligned plain-text table, or a README-ready markdown table.

    The first `text_columns` columns are left-aligned text; the rest are numbers, right-aligned.
    """
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    right = ":" if markdown else "-"  # markdown right-aligns the numeric columns
    rule = ["-" * w if i < text_columns else "-" * (w - 1) + right for i, w in enumerate(widths)]
    lines = []
    for row in (table[0], rule, *table[1:]):
        cells = [
            c.ljust(w) if i < text_columns else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append(f"| {' | '.join(cells)} |" if markdown else "  ".join(cells))
    return "\n".join(lines)


def device_name(device: torch.device) -> str:
    """The device in words: GPU name, or CPU model and ISA flags, and the bf16 layout mode on CPUs."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    mode = os.environ.get("TETRAFORMER_BF16_LAYOUT", "auto")
    return f"{cpu_model()} [{' '.join(cpu_flags())}], bf16 Linear layouts: {mode}"


def machine(device: torch.device) -> str:
    """Versions, the device in words and the thread count, as one line."""
    return (
        f"torch {torch.__version__}, transformers {transformers.__version__}, python {platform.python_version()}, "
        f"device {device}: {device_name(device)}, {torch.get_num_threads()} threads"
    )


# --- model pairs ----------------------------------------------------------------------------------

TEXT_BATCH, SEQ_LEN, IMAGE_BATCH = 16, 128, 64
SHAPE = dict(d_model=256, n_layers=4, n_heads=4, d_ff=1024)  # every family's stack
VOCAB = 8192
HF_ATTENTION = "sdpa"  # transformers' default where a model supports it; all four do

Batch = dict[str, Tensor]
LossFn = Callable[[nn.Module, Batch], Tensor]


@dataclass
class Pair:
    """One family: our model, the HF model of the same shape, a batch and how to score it."""

    family: str
    ours: nn.Module
    hf: nn.Module
    batch: Batch
    ours_loss: LossFn
    hf_loss: LossFn
    flops_per_step: float  # training FLOPs (forward + backward) of one step, same count for both sides
    items_per_step: int
    unit: str  # what items_per_step counts: "tok" (tokens) or "img" (images)


def seeded(build: Callable[[], nn.Module], seed: int = 0) -> nn.Module:
    """Build a module right after seeding, so runs are repeatable."""
    torch.manual_seed(seed)
    return build()


def hf_model(cls: type, config: transformers.PreTrainedConfig) -> nn.Module:
    """A randomly initialised HF model from a config, on the SDPA attention path."""
    return seeded(lambda: cls._from_config(config, attn_implementation=HF_ATTENTION))


def text_batch(with_labels: int = 0, batch_size: int = TEXT_BATCH, seq_len: int = SEQ_LEN) -> Batch:
    """Random (B, T) token ids, an all-ones attention mask and optional class labels."""
    gen = torch.Generator().manual_seed(1)
    batch = {
        "input_ids": torch.randint(0, VOCAB, (batch_size, seq_len), generator=gen),
        "attention_mask": torch.ones(batch_size, seq_len, dtype=torch.long),
    }
    if with_labels:
        batch["labels"] = torch.randint(0, with_labels, (batch_size,), generator=gen)
    return batch


def token_loss(logits: Tensor, labels: Tensor) -> Tensor:
    """Mean cross-entropy of (B, T, V) logits against (B, T) labels, skipping -100."""
    return F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100)


def bert_pair(batch_size: int = TEXT_BATCH, seq_len: int = SEQ_LEN) -> Pair:
    """BERT-style sequence classifier with a tanh pooler, 2 classes."""
    cfg = TransformerConfig.preset(
        "bert-base", **SHAPE, vocab_size=VOCAB, max_len=seq_len, dropout=0.0, attn_dropout=0.0
    )
    ours = seeded(lambda: SequenceClassifier(TextEncoder(cfg), num_classes=2, pooler=True))
    hf_cfg = BertConfig(
        vocab_size=VOCAB,
        hidden_size=cfg.d_model,
        num_hidden_layers=cfg.n_layers,
        num_attention_heads=cfg.n_heads,
        intermediate_size=cfg.d_ff,
        max_position_embeddings=seq_len,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        num_labels=2,
    )
    hf = hf_model(BertForSequenceClassification, hf_cfg)

    def ours_loss(m: nn.Module, b: Batch) -> Tensor:
        return F.cross_entropy(m(b["input_ids"], attention_mask=b["attention_mask"]), b["labels"])

    def hf_loss(m: nn.Module, b: Batch) -> Tensor:
        logits = m(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits
        return F.cross_entropy(logits, b["labels"])

    tokens = batch_size * seq_len
    flops = flops_per_token(ours.backbone, seq_len) * tokens  # no vocabulary projection
    flops += 6.0 * batch_size * (cfg.d_model**2 + 2 * cfg.d_model)  # pooler + classifier, once per sequence
    batch = text_batch(2, batch_size, seq_len)
    return Pair("bert", ours, hf, batch, ours_loss, hf_loss, flops, tokens, "tok")


def gpt_pair(batch_size: int = TEXT_BATCH, seq_len: int = SEQ_LEN) -> Pair:
    """GPT-2-style causal LM with a tied head, next-token loss."""
    cfg = TransformerConfig.preset("gpt2", **SHAPE, vocab_size=VOCAB, max_len=seq_len, dropout=0.0, attn_dropout=0.0)
    ours = seeded(lambda: CausalLM(cfg))
    hf_cfg = GPT2Config(
        n_embd=cfg.d_model,
        n_layer=cfg.n_layers,
        n_head=cfg.n_heads,
        n_inner=cfg.d_ff,
        vocab_size=VOCAB,
        n_positions=seq_len,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=0,
        eos_token_id=0,
    )
    hf = hf_model(GPT2LMHeadModel, hf_cfg)
    ids = text_batch(0, batch_size, seq_len)["input_ids"]  # no padding mask: the plain causal path on both sides
    # labels shifted left rather than logits sliced, which would copy the (B, T, V) logits
    labels = torch.cat((ids[:, 1:], torch.full_like(ids[:, :1], -100)), dim=1)
    batch = {"input_ids": ids, "labels": labels}

    def ours_loss(m: nn.Module, b: Batch) -> Tensor:  # as training computes it: accel's measured head + loss
        return lm_loss(m.lm_head, m(b["input_ids"], features_only=True), b["labels"])

    def hf_loss(m: nn.Module, b: Batch) -> Tensor:
        return token_loss(m(input_ids=b["input_ids"]).logits, b["labels"])

    tokens = batch_size * seq_len
    return Pair("gpt", ours, hf, batch, ours_loss, hf_loss, flops_per_token(ours, seq_len) * tokens, tokens, "tok")


def t5_pair(batch_size: int = TEXT_BATCH, seq_len: int = SEQ_LEN, target_len: int | None = None) -> Pair:
    """T5-style encoder-decoder (v1.0: relu, tied and rescaled head), sources of seq_len, targets of target_len
    (default seq_len)."""
    target_len = target_len or seq_len
    cfg = TransformerConfig.preset(
        "t5-small",
        **SHAPE,
        n_decoder_layers=SHAPE["n_layers"],
        d_head=64,
        vocab_size=VOCAB,
        dropout=0.0,
        max_len=max(seq_len, target_len, 512),
    )
    ours = seeded(lambda: Seq2SeqLM(cfg))
    hf_cfg = T5Config(
        d_model=cfg.d_model,
        d_kv=cfg.head_dim,
        d_ff=cfg.d_ff,
        num_layers=cfg.n_layers,
        num_decoder_layers=cfg.n_decoder_layers,
        num_heads=cfg.n_heads,
        vocab_size=VOCAB,
        dropout_rate=0.0,
        feed_forward_proj="relu",
        tie_word_embeddings=True,
    )
    hf = hf_model(T5ForConditionalGeneration, hf_cfg)
    batch = text_batch(0, batch_size, seq_len)
    gen = torch.Generator().manual_seed(2)
    labels = torch.randint(1, VOCAB, (batch_size, target_len), generator=gen)
    batch["labels"] = labels
    batch["decoder_input_ids"] = torch.cat((torch.zeros_like(labels[:, :1]), labels[:, :-1]), dim=1)

    def ours_loss(m: nn.Module, b: Batch) -> Tensor:  # as training computes it: accel's measured head + loss
        h = m(b["input_ids"], b["decoder_input_ids"], attention_mask=b["attention_mask"], features_only=True)
        return lm_loss(m.lm_head, h, b["labels"])

    def hf_loss(m: nn.Module, b: Batch) -> Tensor:
        out = m(
            input_ids=b["input_ids"],
            attention_mask=b["attention_mask"],
            decoder_input_ids=b["decoder_input_ids"],
        )
        return token_loss(out.logits, b["labels"])

    # encoder tokens attend over the source; decoder (and head) tokens over the target and, across, the source
    source, target = batch_size * seq_len, batch_size * target_len
    flops = token_cost(ours.encoder).flops(source, seq_len)
    flops += token_cost(ours, exclude=("encoder",)).flops(target, target_len, seq_len)
    return Pair("t5", ours, hf, batch, ours_loss, hf_loss, flops, source + target, "tok")


def vit_pair(batch_size: int = IMAGE_BATCH, image_size: int = 32) -> Pair:
    """ViT classifier over square images (32x32 by default) in 4x4 patches, 10 classes."""
    cfg = TransformerConfig.preset("vit-b/16", **SHAPE, image_size=image_size, patch_size=4, n_channels=3)
    ours = seeded(lambda: SequenceClassifier(ImageEncoder(cfg), 10))
    hf_cfg = ViTConfig(
        hidden_size=cfg.d_model,
        num_hidden_layers=cfg.n_layers,
        num_attention_heads=cfg.n_heads,
        intermediate_size=cfg.d_ff,
        image_size=image_size,
        patch_size=4,
        num_channels=3,
        num_labels=10,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    hf = hf_model(ViTForImageClassification, hf_cfg)
    gen = torch.Generator().manual_seed(3)
    batch = {
        "pixel_values": torch.randn(batch_size, 3, image_size, image_size, generator=gen),
        "labels": torch.randint(0, 10, (batch_size,), generator=gen),
    }

    def ours_loss(m: nn.Module, b: Batch) -> Tensor:
        return F.cross_entropy(m(b["pixel_values"]), b["labels"])

    def hf_loss(m: nn.Module, b: Batch) -> Tensor:
        return F.cross_entropy(m(pixel_values=b["pixel_values"]).logits, b["labels"])

    n_patches = (cfg.image_size // cfg.patch_size) ** 2
    flops = flops_per_token(ours.backbone, n_patches + 1) * (n_patches + 1) * batch_size
    flops += 6.0 * (cfg.n_channels * cfg.patch_size**2 * cfg.d_model) * n_patches * batch_size  # patch conv
    flops += 6.0 * cfg.d_model * 10 * batch_size  # classifier
    return Pair("vit", ours, hf, batch, ours_loss, hf_loss, flops, batch_size, "img")


BUILDERS: dict[str, Callable[[], Pair]] = {"bert": bert_pair, "gpt": gpt_pair, "t5": t5_pair, "vit": vit_pair}


def n_params(model: nn.Module) -> int:
    """Unique trainable parameters (tied weights counted once)."""
    return sum(p.numel() for p in model.parameters())


def check_params(pair: Pair) -> tuple[int, int]:
    """Both parameter counts; the shapes are meant to match exactly, heads and poolers included."""
    ours, hf = n_params(pair.ours), n_params(pair.hf)
    if ours != hf:
        raise AssertionError(f"{pair.family}: ours has {ours:,} parameters, HF {hf:,}; the shapes differ")
    return ours, hf


# --- timing ---------------------------------------------------------------------------------------

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
ADAMW = dict(lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)


@dataclass
class Result:
    """Median step times of one family in one dtype, and the median paired ratio."""

    family: str
    dtype: str
    unit: str
    items: int  # per step
    flops: float  # per step
    rounds: int
    ours_s: float
    hf_s: float
    ratio: float  # median over rounds of HF's step time / ours in the same round: > 1 means ours is faster


def autocast(device: torch.device, dtype: torch.dtype) -> contextlib.AbstractContextManager:
    """bf16 autocast on the device, or nothing for fp32."""
    if dtype == torch.float32:
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=dtype)


Step = Callable[[torch.dtype], None]


def make_step(model: nn.Module, loss_fn: LossFn, batch: Batch, device: torch.device, fused: bool = True) -> Step:
    """A closure running one forward + backward + AdamW step of the model on the batch, in a dtype: the fused
    AdamW kernel by default, as both Tetraformer's and Hugging Face Trainer's defaults take it on CPUs and GPUs."""
    opt = torch.optim.AdamW(model.parameters(), **ADAMW, fused=fused or None)
    model.train()

    def step(dtype: torch.dtype) -> None:
        opt.zero_grad(set_to_none=True)
        with autocast(device, dtype):
            loss = loss_fn(model, batch)
        loss.backward()
        opt.step()

    return step


@contextlib.contextmanager
def layouts(model: nn.Module, dtype_name: str, device: torch.device) -> Iterator[None]:
    """What training applies to our model in this dtype: accel's measured attention kernels, and its measured
    bf16 layouts on a CPU."""
    cpu_bf16 = device.type == "cpu" and dtype_name == "bf16"
    with measured_attention(model), bf16_layouts(model) if cpu_bf16 else contextlib.nullcontext():
        yield


def time_steps(step: Step, dtype: torch.dtype, n: int, device: torch.device, clock: str = "wall") -> float:
    """Seconds per step on the clock, averaged over n consecutive steps."""
    now = CLOCKS[clock]
    synchronize(device)
    start = now()
    for _ in range(n):
        step(dtype)
    synchronize(device)
    return (now() - start) / max(n, 1)


def bench(pair: Pair, steps: dict[str, Step], dtype_name: str, args: argparse.Namespace) -> Result:
    """Interleave rounds of ours and HF steps (models already warm); medians of times and of paired ratios."""
    device, dtype = args.device, DTYPES[dtype_name]
    times: dict[str, list[float]] = {"ours": [], "HF": []}
    start = time.perf_counter()
    for r in range(args.rounds):
        for side in ("ours", "HF") if r % 2 == 0 else ("HF", "ours"):  # alternate who goes first
            times[side].append(time_steps(steps[side], dtype, args.steps, device, args.clock))
        if time.perf_counter() - start > args.budget:
            break  # slow cells (bf16 without native bf16 matmuls) get fewer rounds, never none
    ratio = statistics.median(hf / ours for ours, hf in zip(times["ours"], times["HF"], strict=True))
    return Result(
        pair.family,
        dtype_name,
        pair.unit,
        pair.items_per_step,
        pair.flops_per_step,
        len(times["ours"]),
        statistics.median(times["ours"]),
        statistics.median(times["HF"]),
        ratio,
    )


def to_device(pair: Pair, device: torch.device) -> Pair:
    """Move both models and the batch onto the device."""
    pair.ours.to(device)
    pair.hf.to(device)
    pair.batch = {k: v.to(device) for k, v in pair.batch.items()}
    return pair
