"""Training augmentation on whole batches of image tensors: random crop with padding, horizontal flip,
RandomResizedCrop, random erasing, and mixup / cutmix with soft targets. Validation, test and predict batches
stay as read."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from tetraformer.errors import at_least, within


@dataclass
class Augmentation:
    """What the training collate does to each batch (all off by default)."""

    crop_padding: int = 0  # pad by this many pixels (zeros), then crop back to size at a random offset
    hflip: bool = False  # mirror half the images left-right (off: digits and letters are not symmetric)
    resized_crop_scale: float = 0.0  # > 0: RandomResizedCrop of at least this share of the area (e.g. 0.35)
    mixup_alpha: float = 0.0  # > 0: mix pairs of images with Beta(alpha, alpha) weights
    cutmix_alpha: float = 0.0  # > 0: paste a box of another image, weight = its area; one of the two per batch
    erase_prob: float = 0.0  # > 0: fill a random box (2-40% of the area) of this share of images with noise

    def __post_init__(self) -> None:
        """Reject sizes and strengths that cannot augment: an OptionError names the field."""
        at_least(self, 0, crop_padding=self.crop_padding, mixup_alpha=self.mixup_alpha, cutmix_alpha=self.cutmix_alpha)
        within(self, 0, 1, resized_crop_scale=self.resized_crop_scale, erase_prob=self.erase_prob)

    @property
    def mixes(self) -> bool:
        """Whether batches get soft targets."""
        return self.mixup_alpha > 0 or self.cutmix_alpha > 0

    def __call__(self, pixels: Tensor, labels: Tensor, num_classes: int) -> tuple[Tensor, Tensor]:
        """(B, C, H, W) uint8 and (B,) class ids -> augmented images (uint8, or float when mixed) and targets.

        Targets stay class ids unless mixing, which gives (B, num_classes) probabilities that sum to 1.
        """
        if self.resized_crop_scale > 0:
            pixels = random_resized_crop(pixels, self.resized_crop_scale)
        if self.crop_padding > 0:
            pixels = random_crop(pixels, self.crop_padding)
        if self.hflip:
            pixels = random_hflip(pixels)
        if self.erase_prob > 0:
            pixels = random_erase(pixels, self.erase_prob)
        if not self.mixes:
            return pixels, labels
        targets = F.one_hot(labels, num_classes).float()  # (B, K)
        use_cutmix = self.cutmix_alpha > 0 and (self.mixup_alpha <= 0 or bool(torch.rand(()) < 0.5))
        if use_cutmix:
            return cutmix(pixels, targets, self.cutmix_alpha)
        return mixup(pixels, targets, self.mixup_alpha)


def random_crop(pixels: Tensor, padding: int) -> Tensor:
    """Zero-pad each (B, C, H, W) image by `padding`, then cut an H x W window at a random offset each."""
    b, _, h, w = pixels.shape
    padded = F.pad(pixels, (padding, padding, padding, padding))  # (B, C, H + 2p, W + 2p)
    dy = torch.randint(0, 2 * padding + 1, (b,))
    dx = torch.randint(0, 2 * padding + 1, (b,))
    rows = (dy[:, None] + torch.arange(h))[:, :, None]  # (B, H, 1)
    cols = (dx[:, None] + torch.arange(w))[:, None, :]  # (B, 1, W)
    out = padded[torch.arange(b)[:, None, None], :, rows, cols]  # (B, H, W, C)
    return out.permute(0, 3, 1, 2).contiguous()


def random_hflip(pixels: Tensor) -> Tensor:
    """Mirror a random half of the (B, C, H, W) images left-right."""
    flip = torch.rand(pixels.shape[0]) < 0.5  # (B,)
    return torch.where(flip[:, None, None, None], pixels.flip(-1), pixels)


def random_resized_crop(pixels: Tensor, min_scale: float, ratio: tuple[float, float] = (3 / 4, 4 / 3)) -> Tensor:
    """A random box per image (area share in [min_scale, 1], aspect in `ratio`) resized back to H x W."""
    b = pixels.shape[0]
    area = torch.empty(b).uniform_(min_scale, 1.0)
    aspect = torch.exp(torch.empty(b).uniform_(math.log(ratio[0]), math.log(ratio[1])))
    sw = torch.sqrt(area * aspect).clamp(max=1.0)  # box width / image width
    sh = torch.sqrt(area / aspect).clamp(max=1.0)
    cx = (torch.rand(b) * 2 - 1) * (1 - sw)  # box centre in [-1, 1] coordinates, the box inside the image
    cy = (torch.rand(b) * 2 - 1) * (1 - sh)
    theta = torch.zeros(b, 2, 3)
    theta[:, 0, 0], theta[:, 0, 2], theta[:, 1, 1], theta[:, 1, 2] = sw, cx, sh, cy
    grid = F.affine_grid(theta, list(pixels.shape), align_corners=False)  # (B, H, W, 2)
    out = F.grid_sample(pixels.float(), grid, mode="bilinear", padding_mode="border", align_corners=False)
    return out.round().clamp(0, 255).to(pixels.dtype)


def random_erase(
    pixels: Tensor,
    prob: float,
    scale: tuple[float, float] = (0.02, 0.4),
    ratio: tuple[float, float] = (0.3, 3.3),
) -> Tensor:
    """Random erasing (Zhong et al., 2020): in a `prob` share of the (B, C, H, W) images, a box of `scale` of the
    area and aspect (height / width) in `ratio` is filled with uniform noise, one value per pixel and channel."""
    b, _, h, w = pixels.shape
    area = torch.empty(b).uniform_(*scale) * h * w
    aspect = torch.exp(torch.empty(b).uniform_(math.log(ratio[0]), math.log(ratio[1])))
    bh = torch.sqrt(area * aspect).round().clamp(1, h).long()  # (B,) box height in pixels
    bw = torch.sqrt(area / aspect).round().clamp(1, w).long()
    y0 = (torch.rand(b) * (h - bh + 1)).long()  # top row, so the box stays inside the image
    x0 = (torch.rand(b) * (w - bw + 1)).long()
    erase = torch.rand(b) < prob  # (B,)
    rows = torch.arange(h)[None, :]  # (1, H)
    cols = torch.arange(w)[None, :]
    in_rows = (rows >= y0[:, None]) & (rows < (y0 + bh)[:, None])  # (B, H)
    in_cols = (cols >= x0[:, None]) & (cols < (x0 + bw)[:, None])  # (B, W)
    box = (in_rows[:, :, None] & in_cols[:, None, :] & erase[:, None, None])[:, None]  # (B, 1, H, W)
    noise = torch.randint(0, 256, pixels.shape, dtype=torch.int16).to(pixels.dtype)
    return torch.where(box, noise, pixels)


def mixup(pixels: Tensor, targets: Tensor, alpha: float) -> tuple[Tensor, Tensor]:
    """Each image and target mixed with the reversed batch's, by one Beta(alpha, alpha) weight per batch."""
    lam = float(torch.distributions.Beta(alpha, alpha).sample())
    mixed = lam * pixels.float() + (1 - lam) * pixels.flip(0).float()  # (B, C, H, W)
    return mixed, lam * targets + (1 - lam) * targets.flip(0)


def cutmix(pixels: Tensor, targets: Tensor, alpha: float) -> tuple[Tensor, Tensor]:
    """A box of the reversed batch pasted into each image; the targets mix by the box's share of the area."""
    _, _, h, w = pixels.shape
    lam = float(torch.distributions.Beta(alpha, alpha).sample())
    bh, bw = round(h * math.sqrt(1 - lam)), round(w * math.sqrt(1 - lam))
    y0 = int(torch.randint(0, h - bh + 1, ()))
    x0 = int(torch.randint(0, w - bw + 1, ()))
    mixed = pixels.float().clone()
    mixed[:, :, y0 : y0 + bh, x0 : x0 + bw] = pixels.flip(0)[:, :, y0 : y0 + bh, x0 : x0 + bw].float()
    share = bh * bw / (h * w)  # of the other image
    return mixed, (1 - share) * targets + share * targets.flip(0)
