"""mask_fill / mask_fill_: schemas, fake kernels, Python entry points.
Kernels: csrc/kernels/mask_fill.cpp (native), numba_kernels/_mask_fill.py (Numba)."""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch.autograd.graph import increment_version

import fastprep.ops._checks as checks
from fastprep.ops._library import LIB, call_differentiable, define, impl_any_device

__all__ = ["mask_fill", "mask_fill_"]

# `value` has no schema default: torch hands a Python kernel (the Numba backend's, the autograd
# ones) the default in place of an argument equal to it, and -0.0 == 0 would lose its sign.
define("mask_fill(Tensor img, Tensor mask, float value, str layout='CHW') -> Tensor")
# The in-place op returns nothing: torch cannot functionalize (torch.compile, opcheck) a custom op
# whose output aliases an input, so the Python entry point returns img itself.
define("mask_fill_(Tensor(a!) img, Tensor mask, float value, str layout='CHW') -> ()")



def mask_fill(img: torch.Tensor, mask: torch.Tensor, value: float = 0,
              layout: str = "CHW") -> torch.Tensor:
    """A contiguous copy of `img` (``[C, H, W]`` / ``[H, W, C]`` or a batch of them, uint8 or
    float32/float16/bfloat16, any strides) with every channel of the pixels where `mask` is true
    set to `value`. `mask` is bool ``[H, W]`` (shared by a batch) or ``[N, H, W]``, or the same
    packed by ``pack_bits(..., bitorder="little")`` (uint8, last dim ``ceil(W / 8)``). For uint8
    images `value` must be an integer in [0, 255]."""
    return call_differentiable(torch.ops.fastprep.mask_fill.default, img, mask, float(value), layout)


def mask_fill_(img: torch.Tensor, mask: torch.Tensor, value: float = 0,
               layout: str = "CHW") -> torch.Tensor:
    """In-place :func:`mask_fill` (no copy of the image; writes through its strides); returns img."""
    torch.ops.fastprep.mask_fill_.default(img, mask, float(value), layout)
    return img


class FillArgs(NamedTuple):
    view: checks.ImageView
    mask_n: int
    packed: bool


def check_mask_fill(op: str, img: torch.Tensor, mask: torch.Tensor, value: float,
                    layout: str) -> FillArgs:
    """Mirror of prepare() in csrc/ops/mask_fill.cpp."""
    checks.check_tensor(op, "img", img)
    checks.check_tensor(op, "mask", mask)
    checks.check_same_device(op, "mask", mask, "img", img)
    hwc = checks.parse_layout(op, layout)
    checks.check_image_dtype(op, "img", img)
    v = checks.image_view(op, "img", img, hwc)
    if mask.dtype not in (torch.bool, torch.uint8):
        checks.fail(op, ": expected mask to be a torch.bool tensor or a packed torch.uint8 one, got ",
                     mask.dtype)
    packed = mask.dtype == torch.uint8
    last = (v.w + 7) // 8 if packed else v.w
    got = list(mask.shape)
    ok3 = v.batched and got == [v.n, v.h, last]
    if got != [v.h, last] and not ok3:
        checks.fail(op, ": expected mask to have shape ", [v.h, last],
                     f" or {[v.n, v.h, last]}" if v.batched else "", " to match img",
                     " (packed)" if packed else "", ", got ", got)
    if img.dtype == torch.uint8:
        if not (0 <= value <= 255 and value == int(value)):
            checks.fail(op, ": value=", checks.fmt_float(value), " is not representable in "
                         "torch.uint8 (expected an integer in [0, 255])")
    elif math.isfinite(value) and abs(value) > checks.FLOAT_MAX[img.dtype]:
        checks.fail(op, ": value=", checks.fmt_float(value), " is not representable in ",
                     img.dtype, " (largest finite value ", checks.fmt_float(checks.FLOAT_MAX[img.dtype]), ")")
    if op == "mask_fill":  # the out-of-place op allocates an image-sized output
        checks.check_output_bytes(op, img.shape, img.dtype, checks.shape_source("img", img))
    else:  # the in-place op writes img: as torch's masked_fill_, no element twice, mask not in it
        checks.check_no_internal_overlap(op, "img", img)
        checks.check_no_overlap(op, "img", img, "mask", mask)
    return FillArgs(v, v.n if ok3 else 1, packed)


