"""crop / random_crop: schema, fake kernel, torch-ops implementation for non-CPU devices and the
random window definition. Kernels: csrc/kernels/crop.cpp (native), numba_kernels/_crop.py (Numba)."""

from __future__ import annotations

import math

import numpy as np
import torch

import fastprep.core._counter_rng as counter_rng
import fastprep.ops._checks as checks
from fastprep.ops._library import call_differentiable, define, impl_any_device

__all__ = ["crop", "random_crop", "random_crop_params"]

define("crop(Tensor img, int top, int left, int height, int width, str layout='CHW') -> Tensor")
define("random_crop(Tensor img, int height, int width, int seed, str layout='CHW', "
       "bool pad_if_needed=False, float fill=0, bool hflip=False) -> Tensor")

IMAGE_DTYPES = checks.IMAGE_DTYPES


def crop(img: torch.Tensor, top: int, left: int, height: int, width: int,
         layout: str = "CHW") -> torch.Tensor:
    """The window [top, top + height) x [left, left + width) of an image or batch.

    `img` is uint8, float32, float16 or bfloat16, ``[C, H, W]`` (or ``[H, W, C]`` with
    ``layout="HWC"``), or a batch ``[N, ...]`` of either; any strides. The result is always a
    contiguous CHW tensor (``[N, C, height, width]`` for a batch): an HWC decoder output becomes
    a model-ready CHW crop in one pass, without a contiguous copy of the source.
    """
    top, left = checks.op_int("crop", "top", top), checks.op_int("crop", "left", left)
    height, width = checks.op_int("crop", "height", height), checks.op_int("crop", "width", width)
    return call_differentiable(torch.ops.fastprep.crop.default, img, top, left, height, width, layout)


def random_crop(img: torch.Tensor, height: int, width: int, seed: int, layout: str = "CHW",
                pad_if_needed: bool = False, fill: float = 0.0, hflip: bool = False) -> torch.Tensor:
    """A ``height x width`` crop at a random position drawn from `seed` (see
    :func:`random_crop_params` for the exact definition); output as in :func:`crop`.

    In a batch, sample i is cropped with seed ``fastprep.derive_seed(seed, i)``, so every sample
    gets its own window and sample i's window does not depend on the batch size.

    With ``pad_if_needed=True`` an image smaller than the crop on an axis is padded with `fill`
    as torchvision's ``RandomCrop(pad_if_needed=True)`` does: by the shortfall on *both* sides of
    that axis, then cropped at a random position of the padded image. `fill` is converted to
    float32 and rounded to nearest even for float16/bfloat16; a uint8 image needs an integer in
    [0, 255].

    With ``hflip=True`` the crop is cut from the image flipped left-right (the same window drawn
    on it): ``random_crop(img.flip(W), ...)`` bit for bit, i.e. torchvision's
    ``RandomHorizontalFlip`` before ``RandomCrop``, without flipping the whole image.
    """
    seed = checks.op_seed("random_crop", "seed", seed)
    height, width = checks.op_int("random_crop", "height", height), checks.op_int("random_crop", "width", width)
    return call_differentiable(torch.ops.fastprep.random_crop.default, img, height, width, seed, layout, pad_if_needed,
                              fill, hflip)


def _axis_offset(word: int, size: int, crop_size: int, pad: bool) -> int:
    padding = crop_size - size if pad and size < crop_size else 0
    return counter_rng.uniform_below(word, size + 2 * padding - crop_size + 1) - padding


def random_crop_params(H: int, W: int, height: int, width: int, seed: int,
                       pad_if_needed: bool = False) -> tuple[int, int]:
    """The window (top, left) that ``random_crop`` uses for an ``H x W`` image and `seed`.

    ``top = uniform_below(random_word(seed, 0), H - height + 1)`` and
    ``left = uniform_below(random_word(seed, 1), W - width + 1)`` (csrc/kernels/counter_rng.h):
    it depends on nothing but (seed, H, W, height, width), so other ops can reproduce it. With
    `pad_if_needed` and ``H < height`` the range is that of the padded height ``2 height - H``,
    and the result is shifted back to source coordinates: top is in ``[H - height, 0]`` and rows
    outside the image are fill (likewise for the width).
    """
    op = "random_crop_params"
    seed = checks.op_seed(op, "seed", seed)
    H, W, height, width = (checks.op_int(op, name, v) for name, v in
                           (("H", H), ("W", W), ("height", height), ("width", width)))
    if not isinstance(pad_if_needed, (bool, np.bool_)):
        raise TypeError(f"{op}: expected pad_if_needed to be a bool, got {pad_if_needed!r}")
    for name, v in (("H", H), ("W", W)):
        if v < 0:
            checks.fail(op, ": expected ", name, " >= 0, got ", name, "=", v)
    for name, v in (("height", height), ("width", width)):
        if v <= 0:
            checks.fail(op, ": expected ", name, " > 0, got ", name, "=", v)
    for name, size, c in (("height", H, height), ("width", W, width)):
        if size < c and not pad_if_needed:
            checks.fail(op, ": crop ", name, " ", c, " is larger than the image ",
                         name, " ", size, " (pass pad_if_needed=True to pad)")
    return crop_window(H, W, height, width, seed, bool(pad_if_needed))


