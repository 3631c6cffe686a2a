"""Autoregressive generation on the KV cache for decoder-only and encoder-decoder models.

`generate` prefills the cache once, then feeds one token per step. It works on any model with:
  decoder-only:    new_cache(), forward_features(ids, mask, cache, position_ids) -> .last_hidden_state, lm_head
  encoder-decoder: new_cache(), encode(ids, mask), decode(ids, memory, mask, None, cache), lm_head
Decoder-only prompts are left-aligned (pads first) and get position ids counted over real tokens, so a
padded row decodes exactly as it would alone; encoder sources are right-aligned for the same reason.
Call `model.eval()` first: generation does not switch dropout off.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from tetraformer.core.sampling import greedy, sample


@dataclass
class GenerationConfig:
    """How to pick tokens, when to stop, and hooks for stop strings and streaming."""

    max_new_tokens: int = 32
    # --- token choice ------------------------------------------------------------------------
    do_sample: bool = False  # False: greedy (num_beams == 1) or beam search
    temperature: float = 1.0
    top_k: int = 0  # 0 keeps every token
    top_p: float = 1.0  # 1.0 keeps every token
    seed: int | None = None  # seeds a fresh torch.Generator per call; None uses the global RNG
    # --- beam search -------------------------------------------------------------------------
    num_beams: int = 1
    length_penalty: float = 1.0  # hypothesis score = sum of log-probs / length**length_penalty
    early_stopping: bool = False  # True: a row stops as soon as it has num_beams finished hypotheses
    # --- special tokens ----------------------------------------------------------------------
    eos_token_id: int | tuple[int, ...] | None = None  # a row ends at this token (or at any of these)
    pad_token_id: int = 0  # emitted by a row once it is done
    decoder_start_token_id: int = 0  # first decoder input of encoder-decoder models
    # --- hooks -------------------------------------------------------------------------------
    # (N, n_new) generated ids -> (N,) bool "row is done"; N = B, or B * 2 * num_beams candidates
    stop: Callable[[Tensor], Tensor] | None = None
    on_token: Callable[[Tensor], None] | None = None  # called with each step's (B,) tokens (not with beams)

    def __post_init__(self) -> None:
        """Reject settings that cannot generate."""
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if self.temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature}")
        if self.top_k < 0 or not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"need top_k >= 0 and 0 < top_p <= 1, got top_k={self.top_k}, top_p={self.top_p}")
        if self.num_beams < 1:
            raise ValueError(f"num_beams must be >= 1, got {self.num_beams}")
        if self.num_beams > 1 and (self.do_sample or self.on_token is not None):
            raise ValueError("beam search is deterministic and cannot stream: unset do_sample and on_token")


class CausalSession:
    """Decoder-only decoding state: the KV cache, the real-token mask and the positions of the new tokens.

    Built once for the whole run: the cache is preallocated for every position and, with padding, the
    mask and the position ids of all new tokens are laid out up front, so a step only slices them.
    """

    def __init__(
        self,
        model: nn.Module,
        input_ids: Tensor,
        attention_mask: Tensor | None,
        max_new_tokens: int,
    ) -> None:
        n, t = input_ids.shape
        self.model, self.cache = model, model.new_cache().reserve(t + max_new_tokens - 1)
        self.length, self.fed = t, 0  # positions fed so far, of which new tokens
        # mask (N, T + max_new_tokens) and positions (N, max_new_tokens) stay None without padding
        self.mask = self.positions = pos = None
        if attention_mask is not None:
            new = torch.ones(n, max_new_tokens, dtype=torch.bool, device=input_ids.device)
            self.mask = torch.cat((attention_mask.bool(), new), dim=1)  # (N, T + max_new_tokens)
            pos = position_ids(input_ids, attention_mask)  # (N, T)
            self.positions = pos[:, -1:] + 1 + torch.arange(max_new_tokens, device=pos.device)  # (N, max_new)
        self.first_logits = self._logits(input_ids, pos)

    def step(self, tokens: Tensor) -> Tensor:
        """Feed (N,) new tokens; return (N, V) next-token logits."""
        pos = self.positions[:, self.fed : self.fed + 1] if self.positions is not None else None  # (N, 1)
        self.length, self.fed = self.length + 1, self.fed + 1
        return self._logits(tokens[:, None], pos)

    def reorder(self, index: Tensor) -> None:
        """Select (and repeat) rows, as beam search does to give each beam its own row."""
        self.cache.reorder(index)
        if self.mask is not None:
            self.mask, self.positions = self.mask[index], self.positions[index]

    def reorder_beams(self, index: Tensor) -> None:
        """Rows take the cache of other rows of the same prompt (their mask and positions are the same)."""
        self.cache.reorder_beams(index)

    def _logits(self, ids: Tensor, pos: Tensor | None) -> Tensor:
        """Run the new (N, T) tokens through the model; (N, V) logits at the last one."""
        mask = self.mask[:, : self.length] if self.mask is not None else None
        h = self.model.forward_features(ids, mask, self.cache, position_ids=pos).last_hidden_state
        return self.model.lm_head(h[:, -1])


class Seq2SeqSession:
    """Encoder-decoder decoding state: the source mask and the decoder cache (with cross-attention K/V)."""

    def __init__(
        self,
        model: nn.Module,
        input_ids: Tensor,
        attention_mask: Tensor | None,
        start_id: int,
        max_new_tokens: int,
    ) -> None:
        self.model, self.mask = model, attention_mask
        self.cache = model.new_cache().reserve(max_new_tokens)  # start token, all but the last new one
        memory = model.encode(input_ids, attention_mask).last_hidden_state  # (N, S, D)
        self.first_logits = self.step(input_ids.new_full((len(input_ids),), start_id), memory)

    def step(self, tokens: Tensor, memory: Tensor | None = None) -> Tensor:
        """Feed (N,) new decoder tokens; return (N, V) next-token logits.

        Only the first step needs the memory: it fills the cache's cross-attention K/V, reused after.
        """
        h = self.model.decode(tokens[:, None], memory, self.mask, None, self.cache).last_hidden_state
        return self.model.lm_head(h[:, -1])

    def reorder(self, index: Tensor) -> None:
        """Select (and repeat) rows, as beam search does to give each beam its own row."""
        self.cache.reorder(index)
        self.mask = self.mask[index] if self.mask is not None else None

    def reorder_beams(self, index: Tensor) -> None:
        """Rows take the self-attention cache of other rows of the same source (the rest is the same)."""
        self.cache.reorder_beams(index)


Session = CausalSession | Seq2SeqSession


def position_ids(input_ids: Tensor, attention_mask: Tensor | None) -> Tensor:
    """(B, T) positions counted over real tokens (cumsum - 1, pads clamped to 0)."""
    if attention_mask is None:
        return torch.arange(input_ids.shape[1], device=input_ids.device).expand_as(input_ids)
    return (attention_mask.long().cumsum(dim=1) - 1).clamp(min=0)


def align_padding(input_ids: Tensor, attention_mask: Tensor, left: bool) -> tuple[Tensor, Tensor]:
    """Move each row's pads to the left (or right), keeping the order of its real tokens."""
    real = attention_mask.bool()
    order = (real if left else ~real).to(torch.uint8).argsort(dim=1, stable=True)  # (B, T)
    return input_ids.gather(1, order), attention_mask.gather(1, order)


