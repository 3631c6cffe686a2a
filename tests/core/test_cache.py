"""KV caches: appending keys/values and reordering batch rows for beam search."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn
from torch.testing import assert_close

from tetraformer.core import KVCache, LayerCache

TOL = dict(atol=1e-5, rtol=0.0)


def _rows(batch: int, length: int) -> Tensor:
    """(B, 1, T, 1) tensor whose value is its batch row, to see which rows survive."""
    return torch.arange(batch, dtype=torch.float32)[:, None, None, None].expand(batch, 1, length, 1)


def test_layer_cache_appends_along_time() -> None:
    """append returns all keys/values so far, old ones first."""
    cache = LayerCache()
    k1, v1 = torch.randn(2, 2, 3, 4), torch.randn(2, 2, 3, 4)
    k2, v2 = torch.randn(2, 2, 1, 4), torch.randn(2, 2, 1, 4)
    cache.append(k1, v1)
    k, v = cache.append(k2, v2)
    assert torch.equal(k, torch.cat((k1, k2), dim=2))
    assert torch.equal(v, torch.cat((v1, v2), dim=2))


def test_reorder_selects_beams_in_every_layer() -> None:
    """reorder picks (and may repeat) batch rows of self and cross K/V, keeping the offset."""
    cache = KVCache.empty(2)
    cache.offset = 4
    cache.layers[0].self_kv = (_rows(3, 4), _rows(3, 4) + 10)
    cache.layers[0].cross_kv = (_rows(3, 6), _rows(3, 6) + 10)
    cache.layers[1].self_kv = (_rows(3, 4), _rows(3, 4) + 10)
    cache.reorder(torch.tensor([2, 0, 2]))
    expected = torch.tensor([2.0, 0.0, 2.0])
    for k, v in [cache.layers[0].self_kv, cache.layers[0].cross_kv, cache.layers[1].self_kv]:
        assert torch.equal(k[:, 0, 0, 0], expected)
        assert torch.equal(v[:, 0, -1, 0], expected + 10)
    assert cache.layers[1].cross_kv is None
    assert cache.offset == 4


def test_reorder_continues_the_selected_causal_hypotheses(
    tiny_model: Callable[..., nn.Module], token_ids: Callable[..., Tensor]
) -> None:
    """After reorder, the next step's logits are those of the selected prefixes run from scratch."""
    model = tiny_model("causal", position="rotary")
    ids, step, beams = token_ids(3, 4), token_ids(3, 1), torch.tensor([2, 0, 2])
    with torch.no_grad():
        cache = model.new_cache()
        model(ids, cache=cache)
        cache.reorder(beams)
        logits = model(step, cache=cache)[:, -1]
        expected = model(torch.cat((ids[beams], step), dim=1))[:, -1]
    assert_close(logits, expected, **TOL)


def test_reorder_continues_the_selected_seq2seq_hypotheses(
    tiny_model: Callable[..., nn.Module], token_ids: Callable[..., Tensor]
) -> None:
    """Reordering also moves the cached cross K/V, so each beam keeps attending to its own source."""
    model = tiny_model("seq2seq", position="relative")
    src, tgt, step, beams = token_ids(3, 5), token_ids(3, 3), token_ids(3, 1), torch.tensor([1, 1, 0])
    with torch.no_grad():
        memory = model.encode(src).last_hidden_state
        cache = model.new_cache()
        model.decode(tgt, memory, cache=cache)
        cache.reorder(beams)
        h = model.decode(step, memory[beams], cache=cache).last_hidden_state[:, -1]
        expected = model.decode(torch.cat((tgt[beams], step), 1), memory[beams]).last_hidden_state[:, -1]
    assert_close(h, expected, **TOL)


def test_reserved_cache_writes_in_place_and_grows_past_its_reservation() -> None:
    """A reserved layer writes new keys into one buffer; appending past the reservation keeps every key."""
    cache = KVCache.empty(1).reserve(4)
    layer, steps = cache.layers[0], [torch.randn(2, 2, 1, 3) for _ in range(6)]
    layer.append(steps[0], steps[0] + 1)
    buffer = layer.self_kv[0].untyped_storage().data_ptr()
    for k in steps[1:4]:
        layer.append(k, k + 1)
    assert layer.self_kv[0].untyped_storage().data_ptr() == buffer  # no new allocation within the reservation
    for k in steps[4:]:
        k_all, v_all = layer.append(k, k + 1)
    assert torch.equal(k_all, torch.cat(steps, dim=2)) and torch.equal(v_all, k_all + 1)


def test_append_with_gradients_concatenates_so_backward_works() -> None:
    """Keys that need gradients are concatenated, not written into a buffer, so backward sees them intact."""
    layer = KVCache.empty(1).reserve(8).layers[0]
    k1, k2 = torch.randn(1, 1, 2, 3, requires_grad=True), torch.randn(1, 1, 1, 3, requires_grad=True)
    layer.append(k1, k1)
    k, v = layer.append(k2, k2)
    (k * v).sum().backward()
    assert torch.equal(k1.grad, 2 * k1.detach()) and torch.equal(k2.grad, 2 * k2.detach())


def test_reorder_beams_selects_self_rows_and_keeps_cross_kv() -> None:
    """reorder_beams moves self K/V rows (written keys only, into spare buffers) and leaves the cross K/V."""
    cache = KVCache.empty(1).reserve(6)
    layer = cache.layers[0]
    layer.cross_kv = (_rows(3, 5), _rows(3, 5) + 10)
    layer.append(_rows(3, 2).clone(), _rows(3, 2) + 10)
    for index in (torch.tensor([2, 2, 0]), torch.tensor([1, 0, 0])):
        cache.reorder_beams(index)
    k, v = layer.self_kv
    assert torch.equal(k[:, 0, :, 0], torch.tensor([[2.0, 2.0], [2.0, 2.0], [2.0, 2.0]]))
    assert torch.equal(v[:, 0, 0, 0], torch.tensor([12.0, 12.0, 12.0]))
    assert torch.equal(layer.cross_kv[0][:, 0, 0, 0], torch.tensor([0.0, 1.0, 2.0]))
    k_all, _ = layer.append(torch.full((3, 1, 1, 1), 7.0), torch.zeros(3, 1, 1, 1))
    assert torch.equal(k_all[:, 0, :, 0], torch.tensor([[2.0, 2.0, 7.0]] * 3))