def crop_window(H: int, W: int, height: int, width: int, seed: int, pad_if_needed: bool = False) -> tuple[int, int]:
    """random_crop_params on arguments already checked (the kernels' per-sample call)."""
    return (_axis_offset(counter_rng.random_word(seed, 0), H, height, pad_if_needed),
            _axis_offset(counter_rng.random_word(seed, 1), W, width, pad_if_needed))


def sample_seed(seed: int, i: int, batched: bool) -> int:
    return counter_rng.derive_seed(seed, i) if batched else seed


def check_image_dtype(op: str, img: torch.Tensor) -> None:
    checks.check_tensor(op, "img", img)
    checks.check_image_dtype(op, "img", img)


def _check_positive(op: str, arg: str, v: int) -> None:
    if v <= 0:
        checks.fail(op, ": expected ", arg, " > 0, got ", arg, "=", v)


def _check_window(op: str, img, height: int, width: int, layout: str) -> checks.ImageView:
    """What crop and random_crop check alike: the image, its layout and a positive window."""
    check_image_dtype(op, img)
    v = checks.image_view(op, "img", img, checks.parse_layout(op, layout))
    _check_positive(op, "height", height)
    _check_positive(op, "width", width)
    return v


def window_source(height: int, width: int) -> str:
    return f"height={height}, width={width}"


def check_crop(img, top, left, height, width, layout) -> checks.ImageView:
    op = "crop"
    v = _check_window(op, img, height, width, layout)
    if top < 0:
        checks.fail(op, ": expected top >= 0, got top=", top)
    if left < 0:
        checks.fail(op, ": expected left >= 0, got left=", left)
    if top + height > v.h:
        checks.fail(op, ": expected top + height <= ", v.h, " (the image height), got top=", top,
                     ", height=", height)
    if left + width > v.w:
        checks.fail(op, ": expected left + width <= ", v.w, " (the image width), got left=", left,
                     ", width=", width)
    checks.check_output_bytes(op, out_shape(v, height, width), img.dtype,
                                lambda: window_source(height, width))
    return v


def check_random_crop(img, height, width, layout, pad_if_needed, fill) -> checks.ImageView:
    op = "random_crop"
    v = _check_window(op, img, height, width, layout)
    for name, size, c in (("height", v.h, height), ("width", v.w, width)):
        if size < c and not pad_if_needed:
            checks.fail(op, ": crop ", name, " ", c, " is larger than the image ", name, " ", size,
                         " (pass pad_if_needed=True to pad)")
    if img.dtype == torch.uint8:
        if not (0 <= fill <= 255 and fill == int(fill)):
            checks.fail(op, ": expected fill to be an integer in [0, 255] for a torch.uint8 image, "
                         "got fill=", checks.fmt_float(fill))
    elif math.isfinite(fill) and checks.rounds_to_inf(fill, img.dtype):
        checks.fail(op, ": fill=", checks.fmt_float(fill), " rounds to inf in ", img.dtype,
                     " (largest finite value ", checks.fmt_float(checks.FLOAT_MAX[img.dtype]), ")")
    checks.check_output_bytes(op, out_shape(v, height, width), img.dtype,
                                lambda: window_source(height, width))
    return v


def _fill_tensor(fill: float, dtype: torch.dtype) -> torch.Tensor:
    """fill in a float image's dtype as the kernels round it: to float32, then to nearest even."""
    return torch.tensor(fill, dtype=torch.float64).to(torch.float32).to(dtype)


def out_shape(v: checks.ImageView, height: int, width: int) -> list[int]:
    return ([v.n] if v.batched else []) + [v.c, height, width]


@torch.library.register_fake("fastprep::crop")
def _crop_fake(img, top, left, height, width, layout="CHW"):
    v = check_crop(img, top, left, height, width, layout)
    return img.new_empty(out_shape(v, height, width))


