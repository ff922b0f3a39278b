"""Integer labels in a narrow dtype: one rule for CompactCollate (a batch's Python ints) and
fastprep.ray.CompactMap (a numpy column): the dtype a user may ask for, the smallest one holding
the labels, and the narrowing itself, which names the first label that does not fit."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch

LABEL_DTYPES = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)
NUMPY_LABEL_DTYPES = {torch.uint8: np.uint8, torch.int8: np.int8, torch.int16: np.int16,
                      torch.int32: np.int32, torch.int64: np.int64}


def check_label_dtype(owner: str, label_dtype: torch.dtype | None) -> None:
    if label_dtype is not None and label_dtype not in LABEL_DTYPES:
        raise ValueError(f"{owner}: expected label_dtype to be one of "
                         f"{[str(d) for d in LABEL_DTYPES]} or None, got {label_dtype}")


def smallest_int_dtype(lo: int, hi: int) -> torch.dtype:
    """The smallest integer dtype holding every value in [lo, hi] (uint8 preferred)."""
    for dtype in LABEL_DTYPES:
        info = torch.iinfo(dtype)
        if info.min <= lo and hi <= info.max:
            return dtype
    raise ValueError(f"labels in [{lo}, {hi}] do not fit in int64")


def narrow_labels(owner: str, labels: Sequence[int] | np.ndarray, dtype: torch.dtype,
                  where: Callable[[int], str]) -> np.ndarray:
    """`labels` (Python ints, any size, or an integer array) as a new numpy array of `dtype`.

    Args:
        owner: who asks, the start of the message (``"CompactCollate"``).
        labels: the labels.
        dtype: one of LABEL_DTYPES.
        where: label i's place for the message (``"of row 7"``).

    Raises:
        ValueError: naming the first label outside `dtype`'s range and where it is.

    Example:
        >>> narrow_labels("me", [3, 200], torch.uint8, lambda i: f"of row {i}").dtype
        dtype('uint8')
    """
    info = torch.iinfo(dtype)
    if len(labels):
        # min/max of Python ints stay exact; numpy would turn [2**64 - 1, -1] into float64.
        lo, hi = (labels.min(), labels.max()) if isinstance(labels, np.ndarray) else (min(labels), max(labels))
        if lo < info.min or hi > info.max:
            i = next(i for i, v in enumerate(labels) if not info.min <= v <= info.max)
            raise ValueError(f"{owner}: label {int(labels[i])} {where(i)} does not fit label_dtype={dtype} "
                             f"[{info.min}, {info.max}]")
    return np.array(labels, dtype=NUMPY_LABEL_DTYPES[dtype])
