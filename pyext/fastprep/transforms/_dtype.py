"""ToDtype and the one dtype conversion every fastprep path uses (CompactBatch.expand too)."""

from __future__ import annotations

from typing import Any

import torch

from fastprep.core._args import check_bool
from fastprep.transforms._base import Transform
from fastprep.transforms._fusion_roles import FusionRole
from fastprep.transforms._inputs import check_layout, chw
from fastprep.transforms._pixels import map_pixels

# Bits of value (sign excluded) of each integer image dtype, as torchvision v2's to_dtype_image uses.
_VALUE_BITS = {torch.uint8: 8, torch.int8: 7, torch.int16: 15, torch.uint16: 16, torch.int32: 31, torch.int64: 63}


def _max_value(dtype: torch.dtype) -> int:
    # torchvision/transforms/_functional_tensor.py _max_value: the integer range's top, 1 for floats.
    bits = _VALUE_BITS.get(dtype)
    return 1 if bits is None else (1 << bits) - 1


def to_dtype_image(image: torch.Tensor, dtype: torch.dtype, scale: bool = False) -> torch.Tensor:
    """torchvision v2's ``to_dtype_image`` (torchvision/transforms/v2/functional/_misc.py), the same
    torch operations in the same order, so it gives torchvision's bits on every device:

    - same dtype: the image itself; ``scale=False``: ``image.to(dtype)``;
    - int -> float: ``image.to(dtype).mul_(1.0 / max)`` (uint8: times 1/255, not a division by 255,
      which differs by 1 ulp on about half the values);
    - float -> int: ``image.mul(max + 1.0 - 1e-3).to(dtype)`` (0.5 -> 127 for uint8), and float32 ->
      int32/int64 or float64 -> int64 raise as in torchvision (not exactly representable);
    - float -> float: ``image.to(dtype)``; int -> int: a shift by the difference in value bits.

    CompactBatch.expand() converts its images with it, so every fastprep path gives these bits.
    """
    if image.dtype == dtype:
        return image
    if not scale:
        return image.to(dtype)
    if image.is_floating_point():
        if dtype.is_floating_point:
            return image.to(dtype)
        if (image.dtype == torch.float32 and dtype in (torch.int32, torch.int64)) or (
                image.dtype == torch.float64 and dtype == torch.int64):
            raise RuntimeError(f"ToDtype: the conversion from {image.dtype} to {dtype} cannot be performed "
                               f"safely (as torchvision)")
        eps = 1e-3  # torchvision's: maps [0, 1] onto every integer level, 1.0 onto the top one
        return image.mul(float(_max_value(dtype)) + 1.0 - eps).to(dtype)
    if dtype.is_floating_point:
        return image.to(dtype).mul_(1.0 / _max_value(image.dtype))
    bits_in, bits_out = _VALUE_BITS.get(image.dtype), _VALUE_BITS.get(dtype)
    if bits_in is None or bits_out is None:
        raise ValueError(f"ToDtype: scaling between {image.dtype} and {dtype} is not defined "
                         f"(integer dtypes with a value range, or floats)")
    if bits_in > bits_out:
        if image.dtype == torch.uint16:  # torchvision's form: uint16 has no shift kernels
            return (image / 2 ** (bits_in - bits_out)).to(dtype)
        return image.bitwise_right_shift(bits_in - bits_out).to(dtype)
    if dtype == torch.uint16:
        return image.to(dtype) * 2 ** (bits_out - bits_in)
    return image.to(dtype).bitwise_left_shift_(bits_out - bits_in)


class ToDtype(Transform):
    """Cast an image to `dtype`; with scale=True the value range is converted as torchvision v2's
    ``ToDtype(dtype, scale=True)`` does, bit for bit (see :func:`to_dtype_image`): uint8 -> float
    is ``x * (1 / 255)``, float -> uint8 is ``x * (256 - 1e-3)`` truncated. As torchvision's, only
    images and videos of a sample are converted; masks, boxes and other values pass through.

    Example:
        >>> ToDtype(torch.uint8, scale=True)(torch.full((1, 1, 1), 0.5))
        tensor([[[127]]], dtype=torch.uint8)
    """

    def __init__(self, dtype: torch.dtype = torch.float32, scale: bool = False, layout: str = "CHW"):
        super().__init__()
        if not isinstance(dtype, torch.dtype):
            raise ValueError(f"ToDtype: expected dtype to be a torch.dtype, got {dtype!r}")
        self.dtype = dtype
        self.scale = check_bool("ToDtype", "scale", scale)
        self.layout = check_layout("ToDtype", layout)

    def repr_args(self) -> dict[str, Any]:
        return {"dtype": self.dtype, "scale": self.scale} | ({"layout": self.layout} if self.layout != "CHW" else {})

    @property
    def fusion_role(self) -> FusionRole | None:
        """A float output is what a fused op writes: ``float32(v) * float32(op_scale)`` (rounded
        once to float16 / bfloat16) is this conversion of uint8 values."""
        return FusionRole.DTYPE if self.dtype in (torch.float32, torch.float16, torch.bfloat16) else None

    @property
    def op_scale(self) -> float:
        """The factor a fused op multiplies uint8 values by: to_dtype_image's ``1.0 / 255``, or 1."""
        return 1.0 / _max_value(torch.uint8) if self.scale else 1.0

    def transform(self, sample: Any) -> Any:
        def convert(t: torch.Tensor, layout: str) -> torch.Tensor:
            return to_dtype_image(chw(t, layout), self.dtype, self.scale)

        return map_pixels(self, sample, self.layout, convert)
