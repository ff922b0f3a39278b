"""fastprep: memory-speed CPU transforms and compact batches for PyTorch data pipelines.

Importing fastprep defines the `torch.ops.fastprep.*` ops and loads the backend that runs them on
CPU (see :func:`backend`).
"""

from fastprep import ops  # noqa: F401  (defines every schema before a backend registers kernels)
from fastprep._backend import NativeUnavailableWarning, backend, build_info, select_backend
from fastprep.ops import pack_bits, unpack_bits
from fastprep.rng import derive_seed, draw_seed, random_word

__version__ = "0.1.0"

select_backend()

__all__ = [
    "NativeUnavailableWarning",
    "backend",
    "build_info",
    "derive_seed",
    "draw_seed",
    "pack_bits",
    "random_word",
    "unpack_bits",
]

from fastprep.ops import (  # noqa: E402
    dilate, dilate_packed, mask_fill, mask_fill_, random_dilated_mask, random_mask)

__all__ += ["dilate", "dilate_packed", "mask_fill", "mask_fill_", "random_dilated_mask", "random_mask"]
