"""The task's loss: assistant tokens only, and the same whether examples are padded or packed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from tasks.instruction_tuning.module import InstructionTuning
from tetraformer.core import CausalLM, TransformerConfig
from tetraformer.data import IGNORE_INDEX, train_tokenizer
from tetraformer.data.chat import chat_ready
from tetraformer.data.packed_examples import PackedBins, PackedExamples, PaddedExamples
from tetraformer.data.spec import DataSpec
from tetraformer.errors import ConfigError


def task(cfg: TransformerConfig) -> InstructionTuning:
    """The task module with a tiny network of its own (no data needed to compute a loss)."""
    module = InstructionTuning(arch=cfg)
    module.net = CausalLM(cfg)
    return module


def examples(n: int) -> list[dict[str, list[int]]]:
    """Shifted examples of random lengths whose labels are random ids on a random stretch, IGNORE_INDEX elsewhere."""
    rows = []
    for _ in range(n):
        length = int(torch.randint(4, 20, ()))
        ids = torch.randint(3, 100, (length,)).tolist()
        start = int(torch.randint(1, length - 1, ()))
        labels = [IGNORE_INDEX] * start + torch.randint(3, 100, (length - start,)).tolist()
        rows.append({"input_ids": ids, "labels": labels})
    return rows


def test_packed_and_padded_batches_give_the_same_loss(tiny_config: Callable[..., TransformerConfig]) -> None:
    """Packing examples (positions restarting, no attention across them) changes neither the loss nor its tokens."""
    module = task(tiny_config(position="rotary")).eval()
    rows = examples(7)
    padded = PaddedExamples(0)(rows)
    bins = PackedBins(rows, capacity=32)
    packed = PackedExamples(0)([bins[i] for i in range(len(bins))])
    assert len(bins) < len(rows)  # several examples share a row
    with torch.no_grad():
        a, b = module.compute(padded, "val"), module.compute(packed, "val")
    torch.testing.assert_close(a["loss"], b["loss"], atol=1e-5, rtol=1e-5)
    assert (a["targets"] != IGNORE_INDEX).sum() == (b["targets"] != IGNORE_INDEX).sum()


def test_prompt_tokens_carry_no_loss(tiny_config: Callable[..., TransformerConfig]) -> None:
    """The loss's gradient is zero at every position whose target is a prompt token, and not at the assistant's."""
    module = task(tiny_config())
    batch = PaddedExamples(0)(examples(3))
    states = module.net(batch["input_ids"], features_only=True).detach().requires_grad_()  # (B, T, D)
    module.net.forward = lambda *args, **kwargs: states  # the states the compute's head takes, for their gradient
    module.compute(batch, "train")["loss"].backward()
    per_position = states.grad.abs().sum(-1)  # (B, T)
    ignored = batch["labels"] == IGNORE_INDEX
    assert torch.all(per_position[ignored] == 0)
    assert torch.all(per_position[~ignored] > 0)


def char_tokenizer(tmp_path: Path) -> Any:
    """A character tokenizer of a few words (no chat tokens yet)."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the quick brown fox jumps over the lazy dog\n" * 3, encoding="utf-8")
    return train_tokenizer([corpus], "char", 100, tmp_path / "tokenizer")


def test_a_source_grows_rows_for_the_chat_tokens(tiny_config: Callable[..., TransformerConfig], tmp_path: Path) -> None:
    """init_from a model whose tokenizer gained <|im_start|>/<|im_end|>: two new rows, the old ones kept."""
    tokenizer = char_tokenizer(tmp_path)
    rows = len(tokenizer)
    source_cfg = tiny_config(tie_embeddings=False).replace(vocab_size=rows)
    source = CausalLM(source_cfg)
    module = InstructionTuning(arch=source_cfg)
    spec = DataSpec(tokenizer=chat_ready(tokenizer), vocab_size=rows + 2)
    cfg, state = module.adapt_pretrained(source_cfg, dict(source.state_dict()), spec)
    net = CausalLM(cfg)
    net.load_state_dict(state)
    assert cfg.vocab_size == rows + 2 and net.embed.tokens.weight.shape == (rows + 2, cfg.d_model)
    for name in ("embed.tokens.weight", "lm_head.proj.weight"):
        old = source.state_dict()[name]
        torch.testing.assert_close(state[name][:rows], old)
        torch.testing.assert_close(state[name][rows:], old.mean(0).expand(2, -1))
    ids = torch.randint(0, rows, (1, 6))
    with torch.no_grad():
        torch.testing.assert_close(net(ids)[..., :rows], source(ids))  # old tokens' logits are unchanged


def test_a_tokenizer_that_is_not_the_sources_is_refused(
    tiny_config: Callable[..., TransformerConfig], tmp_path: Path
) -> None:
    """Ordinary tokens past the source's rows (another tokenizer than the source's) grow nothing: one line."""
    tokenizer = chat_ready(char_tokenizer(tmp_path))
    source_cfg = tiny_config(tie_embeddings=False).replace(vocab_size=len(tokenizer) - 7)  # 5 letters short
    module = InstructionTuning(arch=source_cfg, init_from="small_lm.ckpt")
    spec = DataSpec(tokenizer=tokenizer, vocab_size=len(tokenizer))
    with pytest.raises(ConfigError, match=r"small_lm.ckpt embeds \d+ tokens .* 5 of them ordinary tokens .* not the "):
        module.adapt_pretrained(source_cfg, dict(CausalLM(source_cfg).state_dict()), spec)
