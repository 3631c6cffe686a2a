"""Cross-entropy of a linear head's logits without the (N, V) logits: rows in chunks, gradients made as they go.

The plain path builds (N, V) logits, casts them to fp32, takes log_softmax, and in backward makes an (N, V)
gradient again; at a GPT's vocabulary that is most of a step's memory traffic. `linear_cross_entropy` takes the
hidden states and the head's weight instead: for each chunk of rows it forms the chunk's logits (in the
autocast dtype, as the plain path's matmul does), its fp32 log-sum-exp and loss, and, when gradients are wanted,
the chunk's softmax-minus-target gradient, multiplied straight into the hidden states' and weight's gradients.
Backward only scales those by the loss's gradient. The two paths sum in other orders, so which one runs is not
timed but set (accel/numerics.py: `TETRAFORMER_LM_LOSS=logits|fused`, logits by default, kept in checkpoints).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tetraformer.accel import bf16_linear
from tetraformer.accel.bf16_linear import LayoutLinear

TINY = 1e-30  # a target probability below this is recomputed from the log-sum-exp (fp32 underflows near 1e-38)
CHUNK_ELEMENTS = 1 << 20  # logits per chunk (4 MB in fp32), small enough to stay in cache between passes


def compute_dtype(h: Tensor, w: Tensor) -> torch.dtype:
    """The dtype the head's matmul runs in: autocast's where it is on, else the operands'."""
    if torch.is_autocast_enabled(h.device.type):
        return torch.get_autocast_dtype(h.device.type)
    return torch.promote_types(h.dtype, w.dtype)


