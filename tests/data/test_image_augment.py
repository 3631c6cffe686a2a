"""Batch augmentations keep shapes, dtypes and labels; mixup/cutmix give soft targets that sum to 1."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tetraformer.data.image_augment import (
    Augmentation,
    cutmix,
    mixup,
    random_crop,
    random_erase,
    random_hflip,
    random_resized_crop,
)


@pytest.fixture
def batch() -> tuple[torch.Tensor, torch.Tensor]:
    """8 random 3x12x12 uint8 images and their classes among 5."""
    torch.manual_seed(0)
    return torch.randint(0, 256, (8, 3, 12, 12), dtype=torch.uint8), torch.arange(8) % 5


def test_crop_flip_and_resized_crop_keep_shape_dtype_and_content(
    batch: tuple[torch.Tensor, torch.Tensor],
) -> None:
    """Crops are shifted windows of the padded image; flips mirror or keep; each output stays (B, C, H, W)
    uint8."""
    pixels, _ = batch
    cropped = random_crop(pixels, 2)
    assert cropped.shape == pixels.shape and cropped.dtype == torch.uint8
    padded = F.pad(pixels, (2, 2, 2, 2))
    for image, source in zip(cropped, padded, strict=True):
        windows = [source[:, y : y + 12, x : x + 12] for y in range(5) for x in range(5)]
        assert any(torch.equal(image, w) for w in windows)
    flipped = random_hflip(pixels)
    assert all(torch.equal(f, p) or torch.equal(f, p.flip(-1)) for f, p in zip(flipped, pixels, strict=True))
    resized = random_resized_crop(pixels, 0.3)
    assert resized.shape == pixels.shape and resized.dtype == torch.uint8
    assert torch.equal(random_resized_crop(pixels, 1.0 - 1e-6, ratio=(1.0, 1.0)), pixels)  # the whole image


def test_augmentation_keeps_labels_without_mixing(batch: tuple[torch.Tensor, torch.Tensor]) -> None:
    """Crop, flip, resized crop and erasing change pixels, never the class ids."""
    pixels, labels = batch
    augment = Augmentation(crop_padding=2, hflip=True, resized_crop_scale=0.5, erase_prob=0.5)
    out, targets = augment(pixels, labels, 5)
    assert out.shape == pixels.shape and torch.equal(targets, labels)


def test_random_erase_fills_one_box_in_the_chosen_share_of_images() -> None:
    """Erased images differ from the source inside one axis-aligned box of 2-40% of the area and nowhere else;
    prob 0 keeps every image and prob 1 erases every one."""
    pixels = torch.zeros(64, 2, 20, 20, dtype=torch.uint8)  # noise is almost never 0 in a whole box
    erased = random_erase(pixels, 1.0)
    assert erased.shape == pixels.shape and erased.dtype == torch.uint8
    for image in erased:
        rows, cols = image.ne(0).any(0).nonzero().unbind(-1)
        height, width = int(rows.max() - rows.min()) + 1, int(cols.max() - cols.min()) + 1
        assert 0.02 * 400 - 2 <= height * width <= 0.4 * 400 + 4  # the box's size, rounded to whole pixels
        box = image[:, int(rows.min()) : int(rows.max()) + 1, int(cols.min()) : int(cols.max()) + 1]
        assert box.ne(0).float().mean() > 0.9  # noise fills the box, not a scatter of pixels
    assert torch.equal(random_erase(pixels, 0.0), pixels)
    share = random_erase(torch.zeros(4000, 1, 8, 8, dtype=torch.uint8), 0.25).flatten(1).ne(0).any(1).float().mean()
    assert 0.2 < float(share) < 0.3  # binomial(4000, 0.25): 0.25 +- 0.007 (1 sd)


@pytest.mark.parametrize("mix", [mixup, cutmix])
def test_mixing_gives_targets_that_sum_to_one(batch: tuple[torch.Tensor, torch.Tensor], mix) -> None:
    """Soft targets: rows sum to 1, weight only on the image's and its partner's classes; images stay in
    0..255."""
    pixels, labels = batch
    mixed, targets = mix(pixels, F.one_hot(labels, 5).float(), 1.0)
    assert mixed.shape == pixels.shape and mixed.min() >= 0 and mixed.max() <= 255
    assert torch.allclose(targets.sum(-1), torch.ones(8))
    partner = labels.flip(0)
    for row, own, other in zip(targets, labels, partner, strict=True):
        assert set(row.nonzero().flatten().tolist()) <= {int(own), int(other)}


def test_cutmix_weight_is_the_pasted_area() -> None:
    """Two constant images: the share of pixels from the other image equals the other class's target
    weight."""
    torch.manual_seed(3)
    pixels = torch.stack([torch.zeros(1, 10, 10), torch.full((1, 10, 10), 255.0)]).to(torch.uint8)
    mixed, targets = cutmix(pixels, torch.eye(2), 1.0)
    assert torch.isclose(targets[0, 1], (mixed[0] == 255).float().mean())


def test_training_collate_mixes_only_when_asked(batch: tuple[torch.Tensor, torch.Tensor]) -> None:
    """With both alphas set every batch gets (B, K) targets; without them labels stay class ids."""
    pixels, labels = batch
    _, soft = Augmentation(mixup_alpha=0.4, cutmix_alpha=1.0)(pixels, labels, 5)
    assert soft.shape == (8, 5) and torch.allclose(soft.sum(-1), torch.ones(8))
    assert Augmentation().mixes is False and torch.equal(Augmentation()(pixels, labels, 5)[1], labels)
