"""Crop windows and how every kind of item is cut by one: the geometry behind RandomCrop,
RandomResizedCrop and RandomHorizontalFlip.

A :class:`Window` is the rectangle torchvision v2 would crop, in the coordinates of the image
after its optional horizontal flip and padding. Images, videos and masks are read through it
without materialising the flip or the padding: the in-image part is read once (fastprep's
``crop`` op, or a slice), the padding is written as `fill` (constant mode) or gathered with
index maps over the window only (edge, reflect, symmetric); a flip reverses the window. Bounding
boxes and key points go through torchvision's own functional kernels (they only exist when
torchvision is imported), so they shift, clip and flip exactly as torchvision's.
"""

from __future__ import annotations

import functools
import importlib
import platform
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from fastprep.io.jpeg._scale import DENOMINATOR, reduced_read
from fastprep.ops._crop import crop
from fastprep.ops._resize import resized_crop
from fastprep.transforms._inputs import hwc_tensor
from fastprep.transforms._sample import Item

OP_DTYPES = (torch.uint8, torch.float32, torch.float16, torch.bfloat16)  # what the crop op takes


@dataclass(frozen=True)
class Window:
    """Rows [top, top + height) and columns [left, left + width) of the image padded by `pad`
    (left, top, right, bottom), after a horizontal flip of the image when `flip`."""
    top: int
    left: int
    height: int
    width: int
    pad: tuple[int, int, int, int] = (0, 0, 0, 0)
    flip: bool = False

    def mirrored(self, W: int) -> Window:
        """This window's pixels, left-right flipped, as a window of the flipped image: a crop then a
        flip is a crop of the flipped image (the inverse of :meth:`unflipped`)."""
        pl, pt, pr, pb = self.pad
        return Window(self.top, W + pl + pr - self.left - self.width, self.height, self.width, (pr, pt, pl, pb),
                      not self.flip)

    def unflipped(self, W: int) -> Window:
        """The same pixels as a window of the image not flipped (its output then flipped):
        crop(pad(flip(x), l, r), left) == flip(crop(pad(x, r, l), W_padded - left - width))."""
        if not self.flip:
            return self
        pl, pt, pr, pb = self.pad
        left = W + pl + pr - self.left - self.width
        return Window(self.top, left, self.height, self.width, (pr, pt, pl, pb), False)


def index_map(start: int, n: int, size: int, mode: str) -> torch.Tensor:
    """Source indices of positions start .. start + n - 1 along an axis of `size`, positions
    outside [0, size) mapped by the padding mode (-1: fill). Beyond one image width, reflect and
    symmetric keep reflecting, as numpy.pad does (torch.nn.functional.pad refuses those)."""
    q = torch.arange(start, start + n, dtype=torch.int64)
    if mode == "edge":
        return q.clamp_(0, size - 1)
    if mode == "reflect":
        if size == 1:
            return torch.zeros_like(q)
        period = 2 * (size - 1)
        r = q % period
        return torch.where(r >= size, period - r, r)
    if mode == "symmetric":
        r = q % (2 * size)
        return torch.where(r >= size, 2 * size - 1 - r, r)
    return torch.where((q >= 0) & (q < size), q, -1)


JPEG_SCALES = ("exact", "reduced")
"""How RandomResizedCrop and Resize read a JPEG window they shrink: "exact" (the full decode's
pixels) or "reduced" (libjpeg-turbo's M/8 scaled decode, no smaller than the output: docs/resize.md)."""


def check_jpeg_scale(owner: str, jpeg_scale: Any) -> str:
    if jpeg_scale not in JPEG_SCALES:
        raise ValueError(f"{owner}: expected jpeg_scale to be one of {JPEG_SCALES}, got {jpeg_scale!r}")
    return jpeg_scale


def read_region(item: Item, r0: int, r1: int, c0: int, c1: int,
                at_least: tuple[int, int] | None = None) -> torch.Tensor:
    """Rows r0:r1, columns c0:c1 of a dense item, in its layout: a view of a tensor; for a PIL
    image, only that region is converted (Image.crop copies the box, not the image); for a
    WindowedImage (a JpegFile, ...), only that region is decoded (the bits of the full decode's region).

    `at_least` (out_h, out_w), for a region about to be resized to that size: a JPEG that decodes
    at reduced scales (``scaled_decode``) gives the region decoded at the smallest M/8 that keeps it
    at least that size (fastprep.io.jpeg._scale.reduced_read): fewer pixels, not the same ones."""
    if item.pil:
        return hwc_tensor(np.asarray(item.value.crop((c0, r0, c1, r1))))
    if item.lazy:
        if r1 <= r0 or c1 <= c0:  # an empty probe: the dtype and channels, nothing decoded
            return torch.empty(max(r1 - r0, 0), max(c1 - c0, 0), item.channels(), dtype=torch.uint8)
        crop = (r0, c0, r1 - r0, c1 - c0)
        if at_least is not None and getattr(type(item.value), "scaled_decode", False):
            scale, scaled = reduced_read(item.value, crop, at_least)
            if scale != DENOMINATOR:
                return item.value.decode(scaled, layout="HWC", scale=scale)
        return item.value.decode(crop, layout="HWC")
    t = item.tensor()
    return t[..., r0:r1, c0:c1, :] if item.layout == "HWC" else t[..., r0:r1, c0:c1]


