"""Numpy views of tensor memory for the Numba kernels, which (as the C++ kernels on raw pointers)
index flat arrays with element strides and move float16 / bfloat16 values as their bits."""

from __future__ import annotations

import numpy as np
import torch

# The same-size integer a kernel moves each element as, where numpy has no such float type.
UINT_OF_SIZE = {1: torch.uint8, 2: torch.int16, 4: torch.int32}
# The numpy-viewable dtype holding each image dtype's values (float16 and bfloat16 as bits).
FLAT_DTYPE = {torch.uint8: torch.uint8, torch.float32: torch.float32, torch.float16: torch.int16,
              torch.bfloat16: torch.int16}


def storage_span(t: torch.Tensor) -> np.ndarray:
    """A flat integer view of the storage `t` spans, from its first element: element i of `t`
    is at the sum of index x stride. Same-size integers, since the kernel only copies bits."""
    span = 1 + sum((s - 1) * st for s, st in zip(t.shape, t.stride()))
    it = t.view(UINT_OF_SIZE[t.element_size()])
    return torch.as_strided(it, (span,), (1,), t.storage_offset()).numpy()


def flat_view(t: torch.Tensor) -> np.ndarray:
    """A contiguous tensor as a flat numpy array of FLAT_DTYPE[t.dtype] (no copy)."""
    return t.view(FLAT_DTYPE[t.dtype]).numpy().reshape(-1)
