"""Fused linear cross-entropy: the plain path's loss and gradients, chunk by chunk; lm_loss runs the path its run
names (accel/numerics.py), or the head itself where it cannot be fused."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.testing import assert_close

from tests.accel.fakes import bf16_close
from tetraformer.accel import linear_cross_entropy as lce
from tetraformer.accel.linear_cross_entropy import linear_cross_entropy, lm_loss, plain_cross_entropy
from tetraformer.core import LMHead, TransformerConfig
from tetraformer.core.lora import LoRAConfig, apply_lora

B, T, D, V = 2, 7, 16, 13  # N = 14 rows: chunks of 4, 4, 4 and 2
CHUNK_ROWS = 4
IGNORED = [4, 5, 6, 7, 12]  # flat rows: the whole second chunk, and one more
PRECISIONS = ["fp32", "bf16-autocast"]
Config = Callable[..., TransformerConfig]
Loss = Callable[..., Tensor]


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Several chunks of CHUNK_ROWS rows at the test vocabulary (V), the last one short."""
    monkeypatch.setattr(lce, "CHUNK_ELEMENTS", CHUNK_ROWS * V)


def targets(vocab: int = V, ignored: list[int] = IGNORED) -> Tensor:
    """(B, T) class ids with the `ignored` flat rows set to -100."""
    t = torch.randint(0, vocab, (B * T,))
    t[ignored] = -100
    return t.view(B, T)


def autocast(precision: str):
    """CPU bf16 autocast for "bf16-autocast", nothing for "fp32"."""
    return torch.autocast("cpu", dtype=torch.bfloat16) if precision != "fp32" else nullcontext()


def close(ours: Tensor, ref: Tensor, precision: str) -> None:
    """fp32: equal to ~1e-6 of the reference's size; bf16: up to the last bf16 bit."""
    if precision != "fp32":
        return bf16_close(ours, ref)
    scale = ref.abs().max().item()
    assert_close(ours, ref, rtol=1e-6, atol=1e-6 * scale)


def run(loss_fn: Loss, h: Tensor, w: Tensor, t: Tensor, precision: str, **kw: float) -> tuple[Tensor, ...]:
    """The loss on copies of leaf h (B, T, D) and w (V, D) (each keeping its requires_grad), and their gradients."""
    h, w = h.detach().requires_grad_(h.requires_grad), w.detach().requires_grad_(w.requires_grad)
    with autocast(precision):
        loss = loss_fn(h, w, t, -100, **kw)
    loss.backward()
    return loss.detach(), h.grad, w.grad


@pytest.mark.parametrize("wants", [("h", "w"), ("h",), ("w",)], ids="+".join)
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("precision", PRECISIONS)
def test_fused_loss_and_gradients_match_the_plain_path(
    precision: str, smoothing: float, wants: tuple[str, ...]
) -> None:
    """In fp32 and under bf16 autocast, with ignored rows (a whole chunk of them), with and without label
    smoothing, and whichever of h and the weight wants a gradient: the plain path's loss and gradients."""
    h = torch.randn(B, T, D).requires_grad_("h" in wants)
    w = (torch.randn(V, D) * 0.3).requires_grad_("w" in wants)
    t = targets()
    ours, ref = (
        run(fn, h, w, t, precision, label_smoothing=smoothing) for fn in (linear_cross_entropy, plain_cross_entropy)
    )
    close(ours[0], ref[0], precision)
    for mine, theirs, wanted in zip(ours[1:], ref[1:], ("h" in wants, "w" in wants), strict=True):
        assert (mine is not None) == wanted
        if wanted:
            assert mine.dtype == theirs.dtype == torch.float32
            close(mine, theirs, precision)


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_bf16_weights_under_a_bf16_default_dtype_match_the_plain_path(smoothing: float) -> None:
    """bf16-true: bf16 h and weight, with torch's default dtype bf16 during the call as Lightning's bf16-true sets
    it for the step: the plain path's loss and gradients (each row's share of the mean stays fp32)."""
    h, w, t = torch.randn(B, T, D).bfloat16(), (torch.randn(V, D) * 0.3).bfloat16(), targets()
    results = []
    for fn in (linear_cross_entropy, plain_cross_entropy):
        hh, ww = h.clone().requires_grad_(), w.clone().requires_grad_()
        previous = torch.get_default_dtype()
        torch.set_default_dtype(torch.bfloat16)
        try:
            loss = fn(hh, ww, t, -100, smoothing)
            loss.backward()
        finally:
            torch.set_default_dtype(previous)
        results.append((loss.detach().float(), hh.grad.float(), ww.grad.float()))
    for ours, ref in zip(*results, strict=True):
        bf16_close(ours, ref)


