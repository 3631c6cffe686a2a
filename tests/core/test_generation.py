"""Generation: sampling filters, greedy, beam search, KV-cache parity, padding invariance, EOS and hooks."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import get_args

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.testing import assert_close

from tetraformer.core import (
    GenerationConfig,
    KVCache,
    StackOutput,
    apply_temperature,
    beam_search,
    generate,
    top_k_filter,
    top_p_filter,
)
from tetraformer.core.config import Position

POSITIONS = get_args(Position)
VOCAB = 50
TOL = dict(atol=1e-4, rtol=1e-4)
PAD, BOS, EOS = 0, 1, 2

# --- helpers ---------------------------------------------------------------------------------------


def scramble(model: nn.Module, std: float = 0.3) -> nn.Module:
    """Large random weights, so outputs depend strongly on every token and position (not a flat init)."""
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, std)
    return model


@contextmanager
def recorded_logits(model: nn.Module) -> Iterator[list[Tensor]]:
    """Collect every (N, V) output of model.lm_head while generating."""
    seen: list[Tensor] = []
    handle = model.lm_head.register_forward_hook(lambda _m, _i, out: seen.append(out.detach().clone()))
    try:
        yield seen
    finally:
        handle.remove()


def uncached_greedy(model: nn.Module, ids: Tensor, steps: int) -> tuple[Tensor, Tensor]:
    """Greedy reference rerunning the full forward pass (no cache) every step: new ids, (steps, B, V) logits."""
    seq2seq = hasattr(model, "encode")
    seq = torch.full((len(ids), 1), PAD) if seq2seq else ids  # decoder input or the growing prompt
    logits_per_step = []
    for _ in range(steps):
        logits = (model(ids, seq) if seq2seq else model(seq))[:, -1]  # (B, V)
        logits_per_step.append(logits)
        seq = torch.cat((seq, logits.argmax(-1, keepdim=True)), dim=1)
    return seq[:, -steps:], torch.stack(logits_per_step)


def reference_beam(logprobs: Callable[[Tensor], Tensor], start: Tensor, beams: int, steps: int) -> Tensor:
    """Plain beam search without EOS or cache: rescore every hypothesis from scratch each step."""
    hyps = [(start, 0.0)]
    for _ in range(steps):
        cands = [
            (torch.cat((seq, tok[None])), score + lp.item())
            for seq, score in hyps
            for lp, tok in zip(*logprobs(seq).topk(beams), strict=True)
        ]
        hyps = sorted(cands, key=lambda c: -c[1])[:beams]
    return hyps[0][0]


class BigramLM(nn.Module):
    """A handmade decoder-only stub: next-token log-probs depend only on the last token, via a (V, V) table."""

    def __init__(self, probs: dict[int, dict[int, float]], vocab: int = 12) -> None:
        super().__init__()
        table = torch.full((vocab, vocab), 1e-6)
        for prev, nexts in probs.items():
            for tok, p in nexts.items():
                table[prev, tok] = p
        self.logprobs = (table / table.sum(-1, keepdim=True)).log()  # (V, V)
        self.lm_head = nn.Linear(vocab, vocab, bias=False)
        self.lm_head.weight.data = self.logprobs.T.clone()  # one-hot(prev) @ W.T = logprobs[prev]

    def new_cache(self) -> KVCache:
        """The stub keeps no state, so an empty cache suffices."""
        return KVCache.empty(0)

    def forward_features(self, input_ids: Tensor, *args: object, **kw: object) -> StackOutput:
        """(B, T) ids -> (B, T, V) one-hot features."""
        return StackOutput(F.one_hot(input_ids, self.lm_head.in_features).float())

    def seq_logprob(self, prev: int, tokens: list[int]) -> float:
        """Total log-probability of tokens following prev."""
        return sum(self.logprobs[a, b].item() for a, b in zip([prev, *tokens[:-1]], tokens, strict=True))


class PrefixSumLM(nn.Module):
    """A decoder-only stub whose next-token law depends on the whole prefix (its id sum mod V).

    The running sum lives in a KVCache layer, so beam search gives wrong answers unless it reorders
    the cache with its hypotheses.
    """

    def __init__(self, vocab: int = 16) -> None:
        super().__init__()
        self.table = torch.randn(vocab, vocab) * 3  # (state, V) logits
        self.table[:, PAD] = -30.0  # never emit the pad id, which would leave the state unchanged
        self.lm_head = nn.Identity()

    def new_cache(self) -> KVCache:
        """One cache layer holding each row's running sum."""
        return KVCache.empty(1)

    def forward_features(self, input_ids: Tensor, mask: Tensor | None, cache: KVCache, **kw: Tensor) -> StackOutput:
        """(B, T) new ids -> (B, T, V) logits of each prefix's state (pads are 0, so they add nothing)."""
        layer = cache.layers[0]
        sums = input_ids.cumsum(dim=1)  # (B, T)
        if layer.self_kv is not None:
            sums = sums + layer.self_kv[0].flatten().long()[:, None]  # plus the sum seen before
        state = sums[:, -1].float().view(-1, 1, 1, 1)  # stored like keys/values, so reorder moves it
        layer.self_kv = (state, state)
        return StackOutput(self.table[sums % len(self.table)])

    def logprobs(self, seq: Tensor) -> Tensor:
        """(V,) next-token log-probs after a whole sequence, computed from scratch."""
        return self.table[int(seq.sum()) % len(self.table)].log_softmax(-1)


