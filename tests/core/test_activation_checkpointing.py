"""Activation checkpointing of the stack's blocks: same outputs and gradients, fewer saved activations, and
plain blocks wherever no backward follows (eval, no_grad, cached decoding)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
import torch
from torch import Tensor, nn
from torch.testing import assert_close

import tetraformer.core.stack as stack_module

Factory = Callable[..., nn.Module]
FAMILIES = ["causal", "encoder", "seq2seq", "image"]


def _twins(tiny_model: Factory, family: str, **overrides: object) -> tuple[nn.Module, nn.Module]:
    """A plain model and a checkpointing one with the same weights, both in training mode."""
    plain = tiny_model(family, activation_checkpointing=False, **overrides).train()
    checkpointed = tiny_model(family, activation_checkpointing=True, **overrides).train()
    checkpointed.load_state_dict(plain.state_dict())
    return plain, checkpointed


def _inputs(family: str) -> dict[str, Tensor]:
    """forward_features arguments of a small batch for one family."""
    if family == "image":
        return {"pixel_values": torch.randn(2, 3, 32, 32)}
    ids = torch.randint(1, 100, (2, 12))
    return {"input_ids": ids, "decoder_input_ids": ids[:, :7]} if family == "seq2seq" else {"input_ids": ids}


def _run(model: nn.Module, inputs: dict[str, Tensor], **kw: bool) -> tuple[object, dict[str, Tensor]]:
    """Forward (dropout seeded alike), backward of a fixed projection; returns the output and the gradients."""
    torch.manual_seed(1)
    out = model.forward_features(**inputs, **kw)
    weights = torch.linspace(-1, 1, out.last_hidden_state.numel()).view_as(out.last_hidden_state)
    (out.last_hidden_state * weights).sum().backward()
    return out, {name: p.grad for name, p in model.named_parameters() if p.grad is not None}


@contextmanager
def _counted_checkpoints() -> Iterator[list[int]]:
    """Count calls of torch.utils.checkpoint made by the stack."""
    calls: list[int] = []
    original = stack_module.checkpoint

    def counting(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return original(*args, **kwargs)

    stack_module.checkpoint = counting
    try:
        yield calls
    finally:
        stack_module.checkpoint = original


@pytest.mark.parametrize("family", FAMILIES)
def test_checkpointing_keeps_outputs_and_gradients(tiny_model: Factory, family: str) -> None:
    """With dropout on, a checkpointed training pass gives the plain pass's outputs and every gradient."""
    plain, checkpointed = _twins(tiny_model, family, dropout=0.1, attn_dropout=0.1, ffn_dropout=0.1)
    inputs = _inputs(family)
    out, grads = _run(plain, inputs)
    with _counted_checkpoints() as calls:
        ckpt_out, ckpt_grads = _run(checkpointed, inputs)
    assert len(calls) == len([m for m in checkpointed.modules() if isinstance(m, stack_module.Block)])
    assert_close(ckpt_out.last_hidden_state, out.last_hidden_state, rtol=0, atol=0)
    assert set(ckpt_grads) == {name for name, p in plain.named_parameters() if p.requires_grad} == set(grads)
    for name, grad in grads.items():
        assert_close(ckpt_grads[name], grad, msg=name)


def test_checkpointing_returns_attention_weights(tiny_model: Factory) -> None:
    """Attention weights asked for in a training pass come back through the checkpoint unchanged."""
    plain, checkpointed = _twins(tiny_model, "causal", attention="eager")
    inputs = _inputs("causal")
    out, _ = _run(plain, inputs, output_attentions=True, output_hidden_states=True)
    ckpt_out, _ = _run(checkpointed, inputs, output_attentions=True, output_hidden_states=True)
    for got, expected in zip(
        ckpt_out.attentions + ckpt_out.hidden_states, out.attentions + out.hidden_states, strict=True
    ):
        assert_close(got, expected)


def _saved_bytes(model: nn.Module, inputs: dict[str, Tensor]) -> int:
    """Bytes of the tensors one training forward keeps for backward (outside any checkpoint's own store)."""
    sizes: list[int] = []

    def pack(t: Tensor) -> Tensor:
        sizes.append(t.numel() * t.element_size())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model.forward_features(**inputs).last_hidden_state.sum().backward()
    return sum(sizes)


def test_checkpointing_keeps_fewer_activations(tiny_model: Factory) -> None:
    """Four checkpointed blocks keep under a quarter of the activations the plain blocks keep for backward."""
    plain, checkpointed = _twins(tiny_model, "causal", n_layers=4)
    inputs = {"input_ids": torch.randint(1, 100, (4, 64))}
    assert _saved_bytes(checkpointed, inputs) < _saved_bytes(plain, inputs) / 4


def test_no_checkpoint_without_backward(tiny_model: Factory) -> None:
    """Eval mode and no_grad run the blocks plainly, with the plain outputs."""
    plain, checkpointed = _twins(tiny_model, "causal")
    ids = _inputs("causal")["input_ids"]
    with _counted_checkpoints() as calls:
        with torch.no_grad():
            assert_close(checkpointed(ids), plain(ids))
        checkpointed.eval()
        assert_close(checkpointed(ids), plain.eval()(ids))
    assert calls == []


@pytest.mark.parametrize("family", ["causal", "seq2seq"])
def test_cached_decoding_with_checkpointing_equals_full_forward(tiny_model: Factory, family: str) -> None:
    """A training-mode model with checkpointing still fills its KV cache once per step: cached logits equal
    the full forward's (the cache path never goes through a recomputing checkpoint)."""
    model = tiny_model(family, activation_checkpointing=True).train()  # dropout is 0 in the tiny fixtures
    ids = torch.randint(1, 100, (2, 9))
    cache = model.new_cache()
    with _counted_checkpoints() as calls:
        if family == "causal":
            full = model(ids)
            steps = [model(ids[:, :5], cache=cache)] + [model(ids[:, t : t + 1], cache=cache) for t in range(5, 9)]
        else:
            source = torch.randint(1, 100, (2, 6))
            full = model(source, ids)
            memory = model.encode(source).last_hidden_state
            steps = [
                model.lm_head(model.decode(ids[:, t : t + 1], memory, cache=cache).last_hidden_state) for t in range(9)
            ]
    assert_close(torch.cat(steps, dim=1), full)
    assert cache.offset == 9 and all(layer.self_kv[0].shape[2] == 9 for layer in cache.layers)
    blocks = [m for m in model.modules() if isinstance(m, stack_module.Block)]
    encoder_again = len(model.encoder.layers) if family == "seq2seq" else 0  # `encode` has no cache
    assert len(calls) == len(blocks) + encoder_again  # the full pass, and the uncached encoder