@pytest.mark.parametrize("precision", PRECISIONS)
def test_a_tied_weight_gets_both_gradients(precision: str) -> None:
    """A weight that also embeds the tokens (h is made from it) gets the sum of both uses' gradients."""
    ids, t = torch.randint(0, V, (B, T)), targets()
    mix = torch.randn(D, D) * 0.3
    grads = []
    for fn in (linear_cross_entropy, plain_cross_entropy):
        w = (torch.randn(V, D, generator=torch.Generator().manual_seed(1)) * 0.3).requires_grad_()
        with autocast(precision):
            h = torch.tanh(F.embedding(ids, w) @ mix)  # (B, T, D)
            loss = fn(h, w, t, -100, 0.1)
        loss.backward()
        grads.append((loss.detach(), w.grad))
    close(grads[0][0], grads[1][0], precision)
    close(grads[0][1], grads[1][1], precision)


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("precision", PRECISIONS)
def test_ignored_positions_get_exactly_zero_gradient(precision: str, smoothing: float) -> None:
    """Rows whose target is ignored contribute nothing: their hidden states' gradient is exactly zero."""
    h, w = torch.randn(B, T, D, requires_grad=True), torch.randn(V, D, requires_grad=True)
    _, grad_h, _ = run(linear_cross_entropy, h, w, targets(), precision, label_smoothing=smoothing)
    ignored = grad_h.reshape(-1, D)[IGNORED]
    assert torch.equal(ignored, torch.zeros_like(ignored))
    assert grad_h.reshape(-1, D).abs().sum(-1).gt(0).sum() == B * T - len(IGNORED)


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("precision", PRECISIONS)
def test_all_rows_ignored_gives_zero_loss_and_zero_gradients(precision: str, smoothing: float) -> None:
    """No target to score: loss 0 and zero gradients, not the 0/0 NaN of a plain mean."""
    h, w = torch.randn(B, T, D, requires_grad=True), torch.randn(V, D, requires_grad=True)
    loss, grad_h, grad_w = run(
        linear_cross_entropy, h, w, targets(ignored=list(range(B * T))), precision, label_smoothing=smoothing
    )
    assert loss.item() == 0.0
    assert torch.equal(grad_h, torch.zeros_like(h)) and torch.equal(grad_w, torch.zeros_like(w))


@pytest.mark.parametrize("mode", [torch.no_grad, torch.inference_mode])
@pytest.mark.parametrize("precision", PRECISIONS)
def test_without_grad_the_same_loss_and_no_gradient_work(
    precision: str, mode: Callable[[], object], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under no_grad (or inference mode) on parameters that require grad: the loss of a training call, no graph,
    and no chunk computes a gradient."""
    h, w = torch.randn(B, T, D, requires_grad=True), torch.randn(V, D, requires_grad=True)
    t = targets()
    trained = run(linear_cross_entropy, h, w, t, precision)[0]
    wanted, chunk_loss = [], lce.chunk_loss

    def spy(*args: object) -> tuple[Tensor, Tensor | None]:
        wanted.append(args[-1])
        return chunk_loss(*args)

    monkeypatch.setattr(lce, "chunk_loss", spy)
    with mode(), autocast(precision):
        loss = linear_cross_entropy(h, w, t)
    assert torch.equal(loss, trained) and not loss.requires_grad
    assert wanted == [False] * 4  # every chunk's loss only


def lm_head(cfg: TransformerConfig) -> LMHead:
    """An LM head of the config (tied to an embedding where the config ties them)."""
    return LMHead(cfg, nn.Embedding(cfg.vocab_size, cfg.d_model))


def head_loss(head: nn.Module, h: Tensor, t: Tensor, smoothing: float) -> Tensor:
    """The reference: the head's logits, then fp32 cross-entropy."""
    logits = head(h)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), t.reshape(-1), label_smoothing=smoothing)


