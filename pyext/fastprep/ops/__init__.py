"""Op schemas, fake kernels and Python entry points, one module per op family."""

from fastprep.ops.pack_bits import pack_bits, unpack_bits

__all__ = ["pack_bits", "unpack_bits"]
from fastprep.ops.crop import crop, random_crop, random_crop_params  # noqa: E402
from fastprep.ops.color import rgb_to_ycbcr, ycbcr_to_rgb  # noqa: E402

__all__ += ["crop", "random_crop", "random_crop_params", "rgb_to_ycbcr", "ycbcr_to_rgb"]
