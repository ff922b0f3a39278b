"""rgb_to_ycbcr / ycbcr_to_rgb (JFIF, BT.601 full range): schema, fake kernel and a torch-ops
implementation for non-CPU devices. Kernels: csrc/kernels/color.cpp, numba_kernels/color.py."""

from __future__ import annotations

import torch

from fastprep.ops import checks
from fastprep.ops._library import define, impl_any_device
from fastprep.ops.crop import IMAGE_DTYPES, check_image_dtype

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
    return torch.ops.fastprep.rgb_to_ycbcr(img, layout, out_dtype, scale)


def ycbcr_to_rgb(img: torch.Tensor, layout: str = "CHW", out_dtype: torch.dtype | None = None,
                 scale: float = 1.0) -> torch.Tensor:
    return torch.ops.fastprep.ycbcr_to_rgb(img, layout, out_dtype, scale)


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
    if odt not in IMAGE_DTYPES:
        checks.fail(op, ": expected out_dtype to be torch.uint8, torch.float32, torch.float16 or "
                     "torch.bfloat16, got ", odt)
    if odt == torch.uint8 and img.dtype != torch.uint8:
        checks.fail(op, ": out_dtype=torch.uint8 needs a torch.uint8 img, got ", img.dtype)
    if odt == torch.uint8 and scale != 1.0:
        checks.fail(op, ": expected scale=1 for a torch.uint8 output, got scale=", f"{scale:g}")
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

_FWD = torch.tensor([[0.299, 0.587, 0.114], [-0.168736, -0.331264, 0.5], [0.5, -0.418688, -0.081312]],
                    dtype=torch.float64)
_INV = torch.tensor([[1.0, 0.0, 1.402], [1.0, -0.344136, -0.714136], [1.0, 1.772, 0.0]],
                    dtype=torch.float64)


def _color_torch(op, img, layout, out_dtype, scale, forward):
    v, odt = check_color(op, img, layout, out_dtype, scale)
    x = img if v.batched else img.unsqueeze(0)
    x = x.permute(0, 3, 1, 2) if layout == "HWC" else x
    delta = 128.0 if img.dtype == torch.uint8 else 0.5
    off = torch.tensor([0.0, delta, delta], dtype=torch.float64, device=img.device).view(3, 1, 1)
    xd = x.double()
    m = _FWD.to(img.device)
    if forward:
        y = torch.einsum("oc,nchw->nohw", m, xd) + off
    else:
        y = torch.einsum("oc,nchw->nohw", _INV.to(img.device), xd - off)
    if odt == torch.uint8:
        y = torch.floor(y + 0.5).clamp(0, 255)
    y = (y * scale).to(odt).contiguous()
    return y if v.batched else y[0]


def rgb_to_ycbcr_torch(img, layout="CHW", out_dtype=None, scale=1.0):
    """rgb_to_ycbcr in plain torch ops (float64), for devices without a fastprep kernel."""
    return _color_torch("rgb_to_ycbcr", img, layout, out_dtype, scale, True)


def ycbcr_to_rgb_torch(img, layout="CHW", out_dtype=None, scale=1.0):
    """ycbcr_to_rgb in plain torch ops (float64), for devices without a fastprep kernel."""
    return _color_torch("ycbcr_to_rgb", img, layout, out_dtype, scale, False)


impl_any_device("rgb_to_ycbcr", rgb_to_ycbcr_torch)
impl_any_device("ycbcr_to_rgb", ycbcr_to_rgb_torch)
