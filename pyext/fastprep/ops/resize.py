"""resized_crop / resized_crop_batch: the window of a uint8 image resampled bilinearly as torch's
uint8 resampler does (so torchvision v2's ``resized_crop`` / ``RandomResizedCrop``), flipped and
converted to float (``ToDtype(scale=True)`` + ``Normalize``) in the same pass. Schema, checks, fake
kernels, the weights' definition and the torch-ops implementation (what non-CPU devices run).
Kernels: csrc/kernels/resize.cpp (native), numba_kernels/resize.py (Numba)."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch

from fastprep.ops import checks
from fastprep.ops._library import define, impl_any_device, writes_buffers

__all__ = ["resized_crop", "resized_crop_batch"]

define("resized_crop(Tensor img, int top, int left, int height, int width, int out_height, int out_width, "
       "str layout='CHW', bool hflip=False, bool antialias=True, ScalarType? out_dtype=None, float scale=1.0, "
       "float[]? mean=None, float[]? std=None) -> Tensor")
# The batched form writes into a buffer the caller owns (a loader's batch slot): one window per image.
define("resized_crop_batch(Tensor[] imgs, int[] tops, int[] lefts, int[] heights, int[] widths, Tensor(a!) out, "
       "str layout='CHW', bool[]? hflips=None, bool antialias=True, float scale=1.0, float[]? mean=None, "
       "float[]? std=None) -> ()")


def resized_crop(img: torch.Tensor, top: int, left: int, height: int, width: int, out_height: int, out_width: int,
                 layout: str = "CHW", hflip: bool = False, antialias: bool = True,
                 out_dtype: torch.dtype | None = None, scale: float = 1.0, mean=None, std=None) -> torch.Tensor:
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
    checks.check_out_dtype(op, out_dtype)
    top, left, height, width, out_height, out_width = (
        checks.op_int(op, name, v) for name, v in (("top", top), ("left", left), ("height", height), ("width", width),
                                                   ("out_height", out_height), ("out_width", out_width)))
    return torch.ops.fastprep.resized_crop.default(img, top, left, height, width, out_height, out_width, layout, hflip,
                                                   antialias, out_dtype, scale, mean, std)


def resized_crop_batch(imgs: list[torch.Tensor], tops: list[int], lefts: list[int], heights: list[int],
                       widths: list[int], out: torch.Tensor, layout: str = "CHW", hflips: list[bool] | None = None,
                       antialias: bool = True, scale: float = 1.0, mean=None, std=None) -> torch.Tensor:
    """:func:`resized_crop` of each image into a buffer you own: ``out[i]`` gets image i's window
    ``(tops[i], lefts[i], heights[i], widths[i])`` resized to out's size, flipped when
    ``hflips[i]``, bit for bit what the per-sample op returns. One call for a chunk of samples,
    without the GIL and allocating nothing the size of an image: how a loader writes straight into
    its batch slots.

    Args:
        imgs: uint8 images (sizes may differ), ``[C, H, W]`` or ``[H, W, C]`` per `layout`.
        out: contiguous ``[len(imgs), C, out_height, out_width]``, uint8 / float32 / float16 /
            bfloat16; its dtype is the output's (scale, mean and std as in :func:`resized_crop`).

    Example:
        >>> imgs = [torch.zeros(40, 50, 3, dtype=torch.uint8) for _ in range(2)]
        >>> out = torch.empty(2, 3, 32, 32)
        >>> resized_crop_batch(imgs, [0, 5], [0, 7], [40, 30], [50, 33], out, "HWC", scale=1 / 255).shape
        torch.Size([2, 3, 32, 32])
    """
    torch.ops.fastprep.resized_crop_batch.default(list(imgs), tops, lefts, heights, widths, out, layout, hflips,
                                                  antialias, scale, mean, std)
    return out


# ---- checks: csrc/ops/resize.cpp's, word for word

def _check_window(op: str, v: checks.ImageView, top, left, height, width, suffix: str = "",
                  image: str = "the image") -> None:
    t, lf, h, w = ("top" + suffix, "left" + suffix, "height" + suffix, "width" + suffix)
    for name, value in ((h, height), (w, width)):
        if value <= 0:
            checks.fail(op, ": expected ", name, " > 0, got ", name, "=", value)
    for name, value in ((t, top), (lf, left)):
        if value < 0:
            checks.fail(op, ": expected ", name, " >= 0, got ", name, "=", value)
    for a, av, b, bv, limit, what in ((t, top, h, height, v.h, "height"), (lf, left, w, width, v.w, "width")):
        if av + bv > limit:
            checks.fail(op, ": expected ", a, " + ", b, " <= ", limit, " (the ", what, " of ", image, "), got ", a, "=",
                        av, ", ", b, "=", bv)


def _per_channel(op: str, arg: str, values, c: int, nonzero: bool) -> list[float]:
    n = len(values)
    if n not in (1, c):
        checks.fail(op, ": expected ", arg, " to have 1 or ", c, " values (one per channel), got ", n)
    out = []
    for i in range(c):
        k = 0 if n == 1 else i
        x, name = float(values[k]), f"{arg}[{k}]"
        if not (math.isfinite(x) and abs(x) <= checks.FLOAT_MAX[torch.float32]):
            checks.fail(op, ": expected ", name, " to be a finite float32 value, got ", name, "=", checks.fmt_float(x))
        if nonzero and np.float32(x) == 0:
            checks.fail(op, ": expected ", name, " to be nonzero in float32 (Normalize divides by it), got ", name, "=",
                        checks.fmt_float(x))
        out.append(float(np.float32(x)))
    return out


class OutputArgs(NamedTuple):
    dtype: torch.dtype
    mean: list[float] | None  # float32 values, one per channel
    std: list[float] | None


def check_output_args(op: str, odt, scale, mean, std, c: int) -> OutputArgs:
    if odt not in checks.IMAGE_DTYPES:
        checks.fail(op, ": expected out_dtype to be torch.uint8, torch.float32, torch.float16 or torch.bfloat16, got ",
                    odt)
    if odt == torch.uint8 and scale != 1.0:
        checks.fail(op, ": expected scale=1 for a torch.uint8 output, got scale=", checks.fmt_float(scale))
    if odt == torch.uint8 and (mean is not None or std is not None):
        checks.fail(op, ": expected mean=None and std=None for a torch.uint8 output (Normalize needs a float output)")
    checks.check_scale(op, scale)
    if (mean is None) != (std is None):
        checks.fail(op, ": expected mean and std together, got only ", "mean" if mean is not None else "std")
    if mean is None:
        return OutputArgs(odt, None, None)
    return OutputArgs(odt, _per_channel(op, "mean", mean, c, False), _per_channel(op, "std", std, c, True))


def out_shape(v: checks.ImageView, out_height: int, out_width: int) -> list[int]:
    return ([v.n] if v.batched else []) + [v.c, out_height, out_width]


def check_resized_crop(img, top, left, height, width, out_height, out_width, layout, out_dtype, scale, mean, std):
    """Returns (ImageView, OutputArgs)."""
    op = "resized_crop"
    checks.check_tensor(op, "img", img)
    checks.check_dtype(op, "img", img, torch.uint8)
    v = checks.image_view(op, "img", img, checks.parse_layout(op, layout))
    _check_window(op, v, top, left, height, width)
    for name, value in (("out_height", out_height), ("out_width", out_width)):
        if value <= 0:
            checks.fail(op, ": expected ", name, " > 0, got ", name, "=", value)
    a = check_output_args(op, torch.uint8 if out_dtype is None else out_dtype, scale, mean, std, v.c)
    checks.check_output_bytes(op, out_shape(v, out_height, out_width), a.dtype,
                              lambda: f"out_height={out_height}, out_width={out_width}")
    return v, a


def check_resized_crop_batch(imgs, tops, lefts, heights, widths, out, layout, hflips, scale, mean, std):
    """Returns (each image's ImageView, OutputArgs)."""
    op = "resized_crop_batch"
    checks.check_tensor(op, "out", out)
    hwc = checks.parse_layout(op, layout)
    checks.check_image_dtype(op, "out", out)
    n = len(imgs)
    if out.dim() != 4 or not out.is_contiguous() or out.shape[0] != n:
        checks.fail(op, ": expected out to be a contiguous [", n, ", C, out_height, out_width] tensor (one image per "
                    "input), got ", list(out.shape), "" if out.is_contiguous() else " (not contiguous)")
    c, out_h, out_w = out.shape[1:]
    if out_h <= 0 or out_w <= 0:
        checks.fail(op, ": expected out's height and width > 0, got out of shape ", list(out.shape))
    for name, values in (("tops", tops), ("lefts", lefts), ("heights", heights), ("widths", widths)):
        if len(values) != n:
            checks.fail(op, ": expected ", name, " to have one value per image (", n, "), got ", len(values))
    if hflips is not None and len(hflips) != n:
        checks.fail(op, ": expected hflips to have one value per image (", n, "), got ", len(hflips))
    a = check_output_args(op, out.dtype, scale, mean, std, c)
    views = []
    for i, img in enumerate(imgs):  # nothing read may share memory with what is written
        arg = f"imgs[{i}]"
        checks.check_tensor(op, arg, img)
        checks.check_same_device(op, arg, img, "out", out)
        checks.check_dtype(op, arg, img, torch.uint8)
        if img.dim() != 3:
            checks.fail(op, ": expected ", arg, " to be a 3-D ", "[H, W, C]" if hwc else "[C, H, W]",
                        " image, got a ", img.dim(), "-D tensor")
        views.append(checks.image_view(op, arg, img, hwc))
        if views[-1].c != c:
            checks.fail(op, ": expected ", arg, " to have ", c, " channels (as out), got ", views[-1].c)
        _check_window(op, views[-1], tops[i], lefts[i], heights[i], widths[i], f"s[{i}]", arg)
        checks.check_no_overlap(op, "out", out, arg, img)
    return views, a


# ---- the weights: torch's, in its double arithmetic (csrc/kernels/resize_weights.cpp says where)

class Axis(NamedTuple):
    """Output i reads inputs start[i] .. start[i] + count[i] - 1 with int16 weights w[i] (zero
    past count), in units of 2^-precision."""
    start: np.ndarray
    count: np.ndarray
    w: np.ndarray
    precision: int


def _triangle(x: np.ndarray) -> np.ndarray:
    x = np.abs(x)
    return np.where(x < 1.0, 1.0 - x, 0.0)


def resample_axis(size: int, out: int, antialias: bool, reverse: bool = False) -> Axis:
    """The weights of one axis, ``size`` inputs -> ``out`` outputs (reversed: a flipped result)."""
    i = np.arange(out, dtype=np.float64)
    if size == out:  # torch skips the axis; one tap of 2^14 is the identity
        a = Axis(np.arange(out, dtype=np.int64), np.ones(out, np.int64), np.full((out, 1), 1 << 14, np.int64), 14)
    else:
        scale = size / out
        if antialias:
            support = scale if scale >= 1.0 else 1.0
            taps, invscale = math.ceil(support) * 2 + 1, 1.0 / scale if scale >= 1.0 else 1.0
            center = scale * (i + 0.5)
            start = np.maximum(np.trunc(center - support + 0.5).astype(np.int64), 0)
            count = np.clip(np.minimum(np.trunc(center + support + 0.5).astype(np.int64), size) - start, 0, taps)
            w, total = np.zeros((out, taps)), np.zeros(out)
            for j in range(taps):
                x = ((j + start).astype(np.float64) - center + 0.5) * invscale
                w[:, j] = np.where(j < count, _triangle(x), 0.0)
                total = total + w[:, j]  # in tap order, as torch sums
            w = np.where((total != 0.0)[:, None], w / np.where(total != 0.0, total, 1.0)[:, None], w)
        else:  # two taps at the source position (its float32 floor); an edge tap's weight moves inward
            real = np.maximum(scale * (i + 0.5) - 0.5, 0.0)
            start = np.minimum(np.floor(real.astype(np.float32)).astype(np.int64), size - 1)
            lam = np.minimum(np.maximum(real - start, 0.0), 1.0)
            count = np.clip(np.minimum(start + 2, size) - start, 0, 2)
            w0, w1 = _triangle(0.0 - lam), _triangle(1.0 - lam)
            w = np.stack([np.where(count == 2, w0, w0 + w1), np.where(count == 2, w1, 0.0)], axis=1)
        wt_max = float(w.max())
        precision = 0
        while precision < 22 and int(0.5 + wt_max * (1 << (precision + 1))) < (1 << 15):
            precision += 1
        v = w * (1 << precision)
        a = Axis(start, count, np.where(v < 0, np.trunc(-0.5 + v), np.trunc(0.5 + v)).astype(np.int64), precision)
    return Axis(*(x[::-1].copy() for x in a[:3]), a.precision) if reverse else a


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
                       antialias=True, out_dtype=None, scale=1.0, mean=None, std=None):
    """resized_crop in plain torch ops with the kernels' bits (integer passes, float32 outputs)."""
    v, a = check_resized_crop(img, top, left, height, width, out_height, out_width, layout, out_dtype, scale, mean,
                              std)
    x = img if v.batched else img.unsqueeze(0)
    x = (x.permute(0, 3, 1, 2) if layout == "HWC" else x)[:, :, top:top + height, left:left + width]
    y = _resample(x.to(torch.int64), resample_axis(width, out_width, antialias, hflip), 3)
    y = _finish(_resample(y, resample_axis(height, out_height, antialias), 2), a, scale)
    return y.contiguous() if v.batched else y[0].contiguous()


