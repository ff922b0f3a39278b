"""resized_crop / resized_crop_batch: the window of a uint8 image resampled bilinearly as torch's
uint8 resampler does (so torchvision v2's ``resized_crop`` / ``RandomResizedCrop``), flipped and
converted to float (``ToDtype(scale=True)`` + ``Normalize``) in the same pass. Schema, checks, fake
kernels, the weights' definition and the torch-ops implementation (what non-CPU devices run).
Kernels: csrc/kernels/resize.cpp (native), numba_kernels/_resize.py (Numba); the checks in
_resize_checks.py, the weights' definition in _resize_weights.py."""

from __future__ import annotations

import numpy as np
import torch

import fastprep.ops._checks as checks
from fastprep.ops._library import define, impl_any_device, writes_buffers
from fastprep.ops._output_checks import OutputArgs, check_out_dtype
from fastprep.ops._resize_checks import GEOMETRY_COLUMNS, check_resized_crop, check_resized_crop_batch, out_shape
from fastprep.ops._resize_weights import Axis, resample_axis

__all__ = ["resized_crop", "resized_crop_batch", "geometry_table"]

define("resized_crop(Tensor img, int top, int left, int height, int width, int out_height, int out_width, "
       "str layout='CHW', bool hflip=False, bool antialias=True, ScalarType? out_dtype=None, float scale=1.0, "
       "float[]? mean=None, float[]? std=None, bool vflip=False, int resized_height=0, int resized_width=0, "
       "int out_top=0, int out_left=0) -> Tensor")
# The batched form writes into a buffer the caller owns (a loader's batch slot): one window per image.
# Its per-image geometry is one int64 table [N, len(GEOMETRY_COLUMNS)] (_resize_checks.py names the columns).
define("resized_crop_batch(Tensor[] imgs, Tensor geometry, Tensor(a!) out, str layout='CHW', bool antialias=True, "
       "float scale=1.0, float[]? mean=None, float[]? std=None) -> ()")


def resized_crop(img: torch.Tensor, top: int, left: int, height: int, width: int, out_height: int, out_width: int,
                 layout: str = "CHW", hflip: bool = False, antialias: bool = True,
                 out_dtype: torch.dtype | None = None, scale: float = 1.0, mean=None, std=None, vflip: bool = False,
                 resized_height: int = 0, resized_width: int = 0, out_top: int = 0,
                 out_left: int = 0) -> torch.Tensor:
    """The window [top, top + height) x [left, left + width) of a uint8 image resized to
    ``out_height x out_width``, read and written in one pass: only the window is read.

    Bit for bit ``torch.nn.functional.interpolate(window, size, mode="bilinear", antialias=antialias)``
    on the uint8 CPU tensor, which is what torchvision v2's ``resized_crop`` / ``RandomResizedCrop``
    compute on decoded images (torch's fixed-point resampler: weights rounded to int16, the
    horizontal pass rounded to uint8 before the vertical one). Then, in the same pass:

    Args:
        img: uint8 ``[C, H, W]`` (``[H, W, C]`` with ``layout="HWC"``) or a batch ``[N, ...]`` of
            either (the same window of each), any strides; any C.
        hflip: the result flipped left-right (``RandomHorizontalFlip`` after the resize).
        vflip: the result flipped upside down (``RandomVerticalFlip`` after the resize).
        resized_height, resized_width: the size the window is resized to, of which the output is
            the rows from `out_top` and the columns from `out_left` (``Resize`` then
            ``CenterCrop``: the resize's weights, only the outputs kept computed); 0: the output's.
        antialias: torchvision's default True; False is interpolate's plain bilinear.
        out_dtype: uint8 (default), or float32 / float16 / bfloat16: each value ``v`` becomes
            ``float32(v) * float32(scale)`` (``ToDtype(torch.float32, scale=True)`` with
            ``scale=1/255``), then ``(that - mean[c]) / std[c]`` in float32 when `mean` and `std`
            are given (``Normalize``: one value per channel, or one for all), rounded once to a
            float16 / bfloat16 output.

    Returns a contiguous ``[C, out_height, out_width]`` tensor (``[N, ...]`` for a batch).

    Example:
        >>> img = torch.randint(0, 256, (375, 500, 3), dtype=torch.uint8)
        >>> x = resized_crop(img, 20, 30, 300, 260, 224, 224, "HWC", hflip=True, out_dtype=torch.float32,
        ...                  scale=1 / 255, mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
        >>> x.shape, x.dtype
        (torch.Size([3, 224, 224]), torch.float32)
    """
    op = "resized_crop"
    check_out_dtype(op, out_dtype)
    ints = (("top", top), ("left", left), ("height", height), ("width", width), ("out_height", out_height),
            ("out_width", out_width), ("resized_height", resized_height), ("resized_width", resized_width),
            ("out_top", out_top), ("out_left", out_left))
    top, left, height, width, out_height, out_width, resized_height, resized_width, out_top, out_left = (
        checks.op_int(op, name, v) for name, v in ints)
    return torch.ops.fastprep.resized_crop.default(img, top, left, height, width, out_height, out_width, layout, hflip,
                                                   antialias, out_dtype, scale, mean, std, vflip, resized_height,
                                                   resized_width, out_top, out_left)


