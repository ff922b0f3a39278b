"""Op schemas, fake kernels and Python entry points, one module per op family."""

from fastprep.ops.color import rgb_to_ycbcr, ycbcr_to_rgb
from fastprep.ops.crop import crop, random_crop, random_crop_params
from fastprep.ops.dilate import dilate, dilate_packed
from fastprep.ops.fused import crop_mask_ycbcr
from fastprep.ops.mask_fill import mask_fill, mask_fill_
from fastprep.ops.pack_bits import pack_bits, unpack_bits
from fastprep.ops.random_mask import random_dilated_mask, random_mask

__all__ = ["crop", "crop_mask_ycbcr", "dilate", "dilate_packed", "mask_fill", "mask_fill_",
           "pack_bits", "random_crop", "random_crop_params", "random_dilated_mask", "random_mask",
           "rgb_to_ycbcr", "unpack_bits", "ycbcr_to_rgb"]