@torch.no_grad()
def generate(
    model: nn.Module,
    input_ids: Tensor,
    attention_mask: Tensor | None = None,
    config: GenerationConfig | None = None,
) -> Tensor:
    """(B, T) prompts -> generated ids: (B, T + n) decoder-only (left-aligned prompt first), (B, n) enc-dec.

    n <= max_new_tokens: generation ends once every row is done (EOS or the stop hook); done rows are
    padded with pad_token_id. Encoder-decoder outputs hold only the new tokens, not the start token.
    """
    config = config or GenerationConfig()
    if config.num_beams > 1:
        return beam_search(model, input_ids, attention_mask, config)
    session, prompt = _start(model, input_ids, attention_mask, config)
    new = _decode(session, config, _generator(config.seed, input_ids.device))
    return torch.cat((prompt, new), dim=1) if prompt is not None else new


@torch.no_grad()
def beam_search(model: nn.Module, input_ids: Tensor, attention_mask: Tensor | None, config: GenerationConfig) -> Tensor:
    """Beam search with config.num_beams beams (one beam equals greedy); outputs laid out as `generate`'s."""
    session, prompt = _start(model, input_ids, attention_mask, config)
    new = _beam_decode(session, config)
    return torch.cat((prompt, new), dim=1) if prompt is not None else new


