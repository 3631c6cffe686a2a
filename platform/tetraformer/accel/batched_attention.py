"""Attention as batched matmuls around a softmax, with a backward written out so that no step copies twice.

Composed of autograd's own ops, short-sequence attention (a ViT's 50 patches, a BERT's 128 tokens) spends more
time moving memory than multiplying: the scaled queries and the transposed keys are copied again by matmul, and
the gradients leave in the (B, H, T, Dh) order the matmuls write, so the backward of a fused QKV projection's
split gathers them head by head. Here every input is copied once into the batched order (the query scaled on the
way), the forward keeps the softmax weights, and each gradient is written straight into its input's own memory
order (the `empty_like` of a view of a fused projection is (B, T, H, Dh)), which the split's backward then joins
in whole rows. Dropout is not taken here (attention_kernels' eager kernel composes it from autograd's ops).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor


def batched_attention(
    q: Tensor, k: Tensor, v: Tensor, blocked: Tensor | None, bias: Tensor | None, scale: float
) -> Tensor:
    """softmax(q k^T * scale + bias, -inf where blocked) v: (B, H, T, Dh), (B, H, S, Dh) x2, a boolean "may not
    attend" and an additive bias, each broadcastable to (B, H, T, S) -> (B, H, T, Dh) in q's dtype; no autocast."""
    with torch.autocast(q.device.type, enabled=False):
        return BatchedAttention.apply(q, k, v, blocked, bias, scale)


def layout_of(x: Tensor) -> Tensor:
    """A storage-free stand-in with x's sizes, strides and dtype, so a gradient can take x's memory order later."""
    return torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device="meta")


def like(layout: Tensor, values: Tensor, scale: float = 1.0) -> Tensor:
    """values (in batched order) written once into a new tensor in the memory order of `layout`, scaled."""
    out = torch.empty_like(layout, device=values.device)  # dense, in the order of the input's strides
    return torch.mul(values.view(out.shape), scale, out=out) if scale != 1.0 else out.copy_(values.view(out.shape))


class BatchedAttention(torch.autograd.Function):
    """The attention above, its gradients from the kept softmax weights."""

    @staticmethod
    def forward(
        ctx: Any, q: Tensor, k: Tensor, v: Tensor, blocked: Tensor | None, bias: Tensor | None, scale: float
    ) -> Tensor:
        """(B, H, T, Dh), (B, H, S, Dh) x2 -> (B, H, T, Dh)."""
        b, h, t, d = q.shape
        s = k.shape[-2]
        qs = torch.mul(q, scale, out=q.new_empty(b, h, t, d)).view(b * h, t, d)  # scaled and batched in one pass
        kb, vb = (x.reshape(b * h, s, d).to(q.dtype) for x in (k, v))  # (BH, S, Dh): copied only if not batched
        scores = torch.bmm(qs, kb.transpose(1, 2)).view(b, h, t, s)  # (B, H, T, S)
        if bias is not None:
            scores.add_(bias.to(scores.dtype))
        if blocked is not None:
            scores.masked_fill_(blocked, float("-inf"))
        weights = scores.softmax(dim=-1).view(b * h, t, s)
        ctx.save_for_backward(qs, kb, vb, weights)
        ctx.scale, ctx.layouts = scale, tuple(layout_of(x) for x in (q, k, v))
        ctx.bias = None if bias is None else layout_of(bias)
        return torch.bmm(weights, vb).view(b, h, t, d)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:
        """Gradients of q, k, v (each in its input's memory order) and of a bias that wants one."""
        qs, kb, vb, weights = ctx.saved_tensors
        b, h, t, d = grad.shape
        with torch.autocast(grad.device.type, enabled=False):
            g = grad.reshape(b * h, t, d)  # (BH, T, Dh)
            dv = torch.bmm(weights.transpose(1, 2), g)  # (BH, S, Dh)
            dscores = torch._softmax_backward_data(torch.bmm(g, vb.transpose(1, 2)), weights, -1, weights.dtype)
            dq = torch.bmm(dscores, kb)  # (BH, T, Dh), times the scale
            dk = torch.bmm(dscores.transpose(1, 2), qs)  # (BH, S, Dh): qs carries the scale
            q, k, v = ctx.layouts
            dbias = None
            if ctx.bias is not None and ctx.needs_input_grad[4]:
                dbias = dscores.view(b, h, t, -1).sum_to_size(ctx.bias.shape).to(ctx.bias.dtype)
            return like(q, dq, ctx.scale), like(k, dk), like(v, dv), None, dbias, None
