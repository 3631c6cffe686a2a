"""ChatLMTask: a CausalLMTask that chats (instruction tuning and preference tuning share it)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from tetraformer.core import TransformerConfig
from tetraformer.data.chat import Message, end_of_turn_id, render_prompt, with_template
from tetraformer.data.spec import DataSpec
from tetraformer.errors import ConfigError
from tetraformer.training.base.causal_lm import CausalLMTask
from tetraformer.training.base.text_generation import TextGenerationConfig

log = logging.getLogger(__name__)


class ChatLMTask(CausalLMTask):
    """A GPT (CausalLMTask's network, init_from and generation) over chats rendered with a chat template: the
    template travels in the DataSpec, a source lacking the template's special tokens grows rows for them, and
    `chat` answers a conversation (`generate --chat`).

    A prompt (`generate`, validation samples, predict) is one user turn; generation stops at the end-of-turn token.
    sample_prompts defaults to the first validation conversations' last user turns. A task adds its loss.
    """

    def __init__(self, sample_prompts: list[str] | None = None, **kwargs: Any) -> None:
        super().__init__(sample_prompts=sample_prompts, **kwargs)
        self.given_prompts = sample_prompts

    def use_spec(self, spec: DataSpec) -> None:
        """Take the data's spec; the tokenizer gets back the chat template the spec keeps."""
        super().use_spec(spec)
        with_template(self.tokenizer, dict(spec.extras))
        if self.given_prompts is None:
            self.sample_prompts = list(spec.extras.get("sample_prompts", []))

    def adapt_pretrained(
        self, cfg: TransformerConfig, state: dict[str, Tensor], spec: DataSpec
    ) -> tuple[TransformerConfig, dict[str, Tensor]]:
        """A source embedding fewer tokens than the data's tokenizer, which added special tokens to the source's own
        (the chat template's), grows a row per added token, each the mean of the source's rows, in its embedding and
        (untied) output projection, and says so when fitting. Ordinary tokens past the source's rows mean the
        tokenizer is not the source's: refused, as every task refuses it."""
        extra = spec.vocab_size - cfg.vocab_size
        if extra <= 0 or not cfg.vocab_size:
            return cfg, state
        added = self._added_tokens(cfg.vocab_size, spec)
        for key in ("embed.tokens.weight", "lm_head.proj.weight"):
            if key in state:
                rows = state[key]  # (V, D)
                state[key] = torch.cat((rows, rows.mean(0, keepdim=True).expand(extra, -1)))
        if self._trainer is not None and self._fitting():
            self._say_grown(added, cfg.vocab_size, "lm_head.proj.weight" in state)
        return cfg.replace(vocab_size=spec.vocab_size), state

    def _added_tokens(self, rows: int, spec: DataSpec) -> list[str]:
        """The data tokenizer's tokens past the source's `rows`, checked to be special tokens it added."""
        if spec.tokenizer is None:
            return [f"id {i}" for i in range(rows, spec.vocab_size)]
        specials = {i for i, token in spec.tokenizer.added_tokens_decoder.items() if token.special}
        added = spec.tokenizer.convert_ids_to_tokens(list(range(rows, spec.vocab_size)))
        ordinary = [t for i, t in enumerate(added, start=rows) if i not in specials]
        if ordinary:
            raise ConfigError(
                f"{self.init_from} embeds {rows} tokens but the data's tokenizer has {spec.vocab_size}, "
                f"{len(ordinary)} of them ordinary tokens the source never learned "
                f"({', '.join(map(repr, ordinary[:3]))}, ...): the tokenizer is not the source's; leave "
                "--data.tokenizer unset (init_from's own is used) or set it to the pretrained model's tokenizer"
            )
        return added

    def _say_grown(self, added: list[str], rows: int, untied: bool) -> None:
        """One line: the rows grown and why; a warning when LoRA keeps them frozen at the mean, where the output
        projection's row of a new token never wins a greedy choice (the model could never end its turn)."""
        grown = f"grew {len(added)} rows ({', '.join(added)}) of {self.init_from}'s {rows}-token embedding"
        why = "each the mean of its rows: the data's tokenizer added them for the chat template"
        frozen = self.lora.cfg.enabled and not (untied and "head" in self.lora.cfg.targets)
        if not frozen:
            log.info("%s%s, %s", grown, " and output projection" if untied else "", why)
            return
        fix = "add head to --model.lora.targets" if untied else "fine-tune without LoRA (the embedding is tied)"
        log.warning(
            "%s, %s; LoRA leaves them frozen at the mean, so a reply can never end greedily: %s", grown, why, fix
        )

    @property
    def chat_tokenizer(self) -> Any:
        """The tokenizer, with the spec's chat template when it has none (a `--tokenizer` given to `generate`)."""
        return with_template(self.tokenizer, dict(self.spec.extras) if self.spec is not None else {})

    def generation_inputs(self, prompts: list[str | list[Message]]) -> list[str]:
        """Each prompt (a user turn, or a conversation's turns) rendered up to the assistant's reply."""
        turns = [[{"role": "user", "content": p}] if isinstance(p, str) else p for p in prompts]
        return [render_prompt(self.chat_tokenizer, messages) for messages in turns]

    def stop_token_ids(self) -> tuple[int, ...]:
        """The end-of-turn token (data/chat.py), then eos: a reply ends at either, as a chat model's
        generation_config.json says for transformers."""
        ends = (end_of_turn_id(self.tokenizer), self.tokenizer.eos_token_id)
        return tuple(dict.fromkeys(i for i in ends if i is not None))

    def chat(
        self,
        messages: list[Message],
        config: TextGenerationConfig | None = None,
        on_text: Callable[[str], None] | None = None,
    ) -> str:
        """The assistant's reply to a conversation so far (rendered with the same template as training)."""
        return self.continue_texts([render_prompt(self.chat_tokenizer, messages)], config, on_text)[0]