def _start(
    model: nn.Module, input_ids: Tensor, attention_mask: Tensor | None, config: GenerationConfig
) -> tuple[Session, Tensor | None]:
    """Prefill a session; also return the (aligned) prompt that decoder-only outputs start with."""
    if attention_mask is not None and not attention_mask.bool().any(dim=1).all():
        raise ValueError("every row of attention_mask needs at least one real token")
    is_encoder_decoder = hasattr(model, "encode")
    if attention_mask is not None:
        if attention_mask.bool().all():
            attention_mask = None  # no padding: lets the prefill use the fused causal kernel
        else:
            input_ids, attention_mask = align_padding(input_ids, attention_mask, left=not is_encoder_decoder)
    if is_encoder_decoder:
        _check_length(model, config.max_new_tokens)  # the start token, then all but the last new one
        start = config.decoder_start_token_id
        return Seq2SeqSession(model, input_ids, attention_mask, start, config.max_new_tokens), None
    _check_length(model, input_ids.shape[1] + config.max_new_tokens - 1)  # the last token is never fed
    return CausalSession(model, input_ids, attention_mask, config.max_new_tokens), input_ids


def _check_length(model: nn.Module, positions: int) -> None:
    """Fail before decoding when the absolute position table is too short for prompt + new tokens."""
    cfg = getattr(model, "cfg", None)
    if cfg is not None and cfg.absolute_positions and positions > cfg.max_len:
        raise ValueError(
            f"generation needs {positions} decoder positions but max_len={cfg.max_len}; lower max_new_tokens"
        )


def _generator(seed: int | None, device: torch.device) -> torch.Generator | None:
    """A generator seeded for this call, or None for the global RNG."""
    return torch.Generator(device=device).manual_seed(seed) if seed is not None else None


def _decode(session: Session, config: GenerationConfig, generator: torch.Generator | None) -> Tensor:
    """Greedy or sampled decoding, one token per step; (B, n) new tokens."""
    logits = session.first_logits  # (B, V)
    done = torch.zeros(len(logits), dtype=torch.bool, device=logits.device)  # (B,)
    out = torch.full((len(logits), config.max_new_tokens), config.pad_token_id, device=logits.device)
    can_stop = config.eos_token_id is not None or config.stop is not None  # else no per-step check, no sync
    for step in range(config.max_new_tokens):
        token = _choose(logits, config, generator)  # (B,)
        if can_stop:
            token = token.masked_fill(done, config.pad_token_id)
        out[:, step] = token
        if config.on_token is not None:
            config.on_token(token)
        if can_stop:
            done = done | _finished(token, out[:, : step + 1], config)
        if step + 1 == config.max_new_tokens or (can_stop and bool(done.all())):
            break
        logits = session.step(token)
    return out[:, : step + 1]


def _choose(logits: Tensor, config: GenerationConfig, generator: torch.Generator | None) -> Tensor:
    """(B, V) logits -> (B,) next tokens, greedy or sampled."""
    if not config.do_sample:
        return greedy(logits)
    return sample(logits, config.temperature, config.top_k, config.top_p, generator)


def _finished(token: Tensor, generated: Tensor, config: GenerationConfig) -> Tensor:
    """(N,) rows that are done after this step's (N,) tokens: EOS or the stop hook."""
    done = torch.zeros_like(token, dtype=torch.bool)  # (N,)
    if config.eos_token_id is not None:
        ends = torch.as_tensor(config.eos_token_id, device=token.device)  # () or (E,)
        done = torch.isin(token, ends)
    if config.stop is not None:
        done = done | config.stop(generated).to(done.device, torch.bool)
    return done


NEG = -1.0e9  # score of an impossible hypothesis (finite, so arithmetic on it never gives NaN)