def geometry_table(n: int, **columns: list[int] | list[bool]) -> torch.Tensor:
    """resized_crop_batch's geometry for n images: an int64 ``[n, len(GEOMETRY_COLUMNS)]`` table
    whose named columns are the given lists (one value per image; flips as bools or 0 / 1) and the
    others 0 (no flip; 0 sizes: not resized, the output's size).

    Example:
        >>> geometry_table(2, top=[0, 5], left=[0, 7], height=[40, 30], width=[50, 33], hflip=[True, False])[1]
        tensor([ 5,  7, 30, 33,  0,  0,  0,  0,  0,  0,  0])
    """
    table = torch.zeros(n, len(GEOMETRY_COLUMNS), dtype=torch.int64)
    for name, values in columns.items():
        if name not in GEOMETRY_COLUMNS:
            raise ValueError(f"geometry_table: expected columns among {', '.join(GEOMETRY_COLUMNS)}, got {name!r}")
        if values is None:
            continue
        if len(values) != n:
            raise ValueError(f"geometry_table: expected {name} to have one value per image ({n}), got {len(values)}")
        table[:, GEOMETRY_COLUMNS.index(name)] = torch.tensor([int(v) for v in values], dtype=torch.int64)
    return table


def resized_crop_batch(imgs: list[torch.Tensor], geometry: torch.Tensor, out: torch.Tensor, layout: str = "CHW",
                       antialias: bool = True, scale: float = 1.0, mean=None, std=None) -> torch.Tensor:
    """:func:`resized_crop` of each image into a buffer you own: ``out[i]`` gets image i's window
    (row i of `geometry`: top, left, height, width) resized to out's size (or to its
    resized_height x resized_width, of which out[i] is the part at (out_top, out_left)), flipped
    when its hflip / vflip is 1, bit for bit what the per-sample op returns; with its transpose 1,
    that of out's width x height, transposed (``torch.rot90`` of a flipped output: a quarter turn). One call for a chunk
    of samples, without the GIL and allocating nothing the size of an image: how a loader writes
    straight into its batch slots.

    Args:
        imgs: uint8 images (sizes may differ), ``[C, H, W]`` or ``[H, W, C]`` per `layout`.
        geometry: int64 ``[len(imgs), len(GEOMETRY_COLUMNS)]``, one row per image, columns
            ``GEOMETRY_COLUMNS`` (ops/_resize_checks.py); :func:`geometry_table` makes one from lists.
        out: contiguous ``[len(imgs), C, out_height, out_width]``, uint8 / float32 / float16 /
            bfloat16; its dtype is the output's (scale, mean and std as in :func:`resized_crop`).

    Example:
        >>> imgs = [torch.zeros(40, 50, 3, dtype=torch.uint8) for _ in range(2)]
        >>> out = torch.empty(2, 3, 32, 32)
        >>> table = geometry_table(2, top=[0, 5], left=[0, 7], height=[40, 30], width=[50, 33])
        >>> resized_crop_batch(imgs, table, out, "HWC", scale=1 / 255).shape
        torch.Size([2, 3, 32, 32])
    """
    torch.ops.fastprep.resized_crop_batch.default(list(imgs), geometry, out, layout, antialias, scale, mean, std)
    return out


# ---- the torch-ops implementation (any device): the same integers, the same float32 operations

