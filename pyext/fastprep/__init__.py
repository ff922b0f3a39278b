"""fastprep: memory-speed CPU transforms and compact batches for PyTorch data pipelines.

Importing fastprep defines the `torch.ops.fastprep.*` ops and loads the backend that runs them on
CPU (see :func:`backend`).
"""

from fastprep import ops  # noqa: F401  (defines every schema before a backend registers kernels)
from fastprep._backend import NativeUnavailableWarning, backend, build_info, select_backend
from fastprep.batch import CompactBatch
from fastprep.collate import CompactCollate, compact_collate
from fastprep.ops import (crop, crop_mask_ycbcr, dilate, dilate_packed, mask_fill, mask_fill_,
                          pack_bits, random_crop, random_crop_params, random_dilated_mask,
                          random_mask, rgb_to_ycbcr, unpack_bits, ycbcr_to_rgb)
from fastprep.prefetch import DevicePrefetcher
from fastprep.rng import derive_seed, draw_seed, random_word
from fastprep.warmup import warmup

__version__ = "0.1.0"

select_backend()

__all__ = [
    "CompactBatch", "CompactCollate", "DevicePrefetcher", "NativeUnavailableWarning", "backend",
    "build_info", "compact_collate", "crop", "crop_mask_ycbcr", "derive_seed", "dilate",
    "dilate_packed", "draw_seed", "mask_fill", "mask_fill_", "pack_bits", "random_crop",
    "random_crop_params", "random_dilated_mask", "random_mask", "random_word", "rgb_to_ycbcr",
    "unpack_bits", "warmup", "ycbcr_to_rgb",
]
