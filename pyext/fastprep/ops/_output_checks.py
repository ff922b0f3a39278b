"""The converted output's arguments (out_dtype, scale, mean, std): one rule for every op that writes
its output in another dtype (rgb_to_ycbcr / ycbcr_to_rgb, crop_mask_ycbcr, resized_crop). Mirror of
csrc/ops/output_args.h's check_output (and resize.cpp's mean / std checks): same conditions, same
order, same text."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch

import fastprep.ops._checks as checks


def check_out_dtype(op: str, out_dtype) -> None:
    """An out_dtype the kernels write (None: the op's default). The op wrappers check it before
    dispatching too, as torch cannot pass the quantized, bits and sub-byte dtypes to a stable-ABI
    kernel at all ("Not yet supported ScalarType Bits8"); the kernels' own check gives this text
    for every other one."""
    if out_dtype is not None and out_dtype not in checks.IMAGE_DTYPES:
        checks.fail(op, ": expected out_dtype to be torch.uint8, torch.float32, torch.float16 or torch.bfloat16, "
                    "got ", out_dtype)


def check_finite_float32(op: str, name: str, value: float) -> None:
    """A factor the kernels take as float32: inf, nan or 1e300 would make every output inf/nan."""
    if not math.isfinite(value) or abs(value) > checks.FLOAT_MAX[torch.float32]:
        checks.fail(op, ": expected ", name, " to be a finite float32 value, got ", name, "=", checks.fmt_float(value))


class OutputArgs(NamedTuple):
    dtype: torch.dtype
    mean: list[float] | None  # float32 values, one per channel
    std: list[float] | None


def _per_channel(op: str, arg: str, values, c: int, nonzero: bool) -> list[float]:
    n = len(values)
    if n not in (1, c):
        checks.fail(op, ": expected ", arg, " to have 1 or ", c, " values (one per channel), got ", n)
    out = []
    for i in range(c):
        k = 0 if n == 1 else i
        x, name = float(values[k]), f"{arg}[{k}]"
        check_finite_float32(op, name, x)
        if nonzero and np.float32(x) == 0:
            checks.fail(op, ": expected ", name, " to be nonzero in float32 (Normalize divides by it), got ", name, "=",
                        checks.fmt_float(x))
        out.append(float(np.float32(x)))
    return out


def check_output(op: str, odt: torch.dtype, scale: float, mean=None, std=None, channels: int = 3) -> OutputArgs:
    """The output's dtype `odt` (resolved: the op's default already put for None), the factor
    `scale` and the optional per-channel Normalize `mean` / `std` of an image of `channels`
    channels, checked in the kernels' order: a uint8 output takes neither a scale nor a Normalize.

    Args:
        op: the op's name, which starts every message.
        odt: the output dtype.
        scale: the factor every value is multiplied by in float32.
        mean, std: None, or 1 or `channels` values each (given together).
        channels: the image's channel count.

    Returns:
        OutputArgs: the dtype, and mean / std as float32 values, one per channel (None without).

    Example:
        >>> check_output("resized_crop", torch.float32, 1 / 255, [0.5], [0.25]).std
        [0.25, 0.25, 0.25]
    """
    check_out_dtype(op, odt)
    if odt == torch.uint8 and scale != 1.0:
        checks.fail(op, ": expected scale=1 for a torch.uint8 output, got scale=", checks.fmt_float(scale))
    if odt == torch.uint8 and (mean is not None or std is not None):
        checks.fail(op, ": expected mean=None and std=None for a torch.uint8 output (Normalize needs a float output)")
    check_finite_float32(op, "scale", scale)
    if (mean is None) != (std is None):
        checks.fail(op, ": expected mean and std together, got only ", "mean" if mean is not None else "std")
    if mean is None:
        return OutputArgs(odt, None, None)
    return OutputArgs(odt, _per_channel(op, "mean", mean, channels, False),
                      _per_channel(op, "std", std, channels, True))
