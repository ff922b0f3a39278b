"""The Numba backend: one module per op family, mirroring csrc/kernels + csrc/ops one to one."""

import torch

# Must run before any kernel module is imported: @njit(cache=True) picks its cache folder then.
from fastprep.numba_kernels._cache import CACHE_DIR  # noqa: F401
from fastprep.numba_kernels import (color, crop, crop_mask_ycbcr, dilate, mask_fill, pack_bits,
                                    random_mask)

# The CPU kernels of each op, by op name. Held in a Library for the life of the process.
CPU_KERNELS = {
    "pack_bits": pack_bits.pack_bits,
    "unpack_bits": pack_bits.unpack_bits,
    "crop": crop.crop,
    "random_crop": crop.random_crop,
    "rgb_to_ycbcr": color.rgb_to_ycbcr,
    "ycbcr_to_rgb": color.ycbcr_to_rgb,
    "dilate": dilate.dilate,
    "dilate_packed": dilate.dilate_packed,
    "mask_fill": mask_fill.mask_fill,
    "mask_fill_": mask_fill.mask_fill_,
    "crop_mask_ycbcr": crop_mask_ycbcr.crop_mask_ycbcr,
}

# random_mask and random_dilated_mask take no tensor: the dispatcher finds no backend key and runs
# the CompositeExplicitAutograd kernel, so that is where they go (as in csrc/ops/random_mask.cpp).
NO_TENSOR_KERNELS = {
    "random_mask": random_mask.random_mask,
    "random_dilated_mask": random_mask.random_dilated_mask,
}

_LIB = None


def register() -> None:
    global _LIB
    if _LIB is None:
        _LIB = torch.library.Library("fastprep", "IMPL")
        for name, fn in CPU_KERNELS.items():
            _LIB.impl(name, fn, "CPU")
        for name, fn in NO_TENSOR_KERNELS.items():
            _LIB.impl(name, fn, "CompositeExplicitAutograd")
