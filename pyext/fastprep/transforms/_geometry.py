"""Geometric transforms: one window per sample, applied to every image, video, mask, bounding boxes
and key points in it (see _sample.py and _window.py); RandomCrop. RandomResizedCrop, Resize and
CenterCrop, the flips are in their own modules."""

from __future__ import annotations

from typing import Any

import torch

import fastprep.core._counter_rng as counter_rng
from fastprep.core._args import check_bool
from fastprep.core._roles import tv_class
from fastprep.ops._crop import random_crop
from fastprep.transforms._base import RandomTransform, Transform, describe_sample, word
from fastprep.transforms._fusion_roles import FusionRole
from fastprep.transforms._inputs import (
    PADDING_MODES,
    check_fill,
    check_layout,
    check_padding,
    check_size,
    error_context,
)
from fastprep.transforms._sample import GEOMETRY, Item, Sample
from fastprep.transforms._window import (
    OP_DTYPES,
    Window,
    check_fill_value,
    crop_dense,
    geometry_tv,
)

_TV_NAME = {"image": "Image", "video": "Video", "mask": "Mask"}


def fill_for(fill: Any, item: Item) -> Any:
    """torchvision's per-type fill: fill[type(x)], then (fastprep) the tv_tensors class of the
    item's kind (so {tv_tensors.Image: v} also fills a plain or PIL image), then fill["others"], 0."""
    if not isinstance(fill, dict):
        return fill
    if type(item.value) in fill:
        return fill[type(item.value)]
    cls = tv_class(_TV_NAME.get(item.kind, ""))
    if cls is not None and cls in fill:
        return fill[cls]
    return fill.get("others", 0)


class GeometricTransform(Transform):
    """Find the sample's window (from a drawn seed, for a random one), cut every geometric item with it."""

    layout = "CHW"

    def transform(self, sample: Any) -> Any:
        s = Sample(sample, self.layout, GEOMETRY, self)
        return self.apply(s, self.seed(), flip=False)

    def seed(self) -> int | None:
        """The sample's seed: none for a deterministic transform (RandomGeometric draws one)."""
        return None

    def apply(self, s: Sample, seed: int, flip: bool) -> Any:
        """The sample cut by the window of `seed`; with `flip`, as if the sample had been flipped
        horizontally first (RandomHorizontalFlip in front, in Compose)."""
        outs = {}
        with error_context(self, describe_sample(s)):
            H, W = s.size()
            win = self.window(H, W, seed, flip)
            for item in s.items:
                outs[item.index] = self.cut(item, win, seed, H, W)
        return s.rebuild(outs)

    def window(self, H: int, W: int, seed: int, flip: bool) -> Window:
        raise NotImplementedError

    def cut(self, item: Item, win: Window, seed: int, H: int, W: int) -> Any:
        raise NotImplementedError


class RandomGeometric(GeometricTransform, RandomTransform):
    """A geometric transform drawing one seed per sample (its window's)."""

    def seed(self) -> int:
        return self.draw()


