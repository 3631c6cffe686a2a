"""Family-level properties: causality, padding invariance, permutation equivariance, cached decoding,
and classifiers on every backbone (pooling by the last real token on decoders)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, get_args

import pytest
import torch
from torch import Tensor, nn
from torch.testing import assert_close

from tetraformer.core import ImageEncoder, SequenceClassifier, TokenClassifier, build_backbone
from tetraformer.core.config import AttentionBackend, Position, TransformerConfig
from tetraformer.core.generation import position_ids
from tetraformer.core.models import DECODER_START_ID

POSITIONS = get_args(Position)
BACKENDS = get_args(AttentionBackend)
SHIFT_INVARIANT = ("relative", "rotary", "alibi", "none")  # attention sees only key - query offsets
TOL = dict(atol=1e-5, rtol=0.0)
Factory = Callable[..., nn.Module]
Ids = Callable[..., Tensor]


def _differs(a: Tensor, b: Tensor) -> bool:
    """True when two outputs differ by clearly more than float noise."""
    return (a - b).abs().max().item() > 1e-4


def _features(model: nn.Module, ids: Tensor, mask: Tensor | None = None) -> Tensor:
    """Final hidden states of an encoder or decoder-only family."""
    return model.forward_features(ids, mask).last_hidden_state


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("position", POSITIONS)
def test_causal_lm_future_token_never_changes_the_past(
    tiny_model: Factory, token_ids: Ids, position: str, backend: str
) -> None:
    """Changing token t leaves positions < t untouched and changes position t."""
    model = tiny_model("causal", position=position, attention=backend)
    ids = token_ids(2, 8)
    base = _features(model, ids)
    for t in (1, 4, 7):
        changed = ids.clone()
        changed[:, t] = ids[:, t] % 99 + 1
        out = _features(model, changed)
        assert_close(out[:, :t], base[:, :t], **TOL)
        assert _differs(out[:, t], base[:, t])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("position", POSITIONS)
def test_seq2seq_future_target_token_never_changes_the_past(
    tiny_model: Factory, token_ids: Ids, position: str, backend: str
) -> None:
    """In the cross-attending decoder, too, target token t only affects positions >= t."""
    model = tiny_model("seq2seq", position=position, attention=backend)
    memory = model.encode(token_ids(2, 6)).last_hidden_state
    tgt = token_ids(2, 6)
    changed = tgt.clone()
    changed[:, 3] = tgt[:, 3] % 99 + 1
    base, out = (model.decode(t, memory).last_hidden_state for t in (tgt, changed))
    assert_close(out[:, :3], base[:, :3], **TOL)
    assert _differs(out[:, 3], base[:, 3])


def _right_pad(ids: Tensor, lengths: list[int]) -> tuple[Tensor, Tensor]:
    """Keep the first n ids of each row, fill the rest with random garbage ids; return ids and mask."""
    mask = torch.arange(ids.shape[1])[None, :] < torch.tensor(lengths)[:, None]
    return torch.where(mask, ids, torch.randint(1, 100, ids.shape)), mask


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("position", POSITIONS)
def test_encoder_right_padding_never_changes_real_tokens(
    tiny_model: Factory, token_ids: Ids, position: str, backend: str
) -> None:
    """Garbage right pads under the mask leave each row's real outputs as the row alone gives them."""
    model = tiny_model("encoder", position=position, attention=backend)
    lengths = [8, 5]
    ids, mask = _right_pad(token_ids(2, 8), lengths)
    out = _features(model, ids, mask)
    unmasked = _features(model, ids)
    for row, n in enumerate(lengths):
        alone = _features(model, ids[row : row + 1, :n])[0]
        assert_close(out[row, :n], alone, **TOL)
    assert _differs(unmasked[1, :5], out[1, :5])  # without the mask the pads do leak in


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("position", POSITIONS)
def test_cross_attention_memory_padding_never_changes_outputs(
    tiny_model: Factory, token_ids: Ids, position: str, backend: str
) -> None:
    """A padded source (garbage pad ids, masked) gives each row the decoder outputs of its real source."""
    model = tiny_model("seq2seq", position=position, attention=backend)
    lengths = [7, 4]
    src, src_mask = _right_pad(token_ids(2, 7), lengths)
    tgt = token_ids(2, 5)
    memory = model.encode(src, src_mask).last_hidden_state
    out = model.decode(tgt, memory, src_mask).last_hidden_state
    for row, n in enumerate(lengths):
        alone_memory = model.encode(src[row : row + 1, :n]).last_hidden_state
        assert_close(memory[row, :n], alone_memory[0], **TOL)
        assert_close(out[row], model.decode(tgt[row : row + 1], alone_memory).last_hidden_state[0], **TOL)
    assert _differs(model.decode(tgt, memory).last_hidden_state[1], out[1])  # unmasked pads leak in


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("position", POSITIONS)
def test_causal_lm_right_padding_never_changes_real_tokens(
    tiny_model: Factory, token_ids: Ids, position: str, backend: str
) -> None:
    """Right pads sit after every real token, so real outputs match the unpadded row for any position type."""
    model = tiny_model("causal", position=position, attention=backend)
    ids, mask = _right_pad(token_ids(2, 8), [8, 5])
    out = _features(model, ids, mask)
    assert_close(out[1, :5], _features(model, ids[1:, :5])[0], **TOL)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("position", POSITIONS)