def _resample(x: torch.Tensor, a: Axis, dim: int) -> torch.Tensor:
    """One pass along `dim` of int64 values x: the taps' sum from 2^(precision - 1), shifted, saturated."""
    x = x.movedim(dim, -1)
    taps = a.w.shape[1]
    index = torch.from_numpy(np.minimum(a.start[:, None] + np.arange(taps), x.shape[-1] - 1)).to(x.device)
    w = torch.from_numpy(a.w).to(x.device)
    acc = (x[..., index] * w).sum(-1) + (1 << (a.precision - 1))
    return (acc >> a.precision).clamp(0, 255).movedim(-1, dim)


def _finish(y: torch.Tensor, a: OutputArgs, scale: float) -> torch.Tensor:
    """The output element from the resampled values y (int64, [N, C, h, w])."""
    if a.dtype == torch.uint8:
        return y.to(torch.uint8)
    f = y.to(torch.float32) * torch.tensor(scale, dtype=torch.float32, device=y.device)
    if a.mean is not None:
        stat = lambda s: torch.tensor(s, dtype=torch.float32, device=y.device).view(-1, 1, 1)  # noqa: E731
        f = (f - stat(a.mean)) / stat(a.std)
    return f.to(a.dtype)


def resized_crop_torch(img, top, left, height, width, out_height, out_width, layout="CHW", hflip=False,
                       antialias=True, out_dtype=None, scale=1.0, mean=None, std=None, vflip=False, resized_height=0,
                       resized_width=0, out_top=0, out_left=0):
    """resized_crop in plain torch ops with the kernels' bits (integer passes, float32 outputs)."""
    v, a, p = check_resized_crop(img, top, left, height, width, out_height, out_width, layout, out_dtype, scale, mean,
                                 std, vflip, resized_height, resized_width, out_top, out_left)
    x = img if v.batched else img.unsqueeze(0)
    x = (x.permute(0, 3, 1, 2) if layout == "HWC" else x)[:, :, top:top + height, left:left + width]
    y = _resample(x.to(torch.int64), resample_axis(width, p.width, antialias, hflip, p.left, out_width), 3)
    y = _resample(y, resample_axis(height, p.height, antialias, False, p.top, out_height), 2)
    y = _finish(y.flip(2) if p.vflip else y, a, scale)
    return y.contiguous() if v.batched else y[0].contiguous()


def resized_crop_batch_torch(imgs, geometry, out, layout="CHW", antialias=True, scale=1.0, mean=None, std=None):
    """The batch as its definition: the per-sample op into each slot, on out's device."""
    _, _, rows = check_resized_crop_batch(imgs, geometry, out, layout, scale, mean, std)
    _, _, out_h, out_w = out.shape
    for i, (img, r) in enumerate(zip(imgs, rows)):
        p, (h, w) = r.place, (out_w, out_h) if r.transpose else (out_h, out_w)
        y = torch.ops.fastprep.resized_crop.default(img.to(out.device), r.top, r.left, r.height, r.width, h, w, layout,
                                                    r.hflip, antialias, out.dtype, scale, mean, std, p.vflip, p.height,
                                                    p.width, p.top, p.left)
        out[i].copy_(y.transpose(-2, -1) if r.transpose else y)


@torch.library.register_fake("fastprep::resized_crop")
def _resized_crop_fake(img, top, left, height, width, out_height, out_width, layout="CHW", hflip=False,
                       antialias=True, out_dtype=None, scale=1.0, mean=None, std=None, vflip=False, resized_height=0,
                       resized_width=0, out_top=0, out_left=0):
    v, a, _ = check_resized_crop(img, top, left, height, width, out_height, out_width, layout, out_dtype, scale, mean,
                                 std, vflip, resized_height, resized_width, out_top, out_left)
    return img.new_empty(out_shape(v, out_height, out_width), dtype=a.dtype)


@torch.library.register_fake("fastprep::resized_crop_batch")
def _resized_crop_batch_fake(imgs, geometry, out, layout="CHW", antialias=True, scale=1.0, mean=None, std=None):
    check_resized_crop_batch(imgs, geometry, out, layout, scale, mean, std, values=False)


impl_any_device("resized_crop", resized_crop_torch)
impl_any_device("resized_crop_batch", resized_crop_batch_torch)


# Nothing in the batch op is differentiable: a buffer taking part in autograd is refused, and out gets
# its version bumped by the write.
writes_buffers("resized_crop_batch", ("out",), "resized uint8 windows")