@torch.library.register_fake("fastprep::random_crop")
def _random_crop_fake(img, height, width, seed, layout="CHW", pad_if_needed=False, fill=0.0, hflip=False):
    v = check_random_crop(img, height, width, layout, pad_if_needed, fill)
    return img.new_empty(out_shape(v, height, width))


def _as_nchw(img: torch.Tensor, layout: str) -> torch.Tensor:
    x = img if img.dim() == 4 else img.unsqueeze(0)
    return x.permute(0, 3, 1, 2) if layout == "HWC" else x


def crop_torch(img, top, left, height, width, layout="CHW"):
    """crop in plain torch ops, for devices without a fastprep kernel."""
    v = check_crop(img, top, left, height, width, layout)
    out = _as_nchw(img, layout)[:, :, top:top + height, left:left + width].contiguous()
    return out if v.batched else out[0]


def random_crop_torch(img, height, width, seed, layout="CHW", pad_if_needed=False, fill=0.0, hflip=False):
    """random_crop in plain torch ops: pads with `fill` (rounded as the kernels do), then slices
    (the image flipped left-right first, with hflip)."""
    v = check_random_crop(img, height, width, layout, pad_if_needed, fill)
    x = _as_nchw(img, layout)
    if hflip:
        x = x.flip(-1)
    fill_t = torch.tensor(fill, dtype=torch.float32).to(img.dtype) if img.dtype == torch.uint8 \
        else _fill_tensor(fill, img.dtype)
    out = x.new_empty(out_shape(v._replace(batched=True), height, width))
    for i in range(v.n):
        top, left = crop_window(v.h, v.w, height, width, sample_seed(seed, i, v.batched), pad_if_needed)
        out[i] = fill_t
        y0, y1 = max(top, 0), min(top + height, v.h)
        x0, x1 = max(left, 0), min(left + width, v.w)
        out[i, :, y0 - top:y1 - top, x0 - left:x1 - left] = x[i, :, y0:y1, x0:x1]
    return out if v.batched else out[0]


impl_any_device("crop", crop_torch)
impl_any_device("random_crop", random_crop_torch)


# Autograd: a crop copies a window, so the gradient w.r.t. the image is the output's gradient put
# back at each sample's window (its part inside the image, for a padded random crop), zero
# elsewhere; fill is a constant.

def _scatter_windows(grad: torch.Tensor, shape, layout: str, windows, batched: bool) -> torch.Tensor:
    g = grad if batched else grad.unsqueeze(0)
    grad_img = g.new_zeros(shape)
    x = _as_nchw(grad_img, layout)  # a view: writing it writes grad_img
    h, w = x.shape[-2:]
    height, width = g.shape[-2:]
    for i, (top, left) in enumerate(windows):
        y0, y1 = max(top, 0), min(top + height, h)
        x0, x1 = max(left, 0), min(left + width, w)
        if y0 < y1 and x0 < x1:
            x[i, :, y0:y1, x0:x1] = g[i, :, y0 - top:y1 - top, x0 - left:x1 - left]
    return grad_img


def _crop_setup(ctx, inputs, output):
    img, top, left, _height, _width, layout = inputs
    v = checks.image_view("crop", "img", img, layout == "HWC")
    ctx.shape, ctx.layout, ctx.batched = img.shape, layout, v.batched
    ctx.windows = [(top, left)] * v.n


def _random_crop_setup(ctx, inputs, output):
    img, height, width, seed, layout, pad_if_needed, _fill, hflip = inputs
    v = checks.image_view("random_crop", "img", img, layout == "HWC")
    ctx.shape, ctx.layout, ctx.batched, ctx.hflip = img.shape, layout, v.batched, hflip
    ctx.windows = [crop_window(v.h, v.w, height, width, sample_seed(seed, i, v.batched), pad_if_needed)
                   for i in range(v.n)]


def _crop_backward(ctx, grad):
    grad_img = _scatter_windows(grad, ctx.shape, ctx.layout, ctx.windows, ctx.batched) \
        if ctx.needs_input_grad[0] else None
    if grad_img is not None and getattr(ctx, "hflip", False):
        grad_img = grad_img.flip(-1 if ctx.layout == "CHW" else -2)  # the windows are the flipped image's
    return (grad_img,) + (None,) * (len(ctx.needs_input_grad) - 1)


torch.library.register_autograd("fastprep::crop", _crop_backward, setup_context=_crop_setup)
torch.library.register_autograd("fastprep::random_crop", _crop_backward, setup_context=_random_crop_setup)
