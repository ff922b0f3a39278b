"""rgb_to_ycbcr / ycbcr_to_rgb (JFIF, BT.601 full range): schema, fake kernel and a torch-ops
implementation for non-CPU devices. Kernels: csrc/kernels/color.cpp, numba_kernels/_color.py."""

from __future__ import annotations

import numpy as np
import torch

import fastprep.ops._checks as checks
from fastprep.ops._crop import check_image_dtype
from fastprep.ops._library import call_differentiable, define, impl_any_device
from fastprep.ops._output_checks import check_out_dtype, check_output

__all__ = ["rgb_to_ycbcr", "ycbcr_to_rgb"]

for _name in ("rgb_to_ycbcr", "ycbcr_to_rgb"):
    define(f"{_name}(Tensor img, str layout='CHW', ScalarType? out_dtype=None, float scale=1.0) -> Tensor")

_DOC = """

    `img` is ``[3, H, W]`` (or ``[H, W, 3]`` with ``layout="HWC"``) or a batch ``[N, ...]`` of
    either, any strides; uint8, float32, float16 or bfloat16. The result is contiguous CHW planes
    (``[N, 3, H, W]`` for a batch) of `out_dtype` (default: img's dtype).

    * uint8 -> uint8 is exact: the real-number formula rounded half up and clamped to [0, 255],
      for every colour (integer arithmetic; `scale` must be 1).
    * otherwise the formula runs in float32 on the input values, the result is multiplied by
      `scale` (e.g. 1/255 for a uint8 input) and rounded to `out_dtype` (nearest even).
      The chroma offset is 128 for uint8 input (0..255 values) and 0.5 for float input (values
      in [0, 1], as in kornia). A float input cannot give a uint8 output.
    """


def rgb_to_ycbcr(img: torch.Tensor, layout: str = "CHW", out_dtype: torch.dtype | None = None,
                 scale: float = 1.0) -> torch.Tensor:
    check_out_dtype("rgb_to_ycbcr", out_dtype)
    return call_differentiable(torch.ops.fastprep.rgb_to_ycbcr.default, img, layout, out_dtype, scale)


def ycbcr_to_rgb(img: torch.Tensor, layout: str = "CHW", out_dtype: torch.dtype | None = None,
                 scale: float = 1.0) -> torch.Tensor:
    check_out_dtype("ycbcr_to_rgb", out_dtype)
    return call_differentiable(torch.ops.fastprep.ycbcr_to_rgb.default, img, layout, out_dtype, scale)


rgb_to_ycbcr.__doc__ = ("RGB -> YCbCr: Y = .299 R + .587 G + .114 B, "
                        "Cb = -.168736 R - .331264 G + .5 B + 128, "
                        "Cr = .5 R - .418688 G - .081312 B + 128." + _DOC)
ycbcr_to_rgb.__doc__ = ("YCbCr -> RGB: R = Y + 1.402 (Cr - 128), "
                        "G = Y - .344136 (Cb - 128) - .714136 (Cr - 128), "
                        "B = Y + 1.772 (Cb - 128)." + _DOC)


def check_color(op: str, img: torch.Tensor, layout: str, out_dtype, scale: float):
    """Returns (ImageView, output dtype)."""
    check_image_dtype(op, img)
    v = checks.image_view(op, "img", img, checks.parse_layout(op, layout))
    if v.c != 3:
        checks.fail(op, ": expected img to have 3 channels, got ", v.c)
    odt = img.dtype if out_dtype is None else out_dtype
    if odt == torch.uint8 and img.dtype != torch.uint8:
        checks.fail(op, ": out_dtype=torch.uint8 needs a torch.uint8 img, got ", img.dtype)
    check_output(op, odt, scale)
    checks.check_output_bytes(op, out_shape(v), odt, checks.shape_source("img", img))
    return v, odt


def out_shape(v: checks.ImageView) -> list[int]:
    return ([v.n] if v.batched else []) + [3, v.h, v.w]


def _fake(op):
    def fake(img, layout="CHW", out_dtype=None, scale=1.0):
        v, odt = check_color(op, img, layout, out_dtype, scale)
        return img.new_empty(out_shape(v), dtype=odt)
    return fake


torch.library.register_fake("fastprep::rgb_to_ycbcr")(_fake("rgb_to_ycbcr"))
torch.library.register_fake("fastprep::ycbcr_to_rgb")(_fake("ycbcr_to_rgb"))

# The kernels' float32 constants (csrc/kernels/color_pixel.h): every product rounds once, in
# float32, and the sums run in the kernels' order, so the float path gives their bits on any
# device whose float32 arithmetic is IEEE (CPU, CUDA) in eager mode (no contraction into FMA).
_K = {name: torch.tensor(value, dtype=torch.float32) for name, value in dict(
    yr=0.299, yg=0.587, yb=0.114, br=-0.168736, bg=0.331264, bb=0.5, rr=0.5, rg=0.418688, rb=0.081312,
    kr=1.402, gb=0.344136, gr=0.714136, kb=1.772).items()}


def _div_floor(n: torch.Tensor, d: int) -> torch.Tensor:
    """floor(n / d) for n clamped to [0, 256 d): the kernels' div_clamped, exactly, in int32."""
    return torch.div(n.clamp(0, 256 * d - 1), d, rounding_mode="floor")