class _LinearCrossEntropy(torch.autograd.Function):
    """Mean cross-entropy of h W^T against targets; gradients made in forward, scaled in backward."""

    @staticmethod
    def forward(
        ctx, h: Tensor, w: Tensor, targets: Tensor, ignore_index: int, smoothing: float, chunk: int | None
    ) -> Tensor:
        """h (N, D), w (V, D), targets (N,) -> the mean loss over targets that are not ignore_index."""
        dtype = compute_dtype(h, w)
        hc, wc = h.to(dtype), w.to(dtype)  # (N, D), (V, D)
        valid = targets != ignore_index  # (N,)
        count = valid.sum().clamp(min=1)
        want_h, want_w = ctx.needs_input_grad[:2]
        grad_h = torch.empty_like(hc) if want_h else None  # (N, D)
        grad_w = torch.zeros(w.shape, dtype=torch.float32, device=w.device) if want_w else None  # (V, D)
        total = torch.zeros((), dtype=torch.float32, device=h.device)
        rows = max(1, (chunk or CHUNK_ELEMENTS) // w.shape[0])
        with torch.autocast(h.device.type, enabled=False):
            for start in range(0, h.shape[0], rows):
                part = slice(start, start + rows)
                weight = valid[part].float() / count  # (c,) fp32 whatever the default dtype: each row's share
                loss, grad = chunk_loss(hc[part], wc, targets[part], weight, smoothing, want_h or want_w)
                total += loss
                if grad is None:
                    continue
                grad = grad.to(dtype)  # (c, V): d(mean loss) / d(logits)
                if grad_h is not None:
                    grad_h[part] = grad @ wc
                if grad_w is not None:
                    grad_w += (grad.t() @ hc[part]).float()
        ctx.save_for_backward(
            grad_h if grad_h is not None else torch.empty(0), grad_w if grad_w is not None else torch.empty(0)
        )
        ctx.dtypes = (h.dtype, w.dtype)
        return total

    @staticmethod
    def backward(ctx, grad_loss: Tensor) -> tuple[Tensor | None, ...]:
        """The gradients made in forward, times the loss's gradient."""
        grad_h, grad_w = ctx.saved_tensors
        want_h, want_w = ctx.needs_input_grad[:2]
        dh = (grad_h * grad_loss).to(ctx.dtypes[0]) if want_h else None
        dw = (grad_w * grad_loss).to(ctx.dtypes[1]) if want_w else None
        return dh, dw, None, None, None, None


def chunk_loss(
    h: Tensor, w: Tensor, targets: Tensor, weight: Tensor, smoothing: float, want_grad: bool
) -> tuple[Tensor, Tensor | None]:
    """A chunk's rows' losses summed with (c,) weights (zero for ignored rows), and the sum's gradient with
    respect to the (c, V) logits in fp32 when wanted."""
    logits = (h @ w.t()).float()  # (c, V)
    safe = torch.where(weight > 0, targets, 0)[:, None]  # (c, 1)
    target_logit = logits.gather(1, safe)[:, 0]  # (c,)
    probs = logits.softmax(dim=-1)  # (c, V): one fused pass, where log-sum-exp alone takes three
    nll = target_nll(logits, probs.gather(1, safe)[:, 0], safe)
    if smoothing > 0:
        lse = nll + target_logit
        nll = (1 - smoothing) * nll + smoothing * (lse - logits.mean(dim=-1))
    loss = (nll * weight).sum()
    if not want_grad:
        return loss, None
    grad = probs
    if smoothing > 0:
        grad -= smoothing / logits.shape[-1]
    grad.scatter_add_(1, safe, torch.full_like(weight, smoothing - 1)[:, None])  # minus the target's share
    return loss, grad.mul_(weight[:, None])


def target_nll(logits: Tensor, target_prob: Tensor, safe: Tensor) -> Tensor:
    """-log p(target) per row (c,); rows whose probability underflowed fp32 take log-sum-exp minus the logit."""
    nll = -target_prob.log()
    low = target_prob < TINY
    if low.any():
        rows = logits[low]  # (r, V)
        nll[low] = rows.logsumexp(dim=-1) - rows.gather(1, safe[low])[:, 0]
    return nll


def linear_cross_entropy(
    h: Tensor,
    weight: Tensor,
    targets: Tensor,
    ignore_index: int = -100,
    label_smoothing: float = 0.0,
    chunk_elements: int | None = None,
) -> Tensor:
    """Mean cross-entropy of (..., D) hidden states through a bias-free (V, D) head against (...) targets, in
    chunks of about chunk_elements logits (CHUNK_ELEMENTS when None)."""
    flat = h.reshape(-1, h.shape[-1])  # (N, D)
    if not torch.is_grad_enabled():  # needs_input_grad follows requires_grad, not grad mode: make no gradients
        flat, weight = flat.detach(), weight.detach()
    return _LinearCrossEntropy.apply(flat, weight, targets.reshape(-1), ignore_index, label_smoothing, chunk_elements)


def plain_cross_entropy(
    h: Tensor,
    weight: Tensor,
    targets: Tensor,
    ignore_index: int = -100,
    label_smoothing: float = 0.0,
    layout: str = "natural",
) -> Tensor:
    """The same loss through (N, V) logits: the head's matmul as a LayoutLinear in this layout mode runs it (on a
    CPU in bf16, else F.linear), then fp32 cross-entropy."""
    logits = bf16_linear.linear(h, weight, mode=layout).reshape(-1, weight.shape[0])  # (N, V)
    return F.cross_entropy(
        logits.float(), targets.reshape(-1), ignore_index=ignore_index, label_smoothing=label_smoothing
    )


def lm_loss(
    head: nn.Module,
    h: Tensor,
    targets: Tensor,
    ignore_index: int = -100,
    smoothing: float = 0.0,
    path: str = "logits",
) -> Tensor:
    """Mean cross-entropy of an LM head (core LMHead: scale, then a bias-free Linear) over (B, T, D) hidden
    states, by `path` (logits or fused); any other head computes its logits."""
    proj = getattr(head, "proj", None)
    if type(proj) not in (nn.Linear, LayoutLinear) or proj.bias is not None or not hasattr(head, "scale"):
        logits = head(h)  # (B, T, V)
        return F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]).float(),
            targets.reshape(-1),
            ignore_index=ignore_index,
            label_smoothing=smoothing,
        )
    h = h * head.scale if head.scale != 1.0 else h
    if path == "fused":
        return linear_cross_entropy(h, proj.weight, targets, ignore_index, smoothing)
    layout = getattr(proj, "layout_mode", "natural")  # a LayoutLinear's bf16 mode
    return plain_cross_entropy(h, proj.weight, targets, ignore_index, smoothing, layout)
