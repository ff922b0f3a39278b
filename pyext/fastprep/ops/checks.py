"""Argument checks for the Python-side kernels (Numba backend, torch-ops fallback).

Mirror of csrc/ops/checks.h, views.h and alloc.h: same conditions, same message text, same exception type
(RuntimeError, which is what a C++ kernel's error becomes in Python), so a caller sees the same
error whichever backend runs.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch


def fail(*parts: object) -> None:
    raise RuntimeError("".join(str(p) for p in parts))


def check_dtype(op: str, arg: str, t: torch.Tensor, want: torch.dtype) -> None:
    if t.dtype != want:
        fail(op, ": expected ", arg, " to be a ", want, " tensor, got ", t.dtype)


def check_min_dim(op: str, arg: str, t: torch.Tensor, min_dim: int) -> None:
    if t.dim() < min_dim:
        fail(op, ": expected ", arg, " to have at least ", min_dim, " dimension(s), got a ",
             t.dim(), "-D tensor")


def wrap_dim(op: str, dim: int, ndim: int) -> int:
    if not -ndim <= dim < ndim:
        fail(op, ": dim ", dim, " is out of range for a ", ndim, "-D tensor (expected -", ndim,
             " <= dim < ", ndim, ")")
    return dim + ndim if dim < 0 else dim


def parse_bitorder(op: str, bitorder: str) -> bool:
    """True for "little", False for "big"."""
    if bitorder not in ("little", "big"):
        fail(op, ": expected bitorder to be 'little' or 'big', got '", bitorder, "'")
    return bitorder == "little"


def parse_layout(op: str, layout: str) -> bool:
    """True for "HWC", False for "CHW"."""
    if layout not in ("CHW", "HWC"):
        fail(op, ": expected layout to be 'CHW' or 'HWC', got '", layout, "'")
    return layout == "HWC"


class ImageView(NamedTuple):
    """An image or batch as [N, C, H, W] sizes and element strides, whatever its layout."""
    n: int
    c: int
    h: int
    w: int
    sn: int
    sc: int
    sh: int
    sw: int
    batched: bool


def image_view(op: str, arg: str, t: torch.Tensor, hwc: bool) -> ImageView:
    if t.dim() not in (3, 4):
        fail(op, ": expected ", arg, " to be a 3-D ", "[H, W, C]" if hwc else "[C, H, W]",
             " image or a 4-D batch of them, got a ", t.dim(), "-D tensor")
    batched = t.dim() == 4
    b = 1 if batched else 0
    ic, ih, iw = (b + 2, b, b + 1) if hwc else (b, b + 1, b + 2)
    return ImageView(t.shape[0] if batched else 1, t.shape[ic], t.shape[ih], t.shape[iw],
                     t.stride(0) if batched else 0, t.stride(ic), t.stride(ih), t.stride(iw),
                     batched)


def check_output_bytes(op: str, sizes, dtype: torch.dtype, source) -> None:
    """An output whose byte count does not fit int64 fails before anything is allocated, naming
    the arguments it comes from (source(): called only to fail, keeping the text off the per-call
    cost); an empty output is left to torch. Mirror of alloc.h's."""
    if math.prod(sizes) * dtype.itemsize > 2**63 - 1:
        fail(op, ": expected an output of at most 2^63 - 1 bytes, got ", list(sizes), " of ", dtype,
             " from ", source())


def shape_source(arg: str, t: torch.Tensor):
    """source() for an output shaped by input `arg`: "<arg> of shape [...]" (alloc.h's twin)."""
    return lambda: f"{arg} of shape {list(t.shape)}"


def allocating(op: str, what: str, sizes, dtype: torch.dtype, source, alloc):
    """alloc(), with a failure reported as the C++ binding reports it (alloc.h's allocating):
    what could not be allocated and its size, the same text on both backends."""
    try:
        return alloc()
    except RuntimeError:
        pass
    from_ = source()
    fail(op, ": could not allocate ", what, ", ", list(sizes), " of ", dtype, " (",
         math.prod(sizes) * dtype.itemsize, " bytes)", " from " if from_ else "", from_)


def new_output(op: str, like, sizes, dtype: torch.dtype, source) -> torch.Tensor:
    """The op's output on `like`'s device (torch.empty's default without one); source() names the
    arguments its shape comes from."""
    if like is None:
        return allocating(op, "the output", sizes, dtype, source, lambda: torch.empty(sizes, dtype=dtype))
    return allocating(op, "the output", sizes, dtype, source, lambda: like.new_empty(sizes, dtype=dtype))


def contiguous_input(op: str, arg: str, t: torch.Tensor) -> torch.Tensor:
    """A contiguous copy of input `arg` (t itself when already contiguous)."""
    if t.is_contiguous():
        return t
    return allocating(op, "a contiguous copy of " + arg, t.shape, t.dtype, str, t.contiguous)


def check_unpack_count(op: str, count: int, m: int, dim: int) -> None:
    if not 0 <= count <= 8 * m:
        fail(op, ": expected 0 <= count <= ", 8 * m, " (8 bits x ", m, " bytes along dim ", dim,
             "), got count=", count)


def axis_view(shape: torch.Size, dim: int) -> tuple[int, int, int]:
    """The (outer, n, inner) view of a contiguous tensor around `dim`."""
    outer = inner = 1
    for d, s in enumerate(shape):
        if d < dim:
            outer *= s
        elif d > dim:
            inner *= s
    return outer, shape[dim], inner


# Shared by the mask ops (ops/random_mask.py, ops/dilate.py, ops/mask_fill.py).

def fmt_float(x: float) -> str:
    """A float as C++'s default ostream prints it (%g), so both backends' messages match."""
    return format(float(x), "g")


def parse_structure(op: str, structure: str) -> bool:
    """True for "square" (8-neighbour), False for "cross" (4-neighbour)."""
    if structure not in ("cross", "square"):
        fail(op, ": expected structure to be 'cross' or 'square', got '", structure, "'")
    return structure == "square"


def check_iterations(op: str, iterations: int) -> None:
    if iterations < 0:
        fail(op, ": expected iterations >= 0, got iterations=", iterations)
