"""The Numba backend: one module per op family, mirroring csrc/kernels + csrc/ops one to one."""

import torch

from fastprep.numba_kernels import pack_bits

# The CPU kernels of each op, by op name. Held in a Library for the life of the process.
CPU_KERNELS = {
    "pack_bits": pack_bits.pack_bits,
    "unpack_bits": pack_bits.unpack_bits,
}

_LIB = None


def register() -> None:
    global _LIB
    if _LIB is None:
        _LIB = torch.library.Library("fastprep", "IMPL")
        for name, fn in CPU_KERNELS.items():
            _LIB.impl(name, fn, "CPU")

from fastprep.numba_kernels import color, crop  # noqa: E402

CPU_KERNELS.update({
    "crop": crop.crop,
    "random_crop": crop.random_crop,
    "rgb_to_ycbcr": color.rgb_to_ycbcr,
    "ycbcr_to_rgb": color.ycbcr_to_rgb,
})
