"""Text in, text out: tokenized prompts, the core's cached generation (in accel's decoding layouts), stop strings
and streaming."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, Protocol, runtime_checkable

import torch
from torch import Tensor, nn

from tetraformer.accel import decoding
from tetraformer.core.generation import GenerationConfig, generate
from tetraformer.data.tokenizer import decoder_start_token
from tetraformer.errors import above, at_least, require
from tetraformer.training.base.compile import eager_decoding

log = logging.getLogger(__name__)


@dataclass
class TextGenerationConfig:
    """Decoding options a user sets from a config (`model.generation`) or the `generate` command's flags.

    The one description of these options: `generate` builds a flag per field (`max_new_tokens` ->
    `--max-new-tokens`, the metadata's `help`, and `flag` for a bool's switch), and `generate_text`
    hands every field but `stop` to the core's GenerationConfig under the same name.
    """

    max_new_tokens: int = field(default=64, metadata={"help": "tokens to generate after each prompt"})
    do_sample: bool = field(
        default=True,
        metadata={"help": "pick the most likely token (no sampling; one beam unless --num-beams)", "flag": "--greedy"},
    )
    temperature: float = field(default=0.8, metadata={"help": "sampling temperature; lower is more certain"})
    top_k: int = field(default=0, metadata={"help": "sample among the k most likely tokens (0: all)"})
    top_p: float = field(default=1.0, metadata={"help": "sample among the most likely tokens up to mass p"})
    num_beams: int = field(default=1, metadata={"help": "beam search width (1: sampling or greedy)"})
    length_penalty: float = field(default=1.0, metadata={"help": "beam score = log-prob / length ** this"})
    seed: int | None = field(default=0, metadata={"help": "seed of the sampling"})
    stop: list[str] = field(
        default_factory=list, metadata={"help": r"stop string, \n and \t escapes allowed (repeatable)"}
    )  # generation of a row ends at the first of these strings

    def __post_init__(self) -> None:
        """Reject settings that cannot generate: an OptionError names the field."""
        at_least(self, 1, max_new_tokens=self.max_new_tokens, num_beams=self.num_beams)
        at_least(self, 0, top_k=self.top_k)
        above(self, 0, temperature=self.temperature)
        require(self, "top_p", self.top_p, 0 < self.top_p <= 1, "must be more than 0 and at most 1")


@runtime_checkable
class GenerativeTask(Protocol):
    """A task that turns text prompts into text: the `generate` command and validation samples use it."""

    generation: TextGenerationConfig  # the task's default decoding options
    sample_prompts: list[str]  # prompts continued at each validation for the samples table

    def generate(
        self,
        prompts: list[str],
        config: TextGenerationConfig | None = None,
        on_text: Callable[[str], None] | None = None,
    ) -> list[str]:
        """One output text per prompt; `on_text` receives a single prompt's text as it comes."""
        ...

    def stop_token_ids(self) -> tuple[int, ...]:
        """The tokens a generated text ends at."""
        ...


class GeneratesText:
    """TaskModule mixin: `generate` (GenerativeTask) decodes with the task's network, tokenizer and `generation`.

    Mixed in before TaskModule; the network decodes in eval mode and gets back the mode it had.
    """

    net: nn.Module
    tokenizer: Any
    generation: TextGenerationConfig

    def generation_inputs(self, prompts: list[str]) -> list[str]:
        """The texts the network decodes from: the prompts as they are (a task may complete them)."""
        return prompts

    def generate(
        self,
        prompts: list[str],
        config: TextGenerationConfig | None = None,
        on_text: Callable[[str], None] | None = None,
    ) -> list[str]:
        """One output text per prompt (a continuation, or an encoder-decoder's output), decoded in eval mode."""
        return self.continue_texts(self.generation_inputs(prompts), config, on_text)

    def stop_token_ids(self) -> tuple[int, ...]:
        """The tokens that end a generated text: the tokenizer's eos (a task may stop at others too); an export's
        generation_config.json names the same ones."""
        eos = self.tokenizer.eos_token_id
        return (eos,) if eos is not None else ()

    def continue_texts(
        self,
        inputs: list[str],
        config: TextGenerationConfig | None = None,
        on_text: Callable[[str], None] | None = None,
    ) -> list[str]:
        """One output text per network input text, decoded in eval mode."""
        was_training = self.training  # type: ignore[attr-defined]
        self.eval()  # type: ignore[attr-defined]
        try:
            stops = self.stop_token_ids() or None
            return generate_text(self.net, self.tokenizer, inputs, config or self.generation, on_text, stops)
        finally:
            self.train(was_training)  # type: ignore[attr-defined]


def generate_text(
    net: nn.Module,
    tokenizer: Any,
    prompts: list[str],
    config: TextGenerationConfig,
    on_text: Callable[[str], None] | None = None,
    eos_token_id: int | tuple[int, ...] | None = None,
) -> list[str]:
    """Generate a continuation (decoder-only) or an output (encoder-decoder) for each prompt.

    `on_text` gets the text of each prompt in order: streamed piece by piece for one prompt decoded
    token by token (sampling or greedy), else whole once decoding is done (beams, batches). A row ends at
    `eos_token_id`, or at any of several (default: the tokenizer's eos).
    """
    device = next(net.parameters()).device
    encoder_decoder = hasattr(net, "encode")
    tokenizer.padding_side = "right" if encoder_decoder else "left"
    batch = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=encoder_decoder)
    ids, mask = batch["input_ids"].to(device), batch["attention_mask"].to(device).bool()
    streams = on_text is not None and len(prompts) == 1 and config.num_beams == 1
    streamer = _Streamer(tokenizer, on_text) if streams else None
    options = {f.name: getattr(config, f.name) for f in fields(config) if f.name != "stop"}  # same names
    options["max_new_tokens"] = _fit_length(net, ids.shape[1], config.max_new_tokens, encoder_decoder)
    options["do_sample"] = config.do_sample and config.num_beams == 1
    core = GenerationConfig(
        **options,
        eos_token_id=eos_token_id if eos_token_id is not None else tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id or 0,
        decoder_start_token_id=decoder_start_token(tokenizer),
        stop=_stop_hook(tokenizer, config.stop) if config.stop else None,
        on_token=streamer.push if streamer is not None else None,
    )
    with eager_decoding(), decoding(net, len(ids) * config.num_beams):
        out = generate(net, ids, mask, core)
    new = out if encoder_decoder else out[:, ids.shape[1] :]
    texts = [_cut(tokenizer.decode(row, skip_special_tokens=True), config.stop) for row in new.tolist()]
    if on_text is not None and streamer is None:
        for text in texts:
            on_text(text)
    return texts


def _fit_length(net: nn.Module, prompt_len: int, max_new: int, encoder_decoder: bool) -> int:
    """max_new_tokens capped so the prompt and the output fit an absolute position table."""
    if not net.cfg.absolute_positions:
        return max_new
    limit = net.cfg.max_len - (0 if encoder_decoder else prompt_len)
    if limit < 1:
        raise ValueError(f"the prompt has {prompt_len} tokens; the model handles at most {net.cfg.max_len}")
    if max_new > limit:
        log.warning("max_new_tokens %d capped at %d: the model handles %d positions", max_new, limit, net.cfg.max_len)
    return min(max_new, limit)


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