def _to_chw(t: torch.Tensor, item: Item) -> torch.Tensor:
    return (t.movedim(-1, -3) if item.layout == "HWC" else t).contiguous()


def _inside(item: Item, top: int, left: int, h: int, w: int) -> torch.Tensor:
    """An in-image window as a contiguous CHW tensor (a mask: [..., h, w]), read once: the crop op
    where it takes the dtype (it transposes HWC on the way), else a slice and one copy."""
    region = read_region(item, top, top + h, left, left + w)
    if region.dtype in OP_DTYPES and item.kind != "mask" and region.dim() >= 3:
        lead = region.shape[:-3]
        flat = region if region.dim() in (3, 4) else region.reshape(-1, *region.shape[-3:])
        out = crop(flat, 0, 0, h, w, item.layout)
        return out.reshape(*lead, *out.shape[-3:]) if region.dim() > 4 else out
    return _to_chw(region, item)


def _full(shape: list[int], dtype: torch.dtype, fill: Any, channels_dim: bool) -> torch.Tensor:
    if isinstance(fill, tuple):
        if not channels_dim:
            raise ValueError(f"a per-channel fill {fill} needs an image; masks take one number")
        out = torch.empty(shape, dtype=dtype)
        values = torch.tensor(fill, dtype=torch.float64).to(dtype)
        if values.numel() not in (1, shape[-3]):
            raise ValueError(f"fill has {values.numel()} values for an image with {shape[-3]} channels")
        out.copy_(values.view(-1, 1, 1).expand(shape[-3], shape[-2], shape[-1]).expand(shape))
        return out
    return torch.full(shape, fill, dtype=dtype)


def check_fill_value(fill: Any, dtype: torch.dtype) -> None:
    """An integer dtype takes integer fills in its range (no silent wrap or truncation)."""
    if dtype.is_floating_point:
        return
    info = torch.iinfo(dtype) if dtype != torch.bool else None
    lo, hi = (0, 1) if info is None else (info.min, info.max)
    for v in fill if isinstance(fill, tuple) else (fill,):
        if not (v == int(v) and lo <= v <= hi):
            raise ValueError(f"expected fill to be an integer in [{lo}, {hi}] for a {dtype} image or mask, "
                             f"got fill={v!r}")


def crop_dense(item: Item, win: Window, mode: str, fill: Any) -> torch.Tensor:
    """The window of an image, video or mask as a contiguous CHW tensor ([..., h, w] for a mask),
    bit for bit what padding the (flipped) image and slicing it would give."""
    H, W = item.size()
    win2 = win.unflipped(W)
    pad_left, pad_top, _, _ = win2.pad
    y0, x0, h, w = win2.top - pad_top, win2.left - pad_left, win2.height, win2.width
    if 0 <= y0 and y0 + h <= H and 0 <= x0 and x0 + w <= W:
        out = _inside(item, y0, x0, h, w)
    elif mode == "constant":
        ys, ye, xs, xe = max(y0, 0), min(y0 + h, H), max(x0, 0), min(x0 + w, W)
        probe = read_region(item, 0, 0, 0, 0)
        dtype = probe.dtype
        check_fill_value(fill, dtype)
        lead = list(probe.movedim(-1, -3).shape[:-2] if item.layout == "HWC" else probe.shape[:-2])
        out = _full(lead + [h, w], dtype, fill, item.kind != "mask")
        if ys < ye and xs < xe:
            out[..., ys - y0:ye - y0, xs - x0:xe - x0] = _inside(item, ys, xs, ye - ys, xe - xs)
    else:
        rows, cols = index_map(y0, h, H, mode), index_map(x0, w, W, mode)
        r0, r1, c0, c1 = int(rows.min()), int(rows.max()) + 1, int(cols.min()), int(cols.max()) + 1
        region = read_region(item, r0, r1, c0, c1)  # the window's source pixels, not the image
        hdim, wdim = (-3, -2) if item.layout == "HWC" else (-2, -1)
        out = _to_chw(region.index_select(hdim, rows - r0).index_select(wdim, cols - c0), item)
    return out.flip(-1) if win.flip else out


@functools.cache
def native_uint8_bilinear() -> bool:
    # torchvision v2's resize_image keeps uint8 for bilinear on CPU only where torch has its
    # vectorised uint8 kernel (AVX2/AVX512, ARM); elsewhere it resizes in float32 and rounds.
    return torch.backends.cpu.get_cpu_capability() in ("AVX2", "AVX512") or \
        platform.machine() in ("aarch64", "arm64")