def trap_lm() -> BigramLM:
    """Greedy takes 3 (p .55) then faces 7 equal choices; beam search finds 4 -> 5 (p .45 * .95)."""
    spread = dict.fromkeys(range(5, 12), 1 / 7)
    ends = {t: {EOS: 0.9, 3: 0.1} for t in range(5, 12)}
    return BigramLM({BOS: {3: 0.55, 4: 0.45}, 3: spread, 4: {5: 0.95, 6: 0.05}, **ends}).eval()


# --- sampling filters ------------------------------------------------------------------------------


def test_top_k_keeps_exactly_k_largest_even_with_ties() -> None:
    logits = torch.tensor([[3.0, 1.0, 3.0, 3.0, -1.0, 0.0], [0.0, 5.0, 4.0, 3.0, 2.0, 1.0]])
    out = top_k_filter(logits, 2)
    assert torch.isfinite(out).sum(-1).tolist() == [2, 2]
    assert set(torch.isfinite(out[1]).nonzero().flatten().tolist()) == {1, 2}
    assert (out[0][torch.isfinite(out[0])] == 3.0).all()  # kept values are unchanged
    assert torch.equal(top_k_filter(logits, 0), logits)


@pytest.mark.parametrize(
    ("p", "kept"), [(0.3, 1), (0.5, 1), (0.51, 2), (0.75, 2), (0.76, 3), (0.875, 3), (0.9, 4), (1.0, 4)]
)
def test_top_p_keeps_smallest_set_reaching_p(p: float, kept: int) -> None:
    probs = torch.tensor([[0.125, 0.5, 0.125, 0.25]])  # exact in binary: boundaries are exact
    out = top_p_filter(probs.log(), p)
    assert torch.isfinite(out).sum().item() == kept
    order = probs[0].argsort(descending=True)
    assert torch.isfinite(out[0, order[:kept]]).all()  # the kept set is the most likely tokens


def test_top_p_always_keeps_one_token() -> None:
    logits = torch.tensor([[0.0, 0.0, 0.0, 0.0]])
    assert torch.isfinite(top_p_filter(logits, 1e-6)).sum().item() == 1


def test_temperature_scales_and_rejects_zero() -> None:
    logits = torch.tensor([[2.0, -4.0]])
    assert_close(apply_temperature(logits, 0.5), logits * 2)
    with pytest.raises(ValueError):
        apply_temperature(logits, 0.0)


# --- KV cache parity and padding invariance --------------------------------------------------------


@pytest.mark.parametrize("position", POSITIONS)
@pytest.mark.parametrize("family", ["causal", "seq2seq"])
def test_cached_generation_equals_uncached(family: str, position: str, tiny_model: Callable) -> None:
    model = scramble(tiny_model(family, vocab_size=VOCAB, position=position))
    ids = torch.randint(3, VOCAB, (3, 6))
    with recorded_logits(model) as seen:
        out = generate(model, ids, config=GenerationConfig(max_new_tokens=8, decoder_start_token_id=PAD))
    ref, ref_logits = uncached_greedy(model, ids, 8)
    assert torch.equal(out[:, -8:], ref)
    assert_close(torch.stack(seen), ref_logits, **TOL)


def _ragged_batch(lengths: list[int], left: bool) -> tuple[list[Tensor], Tensor, Tensor]:
    """Prompts of the given lengths, alone and as one padded batch with its mask."""
    prompts = [torch.randint(3, VOCAB, (n,)) for n in lengths]
    width = max(lengths)
    ids = torch.full((len(prompts), width), PAD)
    mask = torch.zeros(len(prompts), width, dtype=torch.bool)
    for i, p in enumerate(prompts):
        cols = slice(width - len(p), width) if left else slice(0, len(p))
        ids[i, cols], mask[i, cols] = p, True
    return prompts, ids, mask


