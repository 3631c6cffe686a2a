"""CheckpointLM: EleutherAI lm-evaluation-harness's model interface over a causal-LM checkpoint's own network.

Importing this module imports lm_eval (an optional dependency): the `evaluate` command imports it when it runs.
Text is encoded without special tokens, as the platform's decoders train on documents (each ended by eos) and as
`generate` encodes prompts; so does lm-eval's `hf` model on the export, whose tokenizer adds none. An empty context
is the tokenizer's bos (else its eos), as in lm-eval's `hf` model. Requests are scored in batches of similar length,
and only the scored positions go through the LM head.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from typing import Any

import torch
from lm_eval.api.instance import Instance
from lm_eval.api.model import TemplateLM
from lm_eval.models.utils import normalize_gen_kwargs
from lm_eval.utils import get_rolling_token_windows, make_disjoint_window
from torch import Tensor

from tetraformer.errors import TetraformerError
from tetraformer.training.base.text_generation import TextGenerationConfig

log = logging.getLogger(__name__)
MAX_GEN_TOKS = 256  # tokens a generation request may add when its task names no limit (lm-eval's `hf` default)
Scored = tuple[Any, list[int], list[int]]  # (request key, context ids, continuation ids): what TemplateLM hands on


class CheckpointLM(TemplateLM):
    """A generative causal-LM task module (its network, tokenizer and decoding) as an lm-eval model."""

    def __init__(self, task: Any, batch_size: int = 8) -> None:
        super().__init__()
        self.task, self.net, self.tokenizer = task, task.net.eval(), task.tokenizer
        self.batch_size = batch_size
        self._device = next(self.net.parameters()).device

    @property
    def eot_token_id(self) -> int:
        """The token that ends a document."""
        return self.tokenizer.eos_token_id

    @property
    def prefix_token_id(self) -> int:
        """The context of a continuation scored from nothing (and of a rolling window's first token)."""
        bos = self.tokenizer.bos_token_id
        return bos if bos is not None else self.tokenizer.eos_token_id

    @property
    def max_length(self) -> int:
        """Tokens the network takes at once: its config's max_len."""
        return self.net.cfg.max_len

    def tok_encode(self, string: str, add_special_tokens: bool | None = None, **kwargs: Any) -> list[int]:
        """Token ids of a text, without special tokens unless asked for."""
        return self.tokenizer.encode(string, add_special_tokens=bool(add_special_tokens))

    def _loglikelihood_tokens(
        self, requests: list[Scored], disable_tqdm: bool = False, **kwargs: Any
    ) -> list[tuple[float, bool]]:
        """(summed log-probability, whether greedy decoding gives it) of each continuation after its context."""
        longest = max((len(request[2]) for request in requests), default=0)
        if longest > self.max_length:
            raise TetraformerError(
                f"a task's answer of {longest} tokens is longer than the {self.max_length} positions the model takes"
            )
        order = sorted(range(len(requests)), key=lambda i: -len(requests[i][1]) - len(requests[i][2]))
        results: list[tuple[float, bool]] = [(0.0, False)] * len(requests)
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            scored = self._score([requests[i][1] for i in chunk], [requests[i][2] for i in chunk])
            for i, result in zip(chunk, scored, strict=True):
                results[i] = result
        return results

    @torch.no_grad()
    def _score(self, contexts: list[list[int]], continuations: list[list[int]]) -> list[tuple[float, bool]]:
        """Score one batch: inputs right-padded (causal attention keeps pads out of real positions), cut on the left
        to max_length tokens; the LM head runs on each row's continuation positions only."""
        pairs = zip(contexts, continuations, strict=True)
        inputs = [(ctx + cont)[-(self.max_length + 1) :][:-1] for ctx, cont in pairs]  # the last token is not fed
        hidden = self.net(padded(inputs, self.device), features_only=True)  # (B, T, D)
        spans = [(len(inp) - len(cont), len(inp)) for inp, cont in zip(inputs, continuations, strict=True)]
        picked = torch.cat([hidden[row, a:b] for row, (a, b) in enumerate(spans)])  # (sum C, D)
        logprobs = self.net.lm_head(picked).float().log_softmax(dim=-1)  # (sum C, V)
        targets = torch.tensor([t for cont in continuations for t in cont], device=self.device)  # (sum C,)
        chosen = logprobs.gather(1, targets[:, None])[:, 0]  # (sum C,)
        greedy = logprobs.argmax(dim=-1) == targets  # (sum C,)
        sizes = [len(cont) for cont in continuations]
        return [
            (float(ll.sum()), bool(hit.all())) for ll, hit in zip(chosen.split(sizes), greedy.split(sizes), strict=True)
        ]

    def loglikelihood_rolling(self, requests: list[Instance], disable_tqdm: bool = False) -> list[float]:
        """Log-probability of each whole text, in disjoint windows of max_length tokens (lm-eval's perplexity)."""
        windows: list[Scored] = []
        owners: list[int] = []
        for index, (text,) in enumerate(request.args for request in requests):
            tokens = self.tok_encode(text)
            for context, target in map(
                make_disjoint_window, get_rolling_token_windows(tokens, self.prefix_token_id, self.max_length, 1)
            ):
                windows.append((None, context, target))
                owners.append(index)
        totals = [0.0] * len(requests)
        for owner, (logprob, _) in zip(owners, self._loglikelihood_tokens(windows), strict=True):
            totals[owner] += logprob
        return totals

    def generate_until(self, requests: list[Instance], disable_tqdm: bool = False) -> list[str]:
        """Each request's continuation, decoded by the task's generation stack with the request's settings; requests
        with the same settings decode in batches."""
        groups: dict[str, list[int]] = {}
        for index, request in enumerate(requests):
            groups.setdefault(json.dumps(request.args[1], sort_keys=True, default=str), []).append(index)
        texts = [""] * len(requests)
        for indices in groups.values():
            config = self.decoding(requests[indices[0]].args[1])
            for start in range(0, len(indices), self.batch_size):
                chunk = indices[start : start + self.batch_size]
                contexts = [self._fitted(requests[i].args[0], config.max_new_tokens) for i in chunk]
                for i, text in zip(chunk, self.task.continue_texts(contexts, config), strict=True):
                    texts[i] = text
        return texts

    def decoding(self, gen_kwargs: dict[str, Any]) -> TextGenerationConfig:
        """A request's generation_kwargs (`until`, `max_gen_toks`, `do_sample`, ...) as the task's decoding options;
        kwargs the platform's decoding has no field for are logged and left out."""
        options = dict(normalize_gen_kwargs(dict(gen_kwargs), MAX_GEN_TOKS))
        settings: dict[str, Any] = {
            "max_new_tokens": options.pop("max_gen_toks"),
            "do_sample": bool(options.pop("do_sample", False)),
            "stop": [s for s in options.pop("until", None) or [] if s],
        }
        temperature = options.pop("temperature", 0.0)
        if settings["do_sample"] and temperature:
            settings["temperature"] = temperature
        known = {f.name for f in dataclasses.fields(TextGenerationConfig)}
        settings.update({k: v for k, v in options.items() if k in known})
        ignored = sorted(set(options) - known)
        if ignored:
            log.warning("generation_kwargs %s have no decoding option here: left out", ", ".join(ignored))
        return TextGenerationConfig(**settings)

    def _fitted(self, context: str, max_new_tokens: int) -> str:
        """The context, its first tokens cut where it leaves fewer than `max_new_tokens` positions (with a warning)."""
        room = self.max_length - max_new_tokens
        tokens = self.tok_encode(context)
        if room < 1 or len(tokens) <= room:
            return context
        log.warning("a context of %d tokens cut to its last %d (max_length %d)", len(tokens), room, self.max_length)
        return self.tokenizer.decode(tokens[-room:])


def padded(rows: list[list[int]], device: torch.device) -> Tensor:
    """(B, T) right-padded ids."""
    ids = torch.zeros(len(rows), max(map(len, rows)), dtype=torch.long, device=device)
    for row, tokens in enumerate(rows):
        ids[row, : len(tokens)] = torch.tensor(tokens)
    return ids
