"""The one mask convention: boolean "may attend", combined by one function."""

from __future__ import annotations

import torch

from tetraformer.core.masks import causal_mask, combine_masks, mask_to_bias


def test_causal_mask_with_offset() -> None:
    """Query i (absolute position offset + i) may attend keys 0..offset + i."""
    expected = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]], dtype=torch.bool)
    assert torch.equal(causal_mask(2, 4, offset=2), expected)
    assert torch.equal(causal_mask(3, 3), torch.ones(3, 3, dtype=torch.bool).tril())


def test_combine_masks_none_when_nothing_to_mask() -> None:
    """No padding and no causality means no mask at all (SDPA's fastest path)."""
    assert combine_masks(None, False, 3, 3) is None


def test_combine_masks_padding_and_causal() -> None:
    """Padding and causal masks intersect into (B, 1, Tq, Tk)."""
    padding = torch.tensor([[1, 1, 1], [1, 1, 0]])
    mask = combine_masks(padding, True, 3, 3)
    assert mask.shape == (2, 1, 3, 3)
    assert torch.equal(mask[0, 0], torch.ones(3, 3, dtype=torch.bool).tril())
    assert torch.equal(mask[1, 0, 2], torch.tensor([True, True, False]))


def test_combine_masks_rows_without_keys_attend_everything() -> None:
    """A left-pad query before any real key gets an all-True row, so softmax stays finite."""
    padding = torch.tensor([[0, 0, 1, 1]])
    mask = combine_masks(padding, True, 4, 4)[0, 0]
    assert mask[0].all() and mask[1].all()
    assert torch.equal(mask[2], torch.tensor([False, False, True, False]))
    assert torch.equal(mask[3], torch.tensor([False, False, True, True]))


def test_mask_to_bias_folds_mask_into_bias() -> None:
    """Allowed entries keep the bias, the rest become -inf; shapes broadcast to (B, H, Tq, Tk)."""
    mask = torch.tensor([[1, 0], [1, 1]], dtype=torch.bool)[None, None].expand(3, 1, 2, 2)
    bias = torch.randn(1, 4, 2, 2)
    folded = mask_to_bias(mask, bias, torch.float32)
    assert folded.shape == (3, 4, 2, 2)
    assert torch.equal(folded[:, :, 0, 1], torch.full((3, 4), float("-inf")))
    assert torch.equal(folded[1, :, 1], bias[0, :, 1])
    assert mask_to_bias(mask, None, torch.float32) is mask
    assert mask_to_bias(None, bias, torch.float32) is bias


def test_causal_mask_follows_the_requested_device() -> None:
    """Without a padding mask to copy the device from, the causal mask is built where it is asked for."""
    mask = combine_masks(None, True, 2, 3, offset=1, device=torch.device("meta"))
    assert mask.device.type == "meta"
    assert mask.shape == (1, 1, 2, 3)