@pytest.mark.parametrize("left", [True, False], ids=["left_padded", "right_padded"])
@pytest.mark.parametrize("position", POSITIONS)
@pytest.mark.parametrize("family", ["causal", "seq2seq"])
def test_padded_batch_equals_single_prompts(family: str, position: str, left: bool, tiny_model: Callable) -> None:
    model = scramble(tiny_model(family, vocab_size=VOCAB, position=position))
    prompts, ids, mask = _ragged_batch([5, 2, 8], left)
    config = GenerationConfig(max_new_tokens=6)
    with recorded_logits(model) as seen:
        out = generate(model, ids, mask, config)
    for i, prompt in enumerate(prompts):
        with recorded_logits(model) as alone:
            single = generate(model, prompt[None], config=config)
        assert torch.equal(out[i, -6:], single[0, -6:])
        assert_close(torch.stack(seen)[:, i], torch.cat(alone), **TOL)
        if family == "causal":
            assert torch.equal(out[i, -6 - len(prompt) : -6], prompt)  # prompt kept, pads moved left


def test_position_ids_override_offset(tiny_model: Callable) -> None:
    model = tiny_model("causal", vocab_size=VOCAB, position="learned")
    ids = torch.randint(3, VOCAB, (2, 4))
    shifted = model.embed(ids, position_ids=torch.arange(3, 7).expand(2, 4))
    assert_close(shifted, model.embed(ids, offset=3))
    assert not torch.allclose(shifted, model.embed(ids))


# --- greedy, sampling and seeds --------------------------------------------------------------------


def test_same_seed_same_samples_different_seed_different(tiny_model: Callable) -> None:
    model = tiny_model("causal", vocab_size=VOCAB)  # small init: a nearly flat next-token distribution
    ids = torch.randint(3, VOCAB, (4, 3))

    def run(seed: int) -> Tensor:
        return generate(model, ids, config=GenerationConfig(max_new_tokens=12, do_sample=True, seed=seed))

    assert torch.equal(run(7), run(7))
    assert not torch.equal(run(7), run(8))


@pytest.mark.parametrize("family", ["causal", "seq2seq"])
def test_near_zero_temperature_equals_greedy(family: str, tiny_model: Callable) -> None:
    model = scramble(tiny_model(family, vocab_size=VOCAB))
    ids = torch.randint(3, VOCAB, (3, 5))
    greedy = generate(model, ids, config=GenerationConfig(max_new_tokens=8))
    cold = GenerationConfig(max_new_tokens=8, do_sample=True, temperature=1e-5, seed=0)
    assert torch.equal(generate(model, ids, config=cold), greedy)


def test_top_k_one_sampling_equals_greedy(tiny_model: Callable) -> None:
    model = scramble(tiny_model("causal", vocab_size=VOCAB))
    ids = torch.randint(3, VOCAB, (3, 5))
    config = GenerationConfig(max_new_tokens=8, do_sample=True, temperature=2.0, top_k=1, seed=3)
    assert torch.equal(generate(model, ids, config=config), generate(model, ids, config=GenerationConfig(8)))


# --- EOS, stop hook, streaming ---------------------------------------------------------------------


def test_eos_stops_row_and_pads_after_it() -> None:
    model = trap_lm()
    prompts = torch.tensor([[BOS], [5]])  # row 0: 3, 5, EOS; row 1: EOS at once
    out = generate(model, prompts, config=GenerationConfig(max_new_tokens=10, eos_token_id=EOS, pad_token_id=PAD))
    assert out[:, 1:].tolist() == [[3, 5, EOS], [EOS, PAD, PAD]]  # stops once every row is done


def test_any_of_several_end_tokens_stops_a_row() -> None:
    """eos_token_id as a tuple (a chat model's end of turn and eos): each row stops at the first it generates."""
    model = trap_lm()
    prompts = torch.tensor([[BOS], [4]])  # row 0: 3, 5, EOS; row 1: 5, ...
    out = generate(model, prompts, config=GenerationConfig(max_new_tokens=10, eos_token_id=(5, EOS), pad_token_id=PAD))
    assert out[:, 1:].tolist() == [[3, 5], [5, PAD]]


