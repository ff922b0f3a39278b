"""RandomResizedCrop: torchvision v2's random window of an area and aspect ratio, resized."""

from __future__ import annotations

import math
from typing import Any

import torch

import fastprep.core._counter_rng as counter_rng
from fastprep.core._args import check_bool, check_real
from fastprep.transforms._base import any_of, exp, round_int, sqrt, unit_float, where, word
from fastprep.transforms._fusion_roles import FusionRole
from fastprep.transforms._geometry import RandomGeometric
from fastprep.transforms._inputs import check_interpolation, check_layout, check_size
from fastprep.transforms._sample import Item
from fastprep.transforms._window import INTERPOLATIONS, Window, check_jpeg_scale, geometry_tv, resize_region


def _check_range(owner: str, name: str, value: Any) -> tuple[float, float]:
    if not (isinstance(value, (tuple, list)) and len(value) == 2):
        raise ValueError(f"{owner}: expected {name} to be a pair (min, max), got {value!r}")
    lo, hi = (check_real(owner, name, v) for v in value)
    if not (0 < lo <= hi) or math.isinf(hi):
        raise ValueError(f"{owner}: expected {name} to be (min, max) with 0 < min <= max, got {value!r}")
    return float(lo), float(hi)


class RandomResizedCrop(RandomGeometric):
    """torchvision v2's ``RandomResizedCrop``: a window of random area (`scale` of the image) and
    aspect ratio (`ratio`, drawn log-uniform), resized to `size`, for every image, video, mask,
    bounding boxes and key points of the sample.

    The draw is torchvision's algorithm (10 tries, then the central crop of the nearest allowed
    ratio) on fastprep's counter generator: try k takes words 4k .. 4k+3 of the seed for the area,
    the ratio, the top and the left. The resize is torchvision's on the window only: uint8 images
    (bilinear, on CPUs where torchvision keeps uint8: AVX2, AVX-512, ARM) through fastprep's
    ``resized_crop`` op, torch's uint8 resampler's bits; other dtypes and modes through torch's
    ``interpolate`` in torchvision's calls; masks nearest; boxes and key points through torchvision's
    kernels. So on a CPU the result equals torchvision's resized_crop of the same window bit for bit.
    In :class:`Compose`, flips before or after it and ``ToDtype`` + ``Normalize`` after it run in
    the same op call.

    Args:
        size: an int (square) or (h, w).
        scale, ratio: the ranges of the window's area (of the image's) and aspect ratio (w / h).
        interpolation: "bilinear" (torchvision's default), "nearest", "nearest-exact", "bicubic"
            (an InterpolationMode or PIL's constant too).
        antialias: torchvision's default True (None: False, as torchvision's for tensors).
        layout: "CHW", or "HWC" for plain HWC tensors (PIL and numpy are HWC, tv_tensors CHW).
        generator: draw the seeds from this torch.Generator instead of torch's default one.
        jpeg_scale: how a JPEG window (a packed record, a JpegFile) is read: "exact" (default: the
            full decode's pixels, torchvision's result bit for bit) or "reduced" (decoded at the
            smallest of libjpeg-turbo's 1/8, 2/8, 4/8 scales that keeps the window at least
            `size`, then resized: fewer pixels decoded and resized, not the same result;
            docs/resize.md states its difference and speed). Other images are read exactly.

    Example:
        >>> RandomResizedCrop(224)(torch.zeros(3, 480, 640, dtype=torch.uint8)).shape
        torch.Size([3, 224, 224])
    """

    def __init__(self, size: int | tuple[int, int], scale: tuple[float, float] = (0.08, 1.0),
                 ratio: tuple[float, float] = (3 / 4, 4 / 3), interpolation: Any = "bilinear",
                 antialias: bool | None = True, layout: str = "CHW", generator: torch.Generator | None = None,
                 jpeg_scale: str = "exact"):
        super().__init__(generator)
        self.jpeg_scale = check_jpeg_scale("RandomResizedCrop", jpeg_scale)
        self.size = check_size("RandomResizedCrop", size)
        self.scale = _check_range("RandomResizedCrop", "scale", scale)
        self.ratio = _check_range("RandomResizedCrop", "ratio", ratio)
        self.interpolation = check_interpolation("RandomResizedCrop", interpolation, INTERPOLATIONS)
        self.antialias = False if antialias is None else check_bool("RandomResizedCrop", "antialias", antialias)
        self.layout = check_layout("RandomResizedCrop", layout)

    def repr_args(self) -> dict[str, Any]:
        args: dict[str, Any] = {"size": self.size, "scale": self.scale, "ratio": self.ratio}
        if self.interpolation != "bilinear":
            args["interpolation"] = self.interpolation
        if not self.antialias:
            args["antialias"] = False
        if self.layout != "CHW":
            args["layout"] = self.layout
        if self.jpeg_scale != "exact":
            args["jpeg_scale"] = self.jpeg_scale
        return args

    @property
    def fusion_role(self) -> FusionRole | None:
        """Bilinear resizing is what the resized_crop op computes."""
        return FusionRole.RESIZED_CROP if self.interpolation == "bilinear" else None

    def make_params(self, seed: Any, H: Any, W: Any) -> tuple[Any, Any, Any, Any]:
        """(top, left, height, width) of the window drawn from `seed` in an H x W image: ints, or
        int64 arrays from uint64 arrays of seeds and int64 sizes (one per sample), the same bits."""
        r0, r1 = self.ratio
        s0, s1 = self.scale
        in_ratio = W / H  # what is left when no try fits: the central crop of the nearest allowed ratio
        narrow, wide = in_ratio < r0, in_ratio > r1
        w = where(narrow, W, where(wide, round_int(H * r1), W))
        h = where(narrow, round_int(W / r0), H)
        top, left = (H - h) // 2, (W - w) // 2
        area, log_lo, log_hi = H * W, math.log(r0), math.log(r1)
        todo = H == H  # True: no try fitted yet
        for k in range(10):
            target = area * (s0 + unit_float(word(seed, 4 * k)) * (s1 - s0))
            aspect = exp(log_lo + unit_float(word(seed, 4 * k + 1)) * (log_hi - log_lo))
            wk, hk = round_int(sqrt(target * aspect)), round_int(sqrt(target / aspect))
            fit = todo & (0 < wk) & (wk <= W) & (0 < hk) & (hk <= H)
            tk = counter_rng.uniform_below(word(seed, 4 * k + 2), where(fit, H - hk + 1, 1))
            lk = counter_rng.uniform_below(word(seed, 4 * k + 3), where(fit, W - wk + 1, 1))
            top, left, h, w = (where(fit, a, b) for a, b in ((tk, top), (lk, left), (hk, h), (wk, w)))
            todo = where(fit, False, todo)
            if not any_of(todo):
                break
        return top, left, h, w

    def window(self, H: int, W: int, seed: int, flip: bool = False) -> Window:
        return Window(*self.make_params(seed, H, W), flip=flip)

    def cut(self, item: Item, win: Window, seed: int, H: int, W: int) -> Any:
        if not item.dense:
            return geometry_tv(item, win, "constant", H, W, resize=self.size)
        return item.wrap(resize_region(item, win, W, self.size, self.antialias, self.interpolation, self.jpeg_scale))
