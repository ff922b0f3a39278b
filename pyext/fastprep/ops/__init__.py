"""Op schemas, fake kernels and Python entry points, one module per op family."""

from fastprep.ops.pack_bits import pack_bits, unpack_bits

__all__ = ["pack_bits", "unpack_bits"]

from fastprep.ops.dilate import dilate, dilate_packed  # noqa: E402
from fastprep.ops.mask_fill import mask_fill, mask_fill_  # noqa: E402
from fastprep.ops.random_mask import random_dilated_mask, random_mask  # noqa: E402

__all__ += ["dilate", "dilate_packed", "mask_fill", "mask_fill_", "random_dilated_mask", "random_mask"]