def test_stop_hook_stops_rows_and_sees_only_new_tokens() -> None:
    model = trap_lm()
    prompts = torch.tensor([[BOS], [4]])
    seen_widths = []

    def stop_at_five(generated: Tensor) -> Tensor:
        seen_widths.append(generated.shape[1])
        return (generated == 5).any(dim=-1)

    out = generate(model, prompts, config=GenerationConfig(max_new_tokens=10, stop=stop_at_five, pad_token_id=PAD))
    assert out[:, 1:].tolist() == [[3, 5], [5, PAD]]
    assert seen_widths == [1, 2]


def test_on_token_streams_each_step(tiny_model: Callable) -> None:
    model = scramble(tiny_model("causal", vocab_size=VOCAB))
    ids = torch.randint(3, VOCAB, (2, 4))
    streamed: list[Tensor] = []
    out = generate(model, ids, config=GenerationConfig(max_new_tokens=5, on_token=streamed.append))
    assert torch.equal(torch.stack(streamed, dim=1), out[:, 4:])


# --- beam search -----------------------------------------------------------------------------------


@pytest.mark.parametrize("family", ["causal", "seq2seq"])
def test_one_beam_equals_greedy(family: str, tiny_model: Callable) -> None:
    model = scramble(tiny_model(family, vocab_size=VOCAB))
    ids = torch.randint(3, VOCAB, (3, 5))
    eos = int(generate(model, ids, config=GenerationConfig(max_new_tokens=3))[0, -1])  # some row hits it
    config = GenerationConfig(max_new_tokens=8, eos_token_id=eos)
    greedy = generate(model, ids, config=config)
    beam = beam_search(model, ids, None, GenerationConfig(max_new_tokens=8, eos_token_id=eos, num_beams=1))
    assert torch.equal(beam, greedy)
    assert (greedy == eos).any()


def test_beam_search_beats_greedy_on_a_trap() -> None:
    model = trap_lm()
    prompt = torch.tensor([[BOS]])
    config = dict(max_new_tokens=6, eos_token_id=EOS, pad_token_id=PAD)
    greedy = generate(model, prompt, config=GenerationConfig(**config))[0, 1:].tolist()
    beam = generate(model, prompt, config=GenerationConfig(**config, num_beams=3))[0, 1:].tolist()
    assert greedy[0] == 3 and beam == [4, 5, EOS]
    assert model.seq_logprob(BOS, beam) > model.seq_logprob(BOS, greedy) + 1.0


@pytest.mark.parametrize(("length_penalty", "best"), [(0.0, [EOS]), (1.0, [3, EOS])])
def test_length_penalty_follows_hf_convention(length_penalty: float, best: list[int]) -> None:
    # [EOS]: log .5 / 1**lp;  [3, EOS]: (log .5 + log .6) / 2**lp -> lp 0 prefers short, lp 1 long
    spread = dict.fromkeys(range(4, 12), 0.05)
    model = BigramLM({BOS: {EOS: 0.5, 3: 0.5}, 3: {EOS: 0.6, **spread}})
    config = GenerationConfig(max_new_tokens=5, num_beams=2, eos_token_id=EOS, length_penalty=length_penalty)
    out = generate(model, torch.tensor([[BOS]]), config=config)
    assert out[0, 1:].tolist() == best


def test_beam_search_pads_finished_rows_and_is_batch_independent() -> None:
    model = trap_lm()
    prompts = torch.tensor([[BOS], [5]])
    config = GenerationConfig(max_new_tokens=6, num_beams=3, eos_token_id=EOS, pad_token_id=PAD)
    out = generate(model, prompts, config=config)
    assert out[:, 1:].tolist() == [[4, 5, EOS], [EOS, PAD, PAD]]
    for i in range(2):
        alone = generate(model, prompts[i : i + 1], config=config)
        assert torch.equal(out[i, : alone.shape[1]], alone[0])


@pytest.mark.parametrize("position", ["learned", "rotary", "relative"])
@pytest.mark.parametrize("family", ["causal", "seq2seq"])
def test_batched_beam_search_equals_per_row(family: str, position: str, tiny_model: Callable) -> None:
    model = scramble(tiny_model(family, vocab_size=VOCAB, position=position), std=0.15)
    prompts, ids, mask = _ragged_batch([3, 6], left=True)
    config = GenerationConfig(max_new_tokens=6, num_beams=4, eos_token_id=EOS)
    out = generate(model, ids, mask, config)
    for i, prompt in enumerate(prompts):
        alone = generate(model, prompt[None], config=config)
        new = alone.shape[1] - (len(prompt) if family == "causal" else 0)
        batch_row = out[i, ids.shape[1] :] if family == "causal" else out[i]
        assert torch.equal(batch_row[:new], alone[0, -new:])
        assert (batch_row[new:] == PAD).all()