def test_causal_lm_left_padding_matches_unpadded_only_when_shift_invariant(
    tiny_model: Factory, token_ids: Ids, position: str, backend: str
) -> None:
    """Left pads shift real tokens to later positions: outputs match the unpadded run exactly when
    attention sees only relative offsets (relative, rotary, alibi, none), never with absolute tables."""
    model = tiny_model("causal", position=position, attention=backend)
    real = token_ids(1, 5)
    ids = torch.cat((torch.randint(1, 100, (1, 3)), real), dim=1)
    mask = torch.tensor([[False] * 3 + [True] * 5])
    padded = _features(model, ids, mask)[0, 3:]
    alone = _features(model, real)[0]
    if position in SHIFT_INVARIANT:
        assert_close(padded, alone, **TOL)
    else:
        assert _differs(padded, alone)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("position", POSITIONS)
def test_encoder_is_permutation_equivariant_only_without_positions(
    tiny_model: Factory, token_ids: Ids, position: str, backend: str
) -> None:
    """Permuting tokens permutes the outputs exactly when there is no position information."""
    model = tiny_model("encoder", position=position, attention=backend)
    ids = token_ids(2, 6)
    perm = torch.tensor([2, 0, 3, 1, 5, 4])  # not a reversal: ALiBi's |i - j| is reversal-symmetric
    out, permuted = _features(model, ids), _features(model, ids[:, perm])
    if position == "none":
        assert_close(permuted, out[:, perm], **TOL)
    else:
        assert _differs(permuted, out[:, perm])


def _cached_logits(model: nn.Module, ids: Tensor, mask: Tensor | None, prefill: int) -> Tensor:
    """Logits from prefilling `prefill` tokens then decoding one token at a time with a KV cache."""
    cache = model.new_cache()
    steps = [model(ids[:, :prefill], None if mask is None else mask[:, :prefill], cache)]
    for t in range(prefill, ids.shape[1]):
        steps.append(model(ids[:, t : t + 1], None if mask is None else mask[:, : t + 1], cache))
    assert cache.offset == ids.shape[1]
    return torch.cat(steps, dim=1)


@pytest.mark.parametrize("padded", [False, True])
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("position", POSITIONS)
def test_causal_lm_cached_decoding_equals_full_forward(
    tiny_model: Factory, token_ids: Ids, position: str, backend: str, padded: bool
) -> None:
    """Prefill 3 tokens, then 1 at a time: every real position's logits equal the full forward's."""
    model = tiny_model("causal", position=position, attention=backend)
    ids = token_ids(2, 8)
    mask = torch.tensor([[True] * 8, [False] * 2 + [True] * 6]) if padded else torch.ones(2, 8, dtype=torch.bool)
    with torch.no_grad():
        full = model(ids, mask if padded else None)
        cached = _cached_logits(model, ids, mask if padded else None, prefill=3)
    assert_close(cached[mask], full[mask], **TOL)