class RandomCrop(RandomGeometric):
    """Crop `size` at a uniformly random position, torchvision v2's ``RandomCrop``: the image and
    every mask, video, bounding boxes and key points of the sample at the same window.

    The window: ``top = uniform_below(random_word(seed, 0), H_padded - h + 1)``, left likewise
    with word 1 (fastprep.random_crop_params with padding), the seed drawn from torch's generator.

    Args:
        size: an int (a square crop) or (h, w); as torchvision, a 1-element sequence is square.
        padding: pad first: an int, (left/right, top/bottom) or (left, top, right, bottom).
        pad_if_needed: pad an axis shorter than the crop by the shortfall on both sides.
        fill: the padding value: a number, one per channel, or a dict ``{tv_tensors type: value}``
            (``"others"`` for the rest) as torchvision's.
        padding_mode: "constant" (fill), "edge", "reflect" or "symmetric"; only the window is
            read, the padded image is never made. Boxes and key points take "constant" only.
        layout: "CHW", or "HWC" for plain HWC tensors (PIL and numpy are HWC, tv_tensors CHW).
        generator: draw the seeds from this torch.Generator instead of torch's default one.

    Example:
        >>> RandomCrop(256, layout="HWC")(np.zeros((512, 512, 3), np.uint8)).shape
        torch.Size([3, 256, 256])
    """

    def __init__(self, size: int | tuple[int, int], padding: Any = None, pad_if_needed: bool = False,
                 fill: Any = 0, padding_mode: str = "constant", layout: str = "CHW",
                 generator: torch.Generator | None = None):
        super().__init__(generator)
        self.size = check_size("RandomCrop", size)
        self.padding = check_padding("RandomCrop", padding)
        self.pad_if_needed = check_bool("RandomCrop", "pad_if_needed", pad_if_needed)
        self.fill = check_fill("RandomCrop", fill)
        if padding_mode not in PADDING_MODES:
            raise ValueError(f"RandomCrop: expected padding_mode to be one of {list(PADDING_MODES)}, "
                             f"got {padding_mode!r}")
        self.padding_mode = padding_mode
        self.layout = check_layout("RandomCrop", layout)

    def repr_args(self) -> dict[str, Any]:
        args: dict[str, Any] = {"size": self.size}
        if any(self.padding):
            args["padding"] = self.padding
        if self.pad_if_needed:
            args["pad_if_needed"] = True
        if any(self.padding) or self.pad_if_needed:
            args.update(fill=self.fill, padding_mode=self.padding_mode)
        if self.layout != "CHW":
            args["layout"] = self.layout
        return args

    @property
    def fusion_role(self) -> FusionRole | None:
        """A crop of the image as it is (no padding) fuses into an op's read window."""
        return None if self.pad_if_needed or any(self.padding) else FusionRole.CROP

    def make_params(self, seed: Any, H: Any, W: Any) -> tuple[Any, Any]:
        """(top, left) of the crop drawn from `seed` in an H x W image (padded or not): ints, or
        int64 arrays from uint64 arrays of seeds and sizes, one per sample (FusionPlan's chunks)."""
        h, w = self.size
        return counter_rng.uniform_below(word(seed, 0), H - h + 1), counter_rng.uniform_below(word(seed, 1), W - w + 1)

    def fits(self, H: int, W: int) -> bool:
        """The crop fits an H x W image as it is (no padding)."""
        return H >= self.size[0] and W >= self.size[1]

    def check_fits(self, H: int, W: int, padded: bool = False) -> None:
        if not self.fits(H, W):
            raise ValueError(f"crop {self.size[0]}x{self.size[1]} is larger than the {'padded ' if padded else ''}"
                             f"image {H}x{W}; pass pad_if_needed=True to pad")

    def window(self, H: int, W: int, seed: int, flip: bool = False) -> Window:
        """The drawn window (make_params of torchvision's RandomCrop) in the padded image, flipped first when `flip`."""
        h, w = self.size
        left, top, right, bottom = self.padding
        Ph, Pw = H + top + bottom, W + left + right
        if self.pad_if_needed and Ph < h:
            top, bottom, Ph = top + h - Ph, bottom + h - Ph, 2 * h - Ph
        if self.pad_if_needed and Pw < w:
            left, right, Pw = left + w - Pw, right + w - Pw, 2 * w - Pw
        self.check_fits(Ph, Pw, any(self.padding))
        return Window(*self.make_params(seed, Ph, Pw), h, w, (left, top, right, bottom), flip)

    def cut(self, item: Item, win: Window, seed: int, H: int, W: int) -> Any:
        if not item.dense:
            return geometry_tv(item, win, self.padding_mode, H, W)
        fill = fill_for(self.fill, item)
        if item.kind == "image" and not item.windowed and not win.flip and not any(self.padding) \
                and self.padding_mode == "constant" and not isinstance(fill, tuple):
            t = item.tensor()
            if t.dtype in OP_DTYPES and t.dim() == 3:  # the op pads with fill in the same pass
                check_fill_value(fill, t.dtype)
                return item.wrap(random_crop(t, win.height, win.width, seed, item.layout, self.pad_if_needed,
                                             float(fill)))
        return item.wrap(crop_dense(item, win, self.padding_mode, fill))
