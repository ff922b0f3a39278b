"""RandomCrop, RandomResizedCrop, RandomHorizontalFlip: one window per sample, applied to every
image, video, mask, bounding boxes and key points in it (see sample.py and window.py)."""

from __future__ import annotations

import math
from typing import Any

import torch

from fastprep import counter_rng
from fastprep.args import check_bool, check_real
from fastprep.ops.crop import random_crop
from fastprep.roles import tv_class
from fastprep.transforms.base import RandomTransform, describe_sample, unit_float, word
from fastprep.transforms.inputs import (
    PADDING_MODES,
    check_fill,
    check_layout,
    check_padding,
    check_size,
    chw,
    error_context,
)
from fastprep.transforms.sample import GEOMETRY, Item, Sample
from fastprep.transforms.window import (
    OP_DTYPES,
    Window,
    check_fill_value,
    crop_dense,
    crop_window_view,
    geometry_tv,
    read_region,
    resize_dense,
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


class GeometricTransform(RandomTransform):
    """Draw a seed, find the sample's window, cut every geometric item with it."""

    layout = "CHW"

    def transform(self, sample: Any) -> Any:
        s = Sample(sample, self.layout, GEOMETRY, self)
        return self.apply(s, self.draw(), flip=False)

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


class RandomCrop(GeometricTransform):
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
    def fusion_role(self) -> str | None:
        """A crop of the image as it is (no padding) fuses into an op's read window."""
        return None if self.pad_if_needed or any(self.padding) else "crop"

    def offsets(self, seed: Any, H: Any, W: Any) -> tuple[Any, Any]:
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
        return Window(*self.offsets(seed, Ph, Pw), h, w, (left, top, right, bottom), flip)

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


def _check_range(owner: str, name: str, value: Any) -> tuple[float, float]:
    if not (isinstance(value, (tuple, list)) and len(value) == 2):
        raise ValueError(f"{owner}: expected {name} to be a pair (min, max), got {value!r}")
    lo, hi = (check_real(owner, name, v) for v in value)
    if not (0 < lo <= hi) or math.isinf(hi):
        raise ValueError(f"{owner}: expected {name} to be (min, max) with 0 < min <= max, got {value!r}")
    return float(lo), float(hi)


class RandomResizedCrop(GeometricTransform):
    """torchvision v2's ``RandomResizedCrop``: a window of random area (`scale` of the image) and
    aspect ratio (`ratio`, drawn log-uniform), resized to `size`, for every image, video, mask,
    bounding boxes and key points of the sample.

    The draw is torchvision's algorithm (10 tries, then the central crop of the nearest allowed
    ratio) on fastprep's counter generator: try k takes words 4k .. 4k+3 of the seed for the area,
    the ratio, the top and the left. The resize is torch's ``interpolate`` on the window only,
    in torchvision's calls: bilinear with `antialias` (torchvision's default True) for images,
    uint8 kept where torchvision keeps it (CPUs with AVX2/AVX512), nearest for masks; so on a CPU
    the result equals torchvision's resized_crop of the same window bit for bit.

    Example:
        >>> RandomResizedCrop(224)(torch.zeros(3, 480, 640, dtype=torch.uint8)).shape
        torch.Size([3, 224, 224])
    """

    def __init__(self, size: int | tuple[int, int], scale: tuple[float, float] = (0.08, 1.0),
                 ratio: tuple[float, float] = (3 / 4, 4 / 3), antialias: bool = True, layout: str = "CHW",
                 generator: torch.Generator | None = None):
        super().__init__(generator)
        self.size = check_size("RandomResizedCrop", size)
        self.scale = _check_range("RandomResizedCrop", "scale", scale)
        self.ratio = _check_range("RandomResizedCrop", "ratio", ratio)
        self.antialias = check_bool("RandomResizedCrop", "antialias", antialias)
        self.layout = check_layout("RandomResizedCrop", layout)

    def repr_args(self) -> dict[str, Any]:
        args: dict[str, Any] = {"size": self.size, "scale": self.scale, "ratio": self.ratio}
        if not self.antialias:
            args["antialias"] = False
        if self.layout != "CHW":
            args["layout"] = self.layout
        return args

    def window(self, H: int, W: int, seed: int, flip: bool = False) -> Window:
        area = H * W
        log_lo, log_hi = math.log(self.ratio[0]), math.log(self.ratio[1])
        for k in range(10):
            target = area * (self.scale[0] + unit_float(word(seed, 4 * k)) * (self.scale[1] - self.scale[0]))
            aspect = math.exp(log_lo + unit_float(word(seed, 4 * k + 1)) * (log_hi - log_lo))
            w = int(round(math.sqrt(target * aspect)))
            h = int(round(math.sqrt(target / aspect)))
            if 0 < w <= W and 0 < h <= H:
                top = counter_rng.uniform_below(word(seed, 4 * k + 2), H - h + 1)
                left = counter_rng.uniform_below(word(seed, 4 * k + 3), W - w + 1)
                return Window(top, left, h, w, flip=flip)
        in_ratio = W / H
        if in_ratio < self.ratio[0]:
            w, h = W, int(round(W / self.ratio[0]))
        elif in_ratio > self.ratio[1]:
            h, w = H, int(round(H * self.ratio[1]))
        else:
            h, w = H, W
        return Window((H - h) // 2, (W - w) // 2, h, w, flip=flip)

    def cut(self, item: Item, win: Window, seed: int, H: int, W: int) -> Any:
        if not item.dense:
            return geometry_tv(item, win, "constant", H, W, resize=self.size)
        window = crop_window_view(item, win, W)
        out = resize_dense(window, self.size, item.kind, self.antialias)
        return item.wrap(out.contiguous())


class RandomHorizontalFlip(RandomTransform):
    """Mirror the sample left to right with probability `p` (torchvision v2's ``RandomHorizontalFlip``):
    images, videos and masks are reversed, boxes and key points mirrored by torchvision's kernels.
    Flipped when ``unit_float(random_word(seed, 0)) < p``, one seed drawn per sample.

    In :class:`Compose`, a flip followed by RandomCrop or RandomResizedCrop is not made on the whole
    image: the crop reads the mirrored window and reverses it, the same bits as flipping first.
    Images not flipped come back as CHW tensors (PIL and numpy converted, tensors as given).

    Example:
        >>> RandomHorizontalFlip(p=1.0)(torch.arange(3).view(1, 1, 3))
        tensor([[[2, 1, 0]]])
    """

    def __init__(self, p: float = 0.5, layout: str = "CHW", generator: torch.Generator | None = None):
        super().__init__(generator)
        self.p = check_real("RandomHorizontalFlip", "p", p)
        if not 0 <= self.p <= 1:
            raise ValueError(f"RandomHorizontalFlip: expected p to be in [0, 1], got {p!r}")
        self.layout = check_layout("RandomHorizontalFlip", layout)

    fusion_role = "hflip"

    def repr_args(self) -> dict[str, Any]:
        return {"p": self.p} | ({"layout": self.layout} if self.layout != "CHW" else {})

    def make_params(self, seed: Any) -> Any:
        """Whether the sample of `seed` flips (a bool array for an array of seeds)."""
        return unit_float(word(seed, 0)) < self.p

    def transform(self, sample: Any) -> Any:
        s = Sample(sample, self.layout, GEOMETRY, self)
        flip = bool(self.make_params(self.draw()))
        outs = {}
        with error_context(self, describe_sample(s)):
            H, W = s.size()
            win = Window(0, 0, H, W, flip=True)
            for item in s.items:
                if not flip:
                    as_given = isinstance(item.value, torch.Tensor) and item.layout == "CHW"
                    if item.kind == "image" and not as_given:  # PIL, numpy, HWC: CHW as always
                        outs[item.index] = chw(read_region(item, 0, H, 0, W), item.layout)
                    continue
                if item.dense:
                    outs[item.index] = item.wrap(crop_dense(item, win, "constant", 0))
                else:
                    outs[item.index] = geometry_tv(item, win, "constant", H, W)
        return s.rebuild(outs)