def _cached_seq2seq_logits(model: nn.Module, src: Tensor, src_mask: Tensor, tgt: Tensor, prefill: int) -> Tensor:
    """Decoder logits from prefilling `prefill` target tokens, then one at a time, with a KV cache."""
    memory = model.encode(src, src_mask).last_hidden_state
    cache = model.new_cache()
    chunks = [tgt[:, :prefill]] + [tgt[:, t : t + 1] for t in range(prefill, tgt.shape[1])]
    steps = [model.decode(c, memory, src_mask, cache=cache).last_hidden_state for c in chunks]
    assert all(layer.cross_kv is not None for layer in cache.layers)
    return model.lm_head(torch.cat(steps, dim=1))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("position", POSITIONS)
def test_seq2seq_cached_decoding_equals_full_forward(
    tiny_model: Factory, token_ids: Ids, position: str, backend: str
) -> None:
    """With cached self K/V and cross K/V, step-by-step decoder logits equal the full decode."""
    model = tiny_model("seq2seq", position=position, attention=backend)
    src, src_mask = _right_pad(token_ids(2, 7), [7, 4])
    tgt = token_ids(2, 6)
    with torch.no_grad():
        assert_close(_cached_seq2seq_logits(model, src, src_mask, tgt, prefill=2), model(src, tgt, src_mask), **TOL)


VARIANTS: dict[str, dict[str, Any]] = {
    "t5-style": dict(position="relative", norm="rmsnorm", bias=False, scale_attention=False, activation="relu"),
    "partial-rope": dict(position="rotary", rope_fraction=0.5, activation="swiglu"),
    "post-norm": dict(position="sinusoidal", norm_position="post", scale_embeddings=True),
    "wide-heads": dict(position="alibi", n_heads=3, d_head=8, activation="geglu"),
}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_architecture_variants_keep_cache_and_backend_equalities(
    tiny_model: Factory, eager_twin: Callable[[nn.Module], nn.Module], token_ids: Ids, variant: str
) -> None:
    """Unscaled scores, partial RoPE, post-norm and d_head != d_model / n_heads keep both equalities."""
    model = tiny_model("seq2seq", **VARIANTS[variant])
    src, src_mask = _right_pad(token_ids(2, 6), [6, 3])
    tgt = token_ids(2, 5)
    with torch.no_grad():
        full = model(src, tgt, src_mask)
        assert_close(eager_twin(model)(src, tgt, src_mask), full, **TOL)
        assert_close(_cached_seq2seq_logits(model, src, src_mask, tgt, prefill=1), full, **TOL)


@pytest.mark.parametrize("size", [(32, 32), (24, 40)])
def test_vit_classifier_runs_on_any_divisible_size(
    tiny_config: Callable[..., TransformerConfig], size: tuple[int, int]
) -> None:
    """SequenceClassifier(ImageEncoder) classifies images, also at a non-square size."""
    cfg = tiny_config(image_size=32, patch_size=8, vocab_size=0)
    model = SequenceClassifier(ImageEncoder(cfg), num_classes=10).eval()
    logits = model(torch.randn(2, 3, *size))
    assert logits.shape == (2, 10)
    assert torch.isfinite(logits).all()


def _decoder_classifier(config: Callable[..., TransformerConfig], **overrides: Any) -> SequenceClassifier:
    """A 3-class SequenceClassifier on a tiny decoder backbone, pooling left to the backbone."""
    return SequenceClassifier(build_backbone(config(**overrides), "decoder"), 3).eval()


def test_decoder_classifier_reads_the_last_real_token(
    tiny_config: Callable[..., TransformerConfig], token_ids: Ids
) -> None:
    """On a causal backbone the default pooling is `last`: the head on the hidden state of the last real token."""
    model = _decoder_classifier(tiny_config)
    ids, mask = _right_pad(token_ids(2, 8), [8, 5])
    h = model.backbone.forward_features(ids, mask).last_hidden_state
    assert model.head.pooling == "last"
    assert_close(model(ids, attention_mask=mask), model.head.classifier(torch.stack((h[0, 7], h[1, 4]))))


@pytest.mark.parametrize("position", POSITIONS)
def test_decoder_classifier_ignores_right_and_left_padding(
    tiny_config: Callable[..., TransformerConfig], token_ids: Ids, position: str
) -> None:
    """A row's logits equal the unpadded row's, right-padded or left-padded (with positions over real tokens)."""
    model = _decoder_classifier(tiny_config, position=position)
    real = token_ids(1, 5)
    alone = model(real)[0]
    garbage = torch.randint(1, 100, (1, 3))
    right, left = torch.cat((real, garbage), dim=1), torch.cat((garbage, real), dim=1)
    right_mask = torch.tensor([[True] * 5 + [False] * 3])
    left_mask = right_mask.flip(1)
    assert_close(model(right, attention_mask=right_mask)[0], alone, **TOL)
    left_logits = model(left, attention_mask=left_mask, position_ids=position_ids(left, left_mask))
    assert_close(left_logits[0], alone, **TOL)