@pytest.mark.parametrize("position", ["learned", "alibi"])
@pytest.mark.parametrize("family", ["causal", "seq2seq"])
def test_cached_beam_search_equals_uncached_reference(family: str, position: str, tiny_model: Callable) -> None:
    model = scramble(tiny_model(family, vocab_size=VOCAB, position=position), std=0.15)
    prompts, ids, mask = _ragged_batch([3, 5], left=True)
    out = generate(model, ids, mask, GenerationConfig(max_new_tokens=5, num_beams=3, length_penalty=0.0))
    for i, prompt in enumerate(prompts):
        if family == "causal":
            ref = reference_beam(lambda seq: model(seq[None])[0, -1].log_softmax(-1), prompt, 3, 5)
            assert torch.equal(out[i, -5:], ref[-5:])
        else:
            step = lambda dec, src=prompt: model(src[None], dec[None])[0, -1].log_softmax(-1)  # noqa: E731
            ref = reference_beam(step, torch.tensor([PAD]), 3, 5)
            assert torch.equal(out[i], ref[1:])


def test_beam_search_reorders_the_cache_with_its_hypotheses() -> None:
    model = PrefixSumLM()
    prompts, ids, mask = _ragged_batch([2, 4, 3], left=True)
    ids = ids % 16
    out = generate(model, ids, mask, GenerationConfig(max_new_tokens=6, num_beams=3, length_penalty=0.0))
    for i in range(len(prompts)):
        ref = reference_beam(model.logprobs, ids[i][mask[i]], 3, 6)
        assert torch.equal(out[i, -6:], ref[-6:])


def test_one_beam_equals_greedy_when_eos_is_runner_up() -> None:
    # [EOS] (p .45) would outscore greedy's path, but only top-num_beams candidates may finish
    model = BigramLM({BOS: {3: 0.5, EOS: 0.45}, 3: {4: 0.3, 5: 0.25, 6: 0.25, 7: 0.2}, 4: {8: 0.9}})
    config = dict(max_new_tokens=3, eos_token_id=EOS)
    greedy = generate(model, torch.tensor([[BOS]]), config=GenerationConfig(**config))
    beam = beam_search(model, torch.tensor([[BOS]]), None, GenerationConfig(**config, num_beams=1))
    assert torch.equal(beam, greedy) and greedy[0, 1] == 3


@pytest.mark.parametrize(("early_stopping", "best"), [(True, [3, EOS]), (False, [4, 5, EOS])])
def test_early_stopping(early_stopping: bool, best: list[int]) -> None:
    # two hypotheses finish by step 2 ([EOS], [3, EOS]); a running beam still finishes better at step 3
    model = BigramLM({BOS: {EOS: 0.4, 3: 0.35, 4: 0.25}, 3: {EOS: 0.6, 6: 0.4}, 4: {5: 0.99}, 5: {EOS: 0.99}})
    config = GenerationConfig(max_new_tokens=6, num_beams=2, eos_token_id=EOS, early_stopping=early_stopping)
    assert generate(model, torch.tensor([[BOS]]), config=config)[0, 1:].tolist() == best


def test_stop_hook_finishes_beam_hypotheses() -> None:
    model = trap_lm()
    config = GenerationConfig(max_new_tokens=6, num_beams=3, stop=lambda ids: (ids == 5).any(dim=-1))
    assert generate(model, torch.tensor([[BOS]]), config=config)[0, 1:].tolist() == [4, 5]


def test_fills_but_never_overruns_the_position_table(tiny_model: Callable) -> None:
    model = tiny_model("causal", vocab_size=VOCAB, position="learned", max_len=16)
    ids = torch.randint(3, VOCAB, (1, 10))
    assert generate(model, ids, config=GenerationConfig(max_new_tokens=7)).shape == (1, 17)
    with pytest.raises(ValueError, match="max_len"):
        generate(model, ids, config=GenerationConfig(max_new_tokens=8))


def test_config_rejects_impossible_settings() -> None:
    bad_settings = [dict(max_new_tokens=0), dict(temperature=0.0), dict(top_p=0.0), dict(num_beams=0)]
    for bad in [*bad_settings, dict(num_beams=2, do_sample=True)]:
        with pytest.raises(ValueError):
            GenerationConfig(**bad)
