"""`tetraformer attention`: a PNG of where a checkpoint's attention goes, over an image's patches or a text's tokens."""

from __future__ import annotations

import argparse
import dataclasses
import logging
from pathlib import Path
from typing import Any

import torch

from tetraformer.cli.parser import CommandParser
from tetraformer.cli.task_loading import load_task, require_tokenizer
from tetraformer.core.attention_maps import (
    Weights,
    attention_rollout,
    backbone_of,
    cls_patch_map,
    image_attentions,
    patch_grid,
    text_attentions,
)
from tetraformer.core.backbones import TextEncoderDecoder
from tetraformer.errors import TetraformerError
from tetraformer.safe_loading import add_trust_flag
from tetraformer.training.base.text_generation import GenerativeTask, decoder_start_token
from tetraformer.training.reports.attention_figures import image_attention_figure, text_attention_figure

log = logging.getLogger(__name__)
KINDS = ("self", "decoder", "cross")


def attention_parser() -> CommandParser:
    """The command's flags."""
    parser = CommandParser(
        prog="tetraformer attention",
        description="Draw attention maps of a checkpoint: an image's [CLS] attention and rollout, or a text's "
        "token-by-token attention per head.",
    )
    parser.add_argument("--ckpt", required=True, help="a Tetraformer .ckpt of any task")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--image", type=Path, help="an image file (image checkpoints)")
    source.add_argument("--text", help="a text (text checkpoints)")
    source.add_argument("--text-file", type=Path, help="a file whose text is drawn (text checkpoints)")
    parser.add_argument("--layer", type=int, default=-1, help="layer to draw, from 0 (negative counts from the end)")
    parser.add_argument("--heads", default="all", help="'all' or head numbers, e.g. 0,1")
    parser.add_argument(
        "--kind",
        choices=KINDS,
        default="self",
        help="self: the (encoder's) self-attention; decoder, cross: an encoder-decoder's decoder "
        "self-attention and its attention over the source",
    )
    parser.add_argument("--target", help="encoder-decoder: the decoder's text (default: the greedy output)")
    parser.add_argument("--max-tokens", type=int, default=40, help="draw at most this many tokens per axis")
    parser.add_argument("--tokenizer", help="tokenizer folder or tokenizer.json (default: the checkpoint's own)")
    parser.add_argument("--output", type=Path, default=Path("attention.png"), help="PNG to write")
    parser.add_argument("--device", default="cpu")
    add_trust_flag(parser)
    return parser


def draw_attention(argv: list[str]) -> None:
    """`tetraformer attention --ckpt X.ckpt (--image PATH | --text "..." | --text-file F) [options]`."""
    args = attention_parser().parse_args(argv)
    if args.max_tokens < 1:
        raise TetraformerError(f"--max-tokens {args.max_tokens}: draw at least 1 token")
    for path, flag in ((args.image, "--image"), (args.text_file, "--text-file")):
        if path is not None and not path.is_file():
            raise TetraformerError(f"{flag} {path}: file not found")
    task = load_task(args.ckpt, args.device, args.tokenizer)
    is_image = hasattr(task, "image_inputs")
    if is_image and args.image is None:
        raise TetraformerError(f"{args.ckpt} is an image checkpoint ({type(task).__name__}): pass --image PATH")
    if not is_image and args.image is not None:
        raise TetraformerError(
            f"{args.ckpt} is a text checkpoint ({type(task).__name__}): pass --text or --text-file, not --image"
        )
    with torch.inference_mode():
        path = draw_image(task, args) if is_image else draw_text(task, args)
    log.info("wrote %s", path)


def draw_image(task: Any, args: argparse.Namespace) -> Path:
    """The image, the chosen layer's [CLS] attention per head, and the rollout over all layers."""
    if args.kind != "self":
        raise TetraformerError(f"--kind {args.kind} needs an encoder-decoder checkpoint; a ViT has self-attention only")
    display, pixels = task.image_inputs(args.image)  # (C, H, W) uint8, (1, C, H, W)
    backbone = backbone_of(task.net)
    weights = image_attentions(backbone, pixels.to(task.device))
    layer = pick_layer(weights, args.layer, "encoder")
    heads = pick_heads(args.heads, weights[0].shape[1])
    grid = patch_grid(backbone, pixels)
    per_head = cls_patch_map(weights[layer][0, heads], grid)  # (h, gh, gw)
    rollout = cls_patch_map(attention_rollout(weights)[0], grid)  # (gh, gw)
    title = f"{args.image.name}: layer {layer} [CLS] attention and rollout over {len(weights)} layers"
    return image_attention_figure(
        display.cpu().numpy(), per_head.float().cpu().numpy(), rollout.cpu().numpy(), args.output, title, head_ids=heads
    )


