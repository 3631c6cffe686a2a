"""Text in, text out: tokenized prompts, the core's cached generation, stop strings and streaming."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

from tetraformer.core.generation import GenerationConfig, generate

log = logging.getLogger(__name__)


@dataclass
class TextGenerationConfig:
    """Decoding options a user sets from a config or the command line."""

    max_new_tokens: int = 64
    do_sample: bool = True
    temperature: float = 0.8
    top_k: int = 0
    top_p: float = 1.0
    num_beams: int = 1
    length_penalty: float = 1.0
    seed: int | None = 0
    stop: list[str] = field(default_factory=list)  # generation of a row ends at the first of these strings


def generate_text(
    net: nn.Module,
    tokenizer: Any,
    prompts: list[str],
    config: TextGenerationConfig,
    on_text: Callable[[str], None] | None = None,
) -> list[str]:
    """Generate a continuation (decoder-only) or an output (encoder-decoder) for each prompt."""
    device = next(net.parameters()).device
    encoder_decoder = hasattr(net, "encode")
    tokenizer.padding_side = "right" if encoder_decoder else "left"
    batch = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=encoder_decoder)
    ids, mask = batch["input_ids"].to(device), batch["attention_mask"].to(device).bool()
    max_new = _fit_length(net, ids.shape[1], config.max_new_tokens, encoder_decoder)
    streamer = _Streamer(tokenizer, on_text) if on_text is not None and len(prompts) == 1 else None
    core = GenerationConfig(
        max_new_tokens=max_new, do_sample=config.do_sample and config.num_beams == 1,
        temperature=config.temperature, top_k=config.top_k, top_p=config.top_p, num_beams=config.num_beams,
        length_penalty=config.length_penalty, seed=config.seed, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id or 0, decoder_start_token_id=_start_token(tokenizer),
        stop=_stop_hook(tokenizer, config.stop) if config.stop else None,
        on_token=streamer.push if streamer is not None and config.num_beams == 1 else None,
    )  # fmt: skip
    out = generate(net, ids, mask, core)
    new = out if encoder_decoder else out[:, ids.shape[1] :]
    texts = [_cut(tokenizer.decode(row, skip_special_tokens=True), config.stop) for row in new.tolist()]
    if on_text is not None and streamer is None:
        for text in texts:
            on_text(text + "\n")
    return texts


def _fit_length(net: nn.Module, prompt_len: int, max_new: int, encoder_decoder: bool) -> int:
    """max_new_tokens capped so the prompt and the output fit an absolute position table."""
    if not net.cfg.absolute_positions:
        return max_new
    limit = net.cfg.max_len - (0 if encoder_decoder else prompt_len)
    if limit < 1:
        raise ValueError(f"the prompt has {prompt_len} tokens; the model handles at most {net.cfg.max_len}")
    if max_new > limit:
        log.warning(
            "max_new_tokens %d capped at %d: the model handles %d positions", max_new, limit, net.cfg.max_len
        )
    return min(max_new, limit)


def _start_token(tokenizer: Any) -> int:
    """First decoder input of an encoder-decoder: BOS if the tokenizer has one, else PAD (as T5 does)."""
    for token_id in (tokenizer.bos_token_id, tokenizer.pad_token_id):
        if token_id is not None:
            return token_id
    return 0


def _stop_hook(tokenizer: Any, stops: list[str]) -> Callable[[Tensor], Tensor]:
    """A per-row "done" test: the decoded new text contains one of the stop strings."""

    def done(generated: Tensor) -> Tensor:
        texts = tokenizer.batch_decode(generated.tolist(), skip_special_tokens=True)
        return torch.tensor([any(s in t for s in stops) for t in texts], device=generated.device)

    return done


def _cut(text: str, stops: list[str]) -> str:
    """Text up to (not including) the first stop string."""
    cut = min((text.index(s) for s in stops if s in text), default=len(text))
    return text[:cut]


class _Streamer:
    """Turns a stream of token ids into a stream of text pieces (decoding the whole prefix each time)."""

    def __init__(self, tokenizer: Any, on_text: Callable[[str], None]) -> None:
        self.tokenizer, self.on_text, self.ids, self.sent = tokenizer, on_text, [], 0

    def push(self, tokens: Tensor) -> None:
        """Append one step's token and emit the newly decoded text."""
        self.ids.append(int(tokens[0]))
        text = self.tokenizer.decode(self.ids, skip_special_tokens=True)
        if len(text) > self.sent and not text.endswith("\ufffd"):  # wait for whole UTF-8 characters
            self.on_text(text[self.sent :])
            self.sent = len(text)