class BeamState:
    """Running and finished hypotheses of a batched beam search, as (B, K, ...) tensors."""

    def __init__(self, batch: int, beams: int, max_len: int, pad: int, device: torch.device) -> None:
        self.seqs = torch.full((batch, beams, max_len), pad, dtype=torch.long, device=device)
        self.scores = torch.zeros(batch, beams, device=device)  # summed log-probs of running beams
        self.scores[:, 1:] = NEG  # all beams start equal: only the first may expand at step one
        self.fin_seqs = self.seqs.clone()
        self.fin_scores = torch.full((batch, beams), NEG, device=device)  # length-normalised
        self.fin_lens = torch.zeros(batch, beams, dtype=torch.long, device=device)
        self.fin_flags = torch.zeros(batch, beams, dtype=torch.bool, device=device)
        self.done = torch.zeros(batch, dtype=torch.bool, device=device)  # (B,)

    def advance(self, logprobs: Tensor, step: int, config: GenerationConfig) -> Tensor:
        """Extend by one token from (B, K, V) log-probs; return the (B*K,) cache rows the new beams extend."""
        b, k, v = logprobs.shape
        scores, index = (self.scores[..., None] + logprobs).view(b, k * v).topk(2 * k, dim=-1)  # (B, 2K)
        source, token = index // v, index % v
        cands = _take(self.seqs, source)  # (B, 2K, L)
        cands[:, :, step] = token
        n = step + 1
        hit = _finished(token.flatten(), cands[:, :, :n].flatten(0, 1), config).view(b, 2 * k)
        hit = hit | (n == config.max_new_tokens)  # the last step finishes every candidate
        self._finish(cands, scores, hit, n, config)
        keep = scores.masked_fill(hit, NEG).topk(k, dim=-1).indices  # (B, K) best unfinished candidates
        self.seqs, self.scores = _take(cands, keep), scores.gather(1, keep)
        self._update_done(n, config)
        offsets = torch.arange(b, device=index.device)[:, None] * k
        return (source.gather(1, keep) + offsets).flatten()

    def last_tokens(self, step: int, pad: int) -> Tensor:
        """(B*K,) tokens of the running beams at this step; done rows feed pads."""
        return self.seqs[:, :, step].masked_fill(self.done[:, None], pad).flatten()

    def best(self) -> Tensor:
        """(B, n) best finished hypothesis per row, padded after its end."""
        return self.fin_seqs[:, 0, : int(self.fin_lens[:, 0].max())]

    def _finish(self, cands: Tensor, scores: Tensor, hit: Tensor, n: int, config: GenerationConfig) -> None:
        """Merge candidates that just finished (among the top K, in rows still open) into the finished set."""
        k = self.fin_scores.shape[1]
        valid = hit & ~self.done[:, None]
        valid[:, k:] = False  # the extra K candidates only stand in for beams that finished
        new_scores = (scores / n**config.length_penalty).masked_fill(~valid, NEG)  # (B, 2K)
        merged = torch.cat((self.fin_scores, new_scores), dim=1)  # (B, 3K)
        self.fin_scores, top = merged.topk(k, dim=-1)
        self.fin_seqs = _take(torch.cat((self.fin_seqs, cands), dim=1), top)
        self.fin_flags = torch.cat((self.fin_flags, valid), dim=1).gather(1, top)
        lengths = torch.full_like(valid, n, dtype=torch.long)  # (B, 2K)
        self.fin_lens = torch.cat((self.fin_lens, lengths), dim=1).gather(1, top)

    def _update_done(self, n: int, config: GenerationConfig) -> None:
        """A row is done when K hypotheses finished and (early_stopping or) no running beam can beat them."""
        full = self.fin_flags.all(dim=-1)  # (B,)
        best_running = self.scores[:, 0] / n**config.length_penalty
        hopeless = best_running <= self.fin_scores.min(dim=-1).values
        self.done |= full & (hopeless | config.early_stopping)


def _beam_decode(session: Session, config: GenerationConfig) -> Tensor:
    """Batched beam search on the session's cache; (B, n) best hypothesis per row."""
    logits = session.first_logits  # (B, V)
    (b, v), k = logits.shape, config.num_beams
    if 2 * k > v:
        raise ValueError(f"num_beams={k} needs a vocabulary of at least {2 * k} tokens, got {v}")
    state = BeamState(b, k, config.max_new_tokens, config.pad_token_id, logits.device)
    session.reorder(torch.arange(b, device=logits.device).repeat_interleave(k))  # one cache row per beam
    logits = logits.repeat_interleave(k, dim=0)  # (B*K, V)
    for step in range(config.max_new_tokens):
        rows = state.advance(logits.float().log_softmax(dim=-1).view(b, k, v), step, config)
        if step + 1 == config.max_new_tokens or bool(state.done.all()):
            break
        session.reorder_beams(rows)
        logits = session.step(state.last_tokens(step, config.pad_token_id))
    return state.best()


def _take(x: Tensor, index: Tensor) -> Tensor:
    """Gather (B, M, L) rows along dim 1 with a (B, K) index -> (B, K, L)."""
    return x.gather(1, index[..., None].expand(-1, -1, x.shape[-1]))