def _exact_u8(a, b, c, forward):
    """uint8 -> uint8 in integer arithmetic: the exact rounded JFIF formula of color_pixel.h."""
    a, b, c = (t.to(torch.int32) for t in (a, b, c))
    if forward:
        return (_div_floor(299 * a + 587 * b + 114 * c + 500, 1000),
                _div_floor(-5273 * a - 10352 * b + 15625 * c + 4015625, 31250),
                _div_floor(15625 * a - 13084 * b - 2541 * c + 4015625, 31250))
    cb, cr = b - 128, c - 128
    return (_div_floor(500 * a + 250 + 701 * cr, 500),
            _div_floor(125000 * a + 62500 - 43017 * cb - 89267 * cr, 125000),
            _div_floor(250 * a + 125 + 443 * cb, 250))


def _float32(a, b, c, forward, delta):
    """The float formulas of color_pixel.h, operation for operation, in float32."""
    k = {name: t.to(a.device) for name, t in _K.items()}
    a, b, c = (t.to(torch.float32) for t in (a, b, c))
    if forward:
        return (k["yr"] * a + k["yg"] * b + k["yb"] * c,
                k["br"] * a - k["bg"] * b + k["bb"] * c + delta,
                k["rr"] * a - k["rg"] * b - k["rb"] * c + delta)
    cb, cr = b - delta, c - delta
    return a + k["kr"] * cr, a - k["gb"] * cb - k["gr"] * cr, a + k["kb"] * cb


def _color_torch(op, img, layout, out_dtype, scale, forward):
    v, odt = check_color(op, img, layout, out_dtype, scale)
    x = img if v.batched else img.unsqueeze(0)
    x = x.permute(0, 3, 1, 2) if layout == "HWC" else x
    a, b, c = x.unbind(1)
    if odt == torch.uint8:
        planes = _exact_u8(a, b, c, forward)
    else:
        delta = torch.tensor(128.0 if img.dtype == torch.uint8 else 0.5, dtype=torch.float32)
        s = torch.tensor(scale, dtype=torch.float32)  # the kernels scale by float(scale)
        planes = [p * s for p in _float32(a, b, c, forward, delta)]
    y = torch.stack(planes, dim=1).to(odt)
    return y if v.batched else y[0]


def rgb_to_ycbcr_torch(img, layout="CHW", out_dtype=None, scale=1.0):
    """rgb_to_ycbcr in plain torch ops with the kernels' bits (integer arithmetic for uint8 ->
    uint8, the kernels' float32 operations otherwise): what devices without a kernel run."""
    return _color_torch("rgb_to_ycbcr", img, layout, out_dtype, scale, True)


def ycbcr_to_rgb_torch(img, layout="CHW", out_dtype=None, scale=1.0):
    """ycbcr_to_rgb in plain torch ops with the kernels' bits (see rgb_to_ycbcr_torch)."""
    return _color_torch("ycbcr_to_rgb", img, layout, out_dtype, scale, False)


impl_any_device("rgb_to_ycbcr", rgb_to_ycbcr_torch)
impl_any_device("ycbcr_to_rgb", ycbcr_to_rgb_torch)


# Autograd: on float images both conversions are affine maps per pixel, out = s (M x + d), so the
# gradient w.r.t. the image is s M^T grad, with M the kernels' float32 constants (a uint8 image
# cannot require grad, and a float one cannot give a uint8 output).

def _color_setup(ctx, inputs, output):
    img, layout, _out_dtype, scale = inputs
    ctx.dtype, ctx.layout, ctx.scale = img.dtype, layout, float(np.float32(scale))  # the kernels' float(scale)


# The float32 constants as Python floats (exactly those values): a float32 tensor times a Python
# float multiplies in float32, and no constant tensor is made that fake tracing would have to know.
_KF = {name: float(t) for name, t in _K.items()}


def _transposed(forward: bool, g0, g1, g2):
    k = _KF
    if forward:  # M = [[yr, yg, yb], [br, -bg, bb], [rr, -rg, -rb]]
        return (k["yr"] * g0 + k["br"] * g1 + k["rr"] * g2,
                k["yg"] * g0 - k["bg"] * g1 - k["rg"] * g2,
                k["yb"] * g0 + k["bb"] * g1 - k["rb"] * g2)
    # M = [[1, 0, kr], [1, -gb, -gr], [1, kb, 0]]
    return g0 + g1 + g2, k["kb"] * g2 - k["gb"] * g1, k["kr"] * g0 - k["gr"] * g1


def _color_backward(forward: bool):
    def backward(ctx, grad):
        if not ctx.needs_input_grad[0]:
            return None, None, None, None
        planes = _transposed(forward, *(g.to(torch.float32) for g in grad.unbind(-3)))
        grad_img = torch.stack([p * ctx.scale for p in planes], dim=-1 if ctx.layout == "HWC" else -3)
        return grad_img.to(ctx.dtype), None, None, None
    return backward


torch.library.register_autograd("fastprep::rgb_to_ycbcr", _color_backward(True), setup_context=_color_setup)
torch.library.register_autograd("fastprep::ycbcr_to_rgb", _color_backward(False), setup_context=_color_setup)