def test_decoder_classifier_ignores_tokens_after_the_last_real_one(
    tiny_config: Callable[..., TransformerConfig], token_ids: Ids
) -> None:
    """Changing a padded position after the last real token changes nothing; changing that token does."""
    model = _decoder_classifier(tiny_config)
    ids, mask = _right_pad(token_ids(1, 8), [5])
    base = model(ids, attention_mask=mask)
    changed_pad, changed_last = ids.clone(), ids.clone()
    changed_pad[0, 5:] = ids[0, 5:] % 99 + 1
    changed_last[0, 4] = ids[0, 4] % 99 + 1
    assert_close(model(changed_pad, attention_mask=mask), base, **TOL)
    assert _differs(model(changed_last, attention_mask=mask), base)


def test_cls_pooling_on_a_causal_backbone_is_an_error(tiny_config: Callable[..., TransformerConfig]) -> None:
    """Token 0 of a causal backbone has seen only itself: asking to pool it says so."""
    with pytest.raises(ValueError, match="token 0 has seen nothing"):
        SequenceClassifier(build_backbone(tiny_config(), "decoder"), 3, pooling="cls")


@pytest.mark.parametrize(("kind", "pooling"), [("encoder", "cls"), ("decoder", "last"), ("encoder_decoder", "mean")])
def test_each_backbone_has_its_natural_pooling(
    tiny_config: Callable[..., TransformerConfig], kind: str, pooling: str
) -> None:
    """pooling=None picks [CLS] on encoders, the last real token on decoders, the encoder mean on T5s."""
    assert SequenceClassifier(build_backbone(tiny_config(), kind), 2).head.pooling == pooling


def test_encoder_decoder_classifier_averages_the_real_encoder_outputs(
    tiny_config: Callable[..., TransformerConfig], token_ids: Ids
) -> None:
    """On an encoder-decoder, the classifier pools the encoder's real tokens, so padding changes nothing."""
    model = SequenceClassifier(build_backbone(tiny_config(position="relative"), "encoder_decoder"), 3).eval()
    ids, mask = _right_pad(token_ids(2, 7), [7, 4])
    h = model.backbone.encode(ids[1:, :4]).last_hidden_state  # (1, 4, D)
    assert_close(model(ids, attention_mask=mask)[1], model.head.classifier(h.mean(1))[0], **TOL)


@pytest.mark.parametrize("kind", ["encoder", "decoder", "encoder_decoder"])
def test_token_classifier_labels_every_token_and_ignores_padding(
    tiny_config: Callable[..., TransformerConfig], token_ids: Ids, kind: str
) -> None:
    """(B, T, L) logits; a right-padded row's real tokens get the logits of the row alone."""
    model = TokenClassifier(build_backbone(tiny_config(), kind), 5).eval()
    ids, mask = _right_pad(token_ids(2, 7), [7, 4])
    logits = model(ids, attention_mask=mask)
    assert logits.shape == (2, 7, 5)
    assert_close(logits[1, :4], model(ids[1:, :4])[0], **TOL)


def test_decoder_pooling_classifies_one_decoder_step() -> None:
    """pooling='decoder' equals the head on the decoder's state for the start token; other backbones refuse it."""
    cfg = TransformerConfig(d_model=32, n_heads=2, n_layers=1, d_ff=64, vocab_size=50, max_len=16, dropout=0.0)
    net = SequenceClassifier(build_backbone(cfg, "encoder_decoder"), 3, pooling="decoder").eval()
    ids = torch.randint(1, 50, (2, 5))
    start = torch.full((2, 1), DECODER_START_ID)
    state = net.backbone.forward_features(ids, decoder_input_ids=start).last_hidden_state  # (B, 1, D)
    torch.testing.assert_close(net(ids), net.head.classifier(net.head.pooler(state[:, 0])))
    with pytest.raises(ValueError, match="encoder-decoder"):
        SequenceClassifier(build_backbone(cfg, "encoder"), 3, pooling="decoder")