INTERPOLATIONS = ("bilinear", "nearest", "nearest-exact", "bicubic")
"""The modes torchvision v2 resizes tensors with (interpolate's); PIL-only ones are refused."""


def op_resizes(t: torch.Tensor, mode: str) -> bool:
    """Whether fastprep's resized_crop gives torchvision's resize of image `t`: uint8 bilinear on a
    CPU where torchvision keeps uint8 (its bits are torch's uint8 resampler's, the op's)."""
    return mode == "bilinear" and t.dtype == torch.uint8 and t.device.type == "cpu" and t.dim() in (3, 4) \
        and native_uint8_bilinear()


def resize_dense(x: torch.Tensor, size: tuple[int, int], kind: str, antialias: bool,
                 mode: str = "bilinear") -> torch.Tensor:
    """torchvision v2's resize of an image (`mode`) or mask (nearest), CHW (any strides), where the
    op does not give torchvision's bits (resize_region sends those to it): ``interpolate`` on
    [N, C, h, w] in torchvision's calls: uint8 kept where torchvision keeps it, else float32 and
    back with rounding (and bicubic's clamp). Only the window it is given is read."""
    if tuple(x.shape[-2:]) == tuple(size):
        return x
    squeeze = kind == "mask" and x.dim() < 3
    if squeeze:
        x = x.unsqueeze(0)
    shape = x.shape
    mode = "nearest" if kind == "mask" else mode
    nearest = mode in ("nearest", "nearest-exact")
    keep = x.dtype in (torch.float32, torch.float64) or (x.dtype == torch.uint8 and (
        nearest or (x.device.type == "cpu" and (mode == "bicubic" or native_uint8_bilinear()))))
    y = x.reshape(-1, *shape[-3:])
    y = y if keep else y.to(torch.float32)
    y = torch.nn.functional.interpolate(y, size=list(size), mode=mode, align_corners=None if nearest else False,
                                        antialias=antialias and not nearest)
    if not keep:
        if mode == "bicubic" and x.dtype == torch.uint8:
            y = y.clamp_(min=0, max=255)
        if x.dtype in (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64):
            y = y.round_()
        y = y.to(x.dtype)
    y = y.reshape(*shape[:-2], *size)
    return y.squeeze(0) if squeeze else y


def resize_region(item: Item, win: Window, W: int, size: tuple[int, int], antialias: bool,
                  mode: str = "bilinear", jpeg_scale: str = "exact") -> torch.Tensor:
    """An in-image window of a dense item (of its image flipped first, when win.flip), resized to
    `size` as torchvision's resized_crop does (masks nearest), as a contiguous CHW tensor; only the
    window is read (of a PIL image or WindowedImage too; `jpeg_scale` "reduced": a JPEG's at a reduced
    scale no smaller than `size`, read_region). The op where it gives torchvision's bits (the window
    and its flip in one pass), else interpolate on the window."""
    w2 = win.unflipped(W)
    at_least = tuple(size) if jpeg_scale == "reduced" and item.kind != "mask" else None
    region = read_region(item, w2.top, w2.top + w2.height, w2.left, w2.left + w2.width, at_least)
    view = region.movedim(-1, -3) if item.layout == "HWC" else region
    if item.kind != "mask" and tuple(view.shape[-2:]) != tuple(size) and op_resizes(view, mode):
        return resized_crop(region, 0, 0, view.shape[-2], view.shape[-1], size[0], size[1], item.layout,
                            hflip=win.flip, antialias=antialias)
    view = view.flip(-1) if win.flip else view
    return resize_dense(view, size, item.kind, antialias, mode).contiguous()


def tv_functional() -> Any:
    """torchvision.transforms.v2.functional: imported already wherever boxes or key points exist."""
    return importlib.import_module("torchvision.transforms.v2.functional")


def geometry_tv(item: Item, win: Window, mode: str, H: int, W: int, resize: tuple[int, int] | None = None) -> Any:
    """Bounding boxes or key points through torchvision's functional kernels, in torchvision v2's
    order: flip, pad, crop (or resized crop)."""
    F = tv_functional()
    x = item.value
    if win.flip:
        x = F.horizontal_flip(x)
    if any(win.pad):
        x = F.pad(x, padding=list(win.pad), padding_mode=mode)
    Hp, Wp = H + win.pad[1] + win.pad[3], W + win.pad[0] + win.pad[2]
    if resize is not None:
        return F.resized_crop(x, win.top, win.left, win.height, win.width, size=list(resize))
    if (win.top, win.left, win.height, win.width) != (0, 0, Hp, Wp):
        x = F.crop(x, win.top, win.left, win.height, win.width)
    return x