@torch.library.register_fake("fastprep::mask_fill")
def _mask_fill_fake(img, mask, value, layout="CHW"):
    check_mask_fill("mask_fill", img, mask, value, layout)
    return torch.empty_like(img, memory_format=torch.contiguous_format)


@torch.library.register_fake("fastprep::mask_fill_")
def _mask_fill__fake(img, mask, value, layout="CHW"):
    check_mask_fill("mask_fill_", img, mask, value, layout)


def _bool_mask(img: torch.Tensor, mask: torch.Tensor, args: FillArgs, layout: str) -> torch.Tensor:
    """The mask as bools shaped to broadcast over img's channels (unpacked on its device)."""
    m = torch.ops.fastprep.unpack_bits.default(mask, args.view.w, -1, "little") if args.packed else mask
    if args.view.batched and m.dim() == 2:
        m = m.unsqueeze(0)
    return m.unsqueeze(-1) if layout == "HWC" else m.unsqueeze(-3)


def _fill_value(value: float, img: torch.Tensor) -> torch.Tensor:
    # torch's own conversion, as the C++ binding's torch::stable::full.
    return torch.full((), value, dtype=img.dtype, device=img.device)


def mask_fill_torch(img, mask, value, layout="CHW"):
    """mask_fill in plain torch ops (a select, exact on any device): what devices without a kernel
    run; the packed mask is unpacked on the device."""
    args = check_mask_fill("mask_fill", img, mask, value, layout)
    return torch.where(_bool_mask(img, mask, args, layout), _fill_value(value, img), img).contiguous()


def mask_fill__torch(img, mask, value, layout="CHW"):
    """mask_fill_ in plain torch ops, in place through img's strides."""
    args = check_mask_fill("mask_fill_", img, mask, value, layout)
    img.masked_fill_(_bool_mask(img, mask, args, layout), _fill_value(value, img))


impl_any_device("mask_fill", mask_fill_torch)
impl_any_device("mask_fill_", mask_fill__torch)



# Autograd. mask_fill's gradient w.r.t. the image is the output's gradient with the masked pixels
# zeroed (as torch.masked_fill's); the mask is bool / bits and the value a constant.

def _mask_fill_setup(ctx, inputs, output):
    img, mask, value, layout = inputs
    ctx.args = check_mask_fill("mask_fill", img, mask, value, layout)
    ctx.layout = layout
    ctx.save_for_backward(mask)


def _mask_fill_backward(ctx, grad):
    (mask,) = ctx.saved_tensors
    grad_img = grad.masked_fill(_bool_mask(grad, mask, ctx.args, ctx.layout), 0) if ctx.needs_input_grad[0] else None
    return grad_img, None, None, None


torch.library.register_autograd("fastprep::mask_fill", _mask_fill_backward, setup_context=_mask_fill_setup)


class _MaskFillInPlace(torch.autograd.Function):
    """mask_fill_ under autograd: fills img in place (mark_dirty rebases its history, and refuses a
    leaf that requires grad as torch's in-place ops do); the gradient is mask_fill's."""

    @staticmethod
    def forward(ctx, img, mask, value, layout):
        ctx.args = check_mask_fill("mask_fill_", img, mask, value, layout)
        ctx.layout = layout
        ctx.save_for_backward(mask)
        torch.ops.fastprep.mask_fill_.default(img, mask, value, layout)  # grad mode is off in here
        ctx.mark_dirty(img)
        return img

    @staticmethod
    def backward(ctx, grad):
        return _mask_fill_backward(ctx, grad)


_AFTER_AUTOGRAD = torch._C._after_autograd_keyset


def _mask_fill__autograd(keyset, img, mask, value, layout="CHW"):
    """mask_fill_'s Autograd kernel (register_autograd takes functional ops only): the in-place
    Function when img takes part in autograd, else straight to the backend."""
    if torch.is_grad_enabled() and isinstance(img, torch.Tensor) and img.requires_grad:
        _MaskFillInPlace.apply(img, mask, value, layout)  # mark_dirty bumps img's version
        return None
    torch.ops.fastprep.mask_fill_.default.redispatch(keyset & _AFTER_AUTOGRAD, img, mask, value, layout)
    # As torch's in-place ops: a graph that saved img (w * img saves it for w's gradient) must
    # see that it changed, and refuse to backward through the new values.
    increment_version(img)
    return None


LIB.impl("mask_fill_", _mask_fill__autograd, "Autograd", with_keyset=True)