def resized_crop_batch_torch(imgs, tops, lefts, heights, widths, out, layout="CHW", hflips=None, antialias=True,
                             scale=1.0, mean=None, std=None):
    """The batch as its definition: the per-sample op into each slot, on out's device."""
    check_resized_crop_batch(imgs, tops, lefts, heights, widths, out, layout, hflips, scale, mean, std)
    _, _, out_h, out_w = out.shape
    for i, img in enumerate(imgs):
        out[i].copy_(torch.ops.fastprep.resized_crop.default(
            img.to(out.device), tops[i], lefts[i], heights[i], widths[i], out_h, out_w, layout,
            bool(hflips and hflips[i]), antialias, out.dtype, scale, mean, std))


@torch.library.register_fake("fastprep::resized_crop")
def _resized_crop_fake(img, top, left, height, width, out_height, out_width, layout="CHW", hflip=False,
                       antialias=True, out_dtype=None, scale=1.0, mean=None, std=None):
    v, a = check_resized_crop(img, top, left, height, width, out_height, out_width, layout, out_dtype, scale, mean,
                              std)
    return img.new_empty(out_shape(v, out_height, out_width), dtype=a.dtype)


@torch.library.register_fake("fastprep::resized_crop_batch")
def _resized_crop_batch_fake(imgs, tops, lefts, heights, widths, out, layout="CHW", hflips=None, antialias=True,
                             scale=1.0, mean=None, std=None):
    check_resized_crop_batch(imgs, tops, lefts, heights, widths, out, layout, hflips, scale, mean, std)


impl_any_device("resized_crop", resized_crop_torch)
impl_any_device("resized_crop_batch", resized_crop_batch_torch)


# Nothing in the batch op is differentiable: a buffer taking part in autograd is refused, and out gets
# its version bumped by the write.
writes_buffers("resized_crop_batch", ("out",), "resized uint8 windows")
