"""The seed workload, defined once: the pipeline the benchmarks, the tools, the docs and the tests
measure and check (a random crop, a Bernoulli(p) mask dilated to the 4 neighbours zeroing all
channels, RGB -> YCbCr), as the fastprep Compose that fuses it into `crop_mask_ycbcr`."""

from __future__ import annotations

import torch

from fastprep.core._args import check_bool
from fastprep.transforms._compose import Compose
from fastprep.transforms._flips import RandomHorizontalFlip
from fastprep.transforms._geometry import RandomCrop
from fastprep.transforms._pixels import RandomDilatedMask, RGBToYCbCr

# The reference figures (README, docs/performance.md): a 256x256 crop, p = 0.25.
CROP = 256
P = 0.25


def seed_workload(size: int | tuple[int, int] = CROP, p: float = P, *, layout: str = "CHW", hflip: bool = False,
                  out_dtype: torch.dtype | None = None, scale: float = 1.0, fuse: bool = True) -> Compose:
    """The seed workload as a Compose: ``[RandomHorizontalFlip()] -> RandomCrop(size) ->
    RandomDilatedMask(p) -> RGBToYCbCr(out_dtype, scale)``, one `crop_mask_ycbcr` call a sample
    (a batch call a chunk in the Loader) when fused.

    Args:
        size: the crop, an int (square) or (height, width); 256 in the reference figures.
        p: the probability that a pixel seeds the mask (dilated to its 4 neighbours).
        layout: how plain tensor inputs are read, "CHW" or "HWC" (the crop, and the flip with hflip).
        hflip: put a RandomHorizontalFlip(p=0.5) in front of the crop (it fuses into the same op).
        out_dtype: the output dtype; None keeps uint8 (the YCbCr values rounded).
        scale: multiplies the YCbCr values (1 / 255 with out_dtype=torch.float32 for [0, 1] floats).
        fuse: False runs the steps one by one (the same bits and draws).

    Returns:
        The Compose; each step is a transform of fastprep's, so its arguments are checked there.

    Example:
        >>> import numpy as np, torch
        >>> from fastprep import transforms as T
        >>> tf = T.seed_workload(64)
        >>> tf(np.zeros((100, 120, 3), np.uint8)).shape
        torch.Size([3, 64, 64])
        >>> T.seed_workload(64, out_dtype=torch.float32, scale=1 / 255, hflip=True).plan.fused is not None
        True
    """
    check_bool("seed_workload", "hflip", hflip)
    steps = [RandomCrop(size, layout=layout), RandomDilatedMask(p), RGBToYCbCr(out_dtype, scale)]
    if hflip:
        steps.insert(0, RandomHorizontalFlip(layout=layout))
    return Compose(steps, fuse=fuse)