def draw_text(task: Any, args: argparse.Namespace) -> Path:
    """Token-by-token heat maps per head of one layer's self-, decoder or cross-attention."""
    require_tokenizer(task, args.ckpt)
    text = args.text if args.text is not None else args.text_file.read_text(encoding="utf-8").strip()
    backbone = backbone_of(task.net)
    encoder_decoder = isinstance(backbone, TextEncoderDecoder)
    if args.kind != "self" and not encoder_decoder:
        raise TetraformerError(
            f"--kind {args.kind} needs an encoder-decoder checkpoint; this one has self-attention only"
        )
    source = text_ids(task, getattr(task, "source_prefix", "") + text if encoder_decoder else text)  # (1, S)
    target = decoder_ids(task, text, args.target) if encoder_decoder and args.kind != "self" else None
    weights = text_attentions(backbone, source, decoder_input_ids=target)[args.kind]
    stack = "decoder" if args.kind != "self" and encoder_decoder else "encoder" if encoder_decoder else "model"
    layer = pick_layer(weights, args.layer, stack)
    heads = pick_heads(args.heads, weights[0].shape[1])
    keys = tokens_of(task.tokenizer, source[0])
    queries = keys if target is None else tokens_of(task.tokenizer, target[0])
    if args.kind == "decoder":
        keys = queries
    maps = weights[layer][0, heads].float()  # (h, T, S)
    rows, cols = min(len(queries), args.max_tokens), min(len(keys), args.max_tokens)
    note = (
        f"showing the first {args.max_tokens} of {max(len(queries), len(keys))} tokens (--max-tokens)"
        if rows < len(queries) or cols < len(keys)
        else ""
    )
    title = f"{args.kind} attention, layer {layer} of {len(weights)} ({type(task).__name__})"
    return text_attention_figure(
        keys[:cols], maps[:, :rows, :cols].cpu().numpy(), queries[:rows], title, args.output, head_ids=heads, note=note
    )


def text_ids(task: Any, text: str) -> torch.Tensor:
    """(1, T) ids of a text as the task's data tokenizes it, cut to the model's positions.

    Language models read raw text (no special tokens, as in generation); every other text task adds them.
    """
    plain = isinstance(task, GenerativeTask) and not hasattr(task.net, "encode")
    ids = task.tokenizer(text, add_special_tokens=not plain)["input_ids"]
    if not ids:
        raise TetraformerError("the text has no tokens")
    limit = task.net.cfg.max_len if task.net.cfg.absolute_positions else len(ids)
    if len(ids) > limit:
        log.warning("the text has %d tokens; the model reads the first %d", len(ids), limit)
    return torch.tensor([ids[:limit]], device=task.device)


def decoder_ids(task: Any, text: str, target: str | None) -> torch.Tensor:
    """(1, T) decoder inputs: the start token, then the target's tokens (default: the greedy output)."""
    if target is None:
        if not isinstance(task, GenerativeTask):
            raise TetraformerError(f"{type(task).__name__} does not generate text: pass --target TEXT")
        greedy = dataclasses.replace(task.generation, do_sample=False, num_beams=1)
        target = task.generate([text], greedy)[0]
    ids = task.tokenizer(target, add_special_tokens=False)["input_ids"]
    limit = task.net.cfg.max_len - 1 if task.net.cfg.absolute_positions else len(ids)
    return torch.tensor([[decoder_start_token(task.tokenizer), *ids[:limit]]], device=task.device)


def tokens_of(tokenizer: Any, ids: torch.Tensor) -> list[str]:
    """Token strings of (T,) ids, for axis labels."""
    return [str(token) for token in tokenizer.convert_ids_to_tokens(ids.tolist())]


def pick_layer(weights: Weights, layer: int, stack: str) -> int:
    """The layer index (from 0) that `--layer` names; out of range is an error saying the range."""
    n = len(weights)
    if not -n <= layer < n:
        raise TetraformerError(f"--layer {layer} is out of range: the {stack} has {n} layers (0..{n - 1} or -{n}..-1)")
    return layer % n


def pick_heads(heads: str, n_heads: int) -> list[int]:
    """Head numbers that `--heads` names ('all' or a comma list); unknown heads are an error."""
    if heads.strip() == "all":
        return list(range(n_heads))
    try:
        picked = [int(h) for h in heads.split(",") if h.strip()]
    except ValueError:
        raise TetraformerError(f"--heads {heads!r}: expected 'all' or head numbers such as 0,1") from None
    wrong = [h for h in picked if not 0 <= h < n_heads]
    if wrong or not picked:
        raise TetraformerError(f"--heads {heads}: the model has heads 0..{n_heads - 1}")
    return picked