def spy_paths(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record which of lm_loss's paths run (each still computes its loss); returns the list of names run."""
    ran: list[str] = []
    for name, attr in (("logits", "plain_cross_entropy"), ("fused", "linear_cross_entropy")):
        fn = getattr(lce, attr)
        monkeypatch.setattr(lce, attr, lambda *a, _n=name, _f=fn: ran.append(_n) or _f(*a))
    return ran


def grads_of(loss: Tensor, *tensors: Tensor) -> list[Tensor]:
    """d loss / d tensors."""
    return list(torch.autograd.grad(loss, tensors))


@pytest.mark.parametrize("rescale", [False, True], ids=["plain", "rescaled-tied"])
@pytest.mark.parametrize("path", ["fused", "logits"])
def test_lm_loss_runs_the_path_it_is_given_untimed(
    tiny_config: Config, path: str, rescale: bool, monkeypatch: pytest.MonkeyPatch, prefer: Callable[..., list[str]]
) -> None:
    """lm_loss runs the path its run names, never a timed one (the two sum in other orders); either gives head(h)'s
    loss and gradients, the head's scale (tied and rescaled logits) included."""
    keys, ran = prefer("logits" if path == "fused" else "fused"), spy_paths(monkeypatch)
    head = lm_head(tiny_config(tie_embeddings=True, rescale_tied_logits=rescale))
    assert (head.scale != 1.0) == rescale
    h = torch.randn(B, T, 32, requires_grad=True)
    t = targets(vocab=100)
    for call in (1, 2):
        loss = lm_loss(head, h, t, -100, 0.1, path)
        ref = head_loss(head, h, t, 0.1)
        close(loss, ref, "fp32")
        for ours, theirs in zip(grads_of(loss, h, head.proj.weight), grads_of(ref, h, head.proj.weight), strict=True):
            close(ours, theirs, "fp32")
        assert ran == [path] * call
    assert keys == []


def lora_head(cfg: TransformerConfig) -> LMHead:
    """An untied LM head with a LoRA adapter (non-zero, so it changes the logits) on its projection."""
    head = lm_head(cfg.replace(tie_embeddings=False))
    apply_lora(head, LoRAConfig(rank=2, targets=["head"]))
    with torch.no_grad():
        head.proj.lora_b[0].normal_()
    return head


def biased_head(cfg: TransformerConfig) -> LMHead:
    """An LM head whose projection has a (non-zero) bias."""
    head = lm_head(cfg.replace(tie_embeddings=False))
    head.proj = nn.Linear(cfg.d_model, cfg.vocab_size, bias=True)
    return head


@pytest.mark.parametrize("make", [lora_head, biased_head], ids=["lora", "bias"])
def test_heads_the_fused_path_cannot_take_compute_their_logits(
    tiny_config: Config,
    make: Callable[[TransformerConfig], LMHead],
    monkeypatch: pytest.MonkeyPatch,
    prefer: Callable[..., list[str]],
) -> None:
    """A LoRA head or one with a bias goes through the head itself (adapter and bias included), even where the
    fused path is named; nothing is timed."""
    keys, ran = prefer("fused"), spy_paths(monkeypatch)
    head = make(tiny_config())
    h, t = torch.randn(B, T, 32, requires_grad=True), targets(vocab=100)
    loss = lm_loss(head, h, t, -100, 0.0, "fused")
    assert torch.equal(loss, head_loss(head, h, t, 0.0))
    bare = plain_cross_entropy(h, head.proj.weight, t)
    assert (loss - bare).abs().item() > 1e-3  # the adapter or bias counts
    trainable = [p for p in head.parameters() if p.requires_grad]
    assert all(g.abs().sum() > 0 for g in grads_of(loss, h, *trainable))
    assert ran == [] and keys == []


@pytest.mark.parametrize("rescale", [False, True], ids=["plain", "rescaled-tied"])
def test_causal_lm_features_through_its_head_are_its_logits(
    tiny_model: Callable[..., nn.Module], token_ids: Callable[..., Tensor], rescale: bool
) -> None:
    """CausalLM: forward(features_only=True) then lm_head gives forward()'s logits."""
    model = tiny_model("causal", rescale_tied_logits=rescale)
    ids = token_ids(2, 6)
    assert torch.equal(model.lm_head(model(ids, features_only=True)), model(ids))


@pytest.mark.parametrize("rescale", [False, True], ids=["plain", "rescaled-tied"])
def test_seq2seq_lm_features_through_its_head_are_its_logits(
    tiny_model: Callable[..., nn.Module], token_ids: Callable[..., Tensor], rescale: bool
) -> None:
    """Seq2SeqLM: forward(features_only=True) then lm_head gives forward()'s logits (padded source, too)."""
    model = tiny_model("seq2seq", rescale_tied_logits=rescale)
    src, tgt = token_ids(2, 7), token_ids(2, 5)
    mask = torch.ones_like(src)
    mask[1, 5:] = 0
    h = model(src, tgt, mask, features_only=True)
    assert h.shape == (2, 5, 32)
    assert torch.equal(model.lm_head(h), model(src, tgt, mask))


def test_a_target_whose_probability_underflows_fp32_keeps_its_exact_loss() -> None:
    """A row whose target's logit lies ~200 below the best (probability ~1e-87) gets the plain path's finite loss
    and gradient, not inf from log(0)."""
    h = torch.zeros(3, 2)
    h[:, 0] = 1.0
    weight = torch.tensor([[0.0, 0.0], [200.0, 0.0], [3.0, 0.0], [1.0, 0.0]], requires_grad=True)  # (V=4, D=2)
    targets = torch.tensor([0, 2, 1])  # row 0: logit 0 against 200
    fused = linear_cross_entropy(h, weight, targets)
    (grad_fused,) = torch.autograd.grad(fused, weight)
    plain = plain_cross_entropy(h, weight, targets)
    (grad_plain,) = torch.autograd.grad(plain, weight)
    assert torch.isfinite(fused) and fused.item() > 60
    torch.testing.assert_close(fused, plain)
    torch.testing.assert_close(grad_fused, grad_plain)
