"""Argument checks for the Python-side kernels (Numba backend, torch-ops fallback).

Mirror of csrc/ops/checks.h, views.h and alloc.h: same conditions, same message text, same exception type
(RuntimeError, which is what a C++ kernel's error becomes in Python), so a caller sees the same
error whichever backend runs.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
import torch
from torch._subclasses.fake_tensor import is_fake

from fastprep.core._args import INT64_MAX, INT64_MIN, check_seed, op_seed  # noqa: F401 (the one seed check)


def fail(*parts: object) -> None:
    raise RuntimeError("".join(str(p) for p in parts))


def check_tensor(op: str, arg: str, t) -> None:
    """A tensor argument given as None (torch passes it to a kernel as an undefined tensor)."""
    if t is None:
        fail(op, ": expected ", arg, " to be a tensor, got None")


def check_same_device(op: str, arg: str, t: torch.Tensor, like: str, ref: torch.Tensor) -> None:
    """Tensors of one call on one device. The dispatcher runs the kernel of the highest-priority
    device among the arguments: a CPU image with a meta mask ran the fake kernel, which returned
    uninitialised CPU memory. No C++ twin: a CPU kernel only ever gets CPU tensors."""
    if t.device != ref.device:
        fail(op, ": expected ", arg, " on ", like, "'s device (", str(ref.device), "), got ", str(t.device))


def check_dtype(op: str, arg: str, t: torch.Tensor, want: torch.dtype) -> None:
    if t.dtype != want:
        fail(op, ": expected ", arg, " to be a ", want, " tensor, got ", t.dtype)


IMAGE_DTYPES = (torch.uint8, torch.float32, torch.float16, torch.bfloat16)


def check_image_dtype(op: str, arg: str, t: torch.Tensor) -> None:
    """An image dtype (checks.h's image_dtype)."""
    if t.dtype not in IMAGE_DTYPES:
        fail(op, ": expected ", arg, " to be a torch.uint8, torch.float32, torch.float16 or torch.bfloat16 "
             "tensor, got ", t.dtype)


def quoted(s: str) -> str:
    """A str argument as the messages print it (checks.h's quoted): single quotes, every byte of its
    UTF-8 outside printable ASCII escaped (\\xNN, \\t, \\n, \\r), \\ and ' backslashed. Python's
    repr for ASCII text; an embedded NUL shows as \\x00 instead of cutting the message."""
    out = []
    for b in s.encode("utf-8", "surrogatepass"):
        ch = chr(b)
        if ch in "\\'":
            out.append("\\" + ch)
        elif ch in "\t\n\r":
            out.append({"\t": "\\t", "\n": "\\n", "\r": "\\r"}[ch])
        elif b < 0x20 or b > 0x7E:
            out.append(f"\\x{b:02x}")
        else:
            out.append(ch)
    return "'" + "".join(out) + "'"


def op_int(op: str, name: str, value: Any) -> int:
    """Int argument `name` of op `op` as a Python int: a Python or numpy integer. torch's own
    argument parsing takes True and 0-d tensors as ints (for every op, aten's too), so the
    fastprep.* functions refuse them here, naming the argument: a TypeError, as for seeds."""
    if type(value) is int:  # the usual case, without the ABC checks
        return value
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{op}: expected {name} to be an int, got {type(value).__name__} ({value!r})")
    return int(value)


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
        fail(op, ": expected bitorder to be 'little' or 'big', got ", quoted(bitorder))
    return bitorder == "little"


def parse_layout(op: str, layout: str) -> bool:
    """True for "HWC", False for "CHW"."""
    if layout not in ("CHW", "HWC"):
        fail(op, ": expected layout to be 'CHW' or 'HWC', got ", quoted(layout))
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
    # Sizes and strides unpacked once: each t.shape[i] / t.stride(i) is a call into torch, and
    # these were half of a small op's Numba-side checks.
    if t.dim() == 4:
        n, *chw = t.shape
        sn, *schw = t.stride()
    else:
        n, chw, sn, schw = 1, t.shape, 0, t.stride()
    if hwc:
        (h, w, c), (sh, sw, sc) = chw, schw
    else:
        (c, h, w), (sc, sh, sw) = chw, schw
    return ImageView(n, c, h, w, sn, sc, sh, sw, t.dim() == 4)


def _bytes_fit(sizes, dtype: torch.dtype) -> bool:
    """Whether the sizes other than 0, times the element size, fit int64: what torch needs to lay a
    tensor out, even an empty one (alloc.h's bytes_fit)."""
    count = math.prod(sizes)
    if count == 0:
        count = math.prod(s for s in sizes if s != 0)
    return count * dtype.itemsize <= INT64_MAX


def check_output_bytes(op: str, sizes, dtype: torch.dtype, source) -> None:
    """An output whose byte count does not fit int64 fails before anything is allocated, naming
    the arguments it comes from (source(): called only to fail, keeping the text off the per-call
    cost). Sizes with a 0 count without it: torch cannot lay those out either. Mirror of alloc.h's."""
    if not _bytes_fit(sizes, dtype):
        fail(op, ": expected an output of at most 2^63 - 1 bytes, got ", list(sizes), " of ", dtype,
             " from ", source(),
             " (its sizes but the 0 multiply past that, which torch cannot lay out)" if 0 in sizes else "")


def byte_count(sizes, dtype: torch.dtype) -> str:
    """The byte count the allocation-failure messages print (alloc.h's byte_count)."""
    return str(math.prod(sizes) * dtype.itemsize) if _bytes_fit(sizes, dtype) else "more than 2^63 - 1"


def shape_source(arg: str, t: torch.Tensor):
    """source() for an output shaped by input `arg`: "<arg> of shape [...]" (alloc.h's twin)."""
    return lambda: f"{arg} of shape {list(t.shape)}"


def allocation_failed(op: str, what: str, sizes, dtype: torch.dtype, source) -> None:
    """Raises for an allocation that failed as the C++ binding does (alloc.h's allocating): what
    could not be allocated and its size, the same text on both backends."""
    from_ = source()
    fail(op, ": could not allocate ", what, ", ", list(sizes), " of ", dtype, " (",
         byte_count(sizes, dtype), " bytes)", " from " if from_ else "", from_)


def new_output(op: str, like, sizes, dtype: torch.dtype, source) -> torch.Tensor:
    """The op's output on `like`'s device (torch.empty's default without one); source() names the
    arguments its shape comes from."""
    # Sizes go in as separate ints: a torch.Size or list argument costs ~1 us more to parse, half
    # of a small op's Numba wrapper (() as the one argument of a 0-dim output).
    dims = tuple(sizes) or ((),)
    try:
        return torch.empty(*dims, dtype=dtype) if like is None else like.new_empty(*dims, dtype=dtype)
    except RuntimeError:
        pass
    allocation_failed(op, "the output", sizes, dtype, source)


def contiguous_input(op: str, arg: str, t: torch.Tensor) -> torch.Tensor:
    """A contiguous copy of input `arg` (t itself when already contiguous)."""
    if t.is_contiguous():
        return t
    try:
        return t.contiguous()
    except RuntimeError:
        pass
    allocation_failed(op, "a contiguous copy of " + arg, t.shape, t.dtype, str)


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


# Shared by the mask ops (ops/_random_mask.py, ops/_dilate.py, ops/_mask_fill.py).

def fmt_float(x: float) -> str:
    """A float as C++'s default ostream prints it (%g), so both backends' messages match."""
    return format(float(x), "g")


def parse_structure(op: str, structure: str) -> bool:
    """True for "square" (8-neighbour), False for "cross" (4-neighbour)."""
    if structure not in ("cross", "square"):
        fail(op, ": expected structure to be 'cross' or 'square', got ", quoted(structure))
    return structure == "square"


def check_iterations(op: str, iterations: int) -> None:
    if iterations < 0:
        fail(op, ": expected iterations >= 0, got iterations=", iterations)


def until_unchanged(iterations: int, h: int, width: int) -> int:
    """The dilation count run for `iterations` on h x width images (checks.h's): 0 means "until
    nothing changes", as scipy.ndimage.binary_dilation's iterations < 1, which h + width steps
    always reach (every pixel is within h + width - 2 steps of every other)."""
    return iterations if iterations != 0 else min(h + width, INT64_MAX)


# The largest finite value of each float image dtype: a larger finite fill value would become inf.
FLOAT_MAX = {torch.float16: 65504.0, torch.bfloat16: 3.3895313892515355e38,
             torch.float32: 3.4028234663852886e38}


def rounds_to_inf(value: float, dtype: torch.dtype) -> bool:
    """Whether finite `value`, rounded to float32 and then to float `dtype` (to nearest even, as the
    kernels and torch's conversions round), is inf. Plain numbers, no tensors: a check on a tensor
    made inside a fake kernel is data-dependent to FakeTensorMode (torch 2.10 refuses to guard on it)."""
    with np.errstate(over="ignore"):
        f32 = np.float32(value)
        if np.isinf(f32) or (dtype == torch.float16 and np.isinf(np.float16(f32))):
            return True
    if dtype == torch.bfloat16:  # float32 -> bfloat16 keeps the top 16 bits, rounded to nearest even
        bits = int(f32.view(np.uint32)) & 0x7FFFFFFF
        return bits + 0x7FFF + ((bits >> 16) & 1) >= 0x7F800000
    return False


# Memory overlap of what an op writes in place (overlap.h's twins), as torch checks its in-place
# and out= ops: a write must never depend on the order elements are visited.

def has_internal_overlap(t: torch.Tensor) -> bool:
    """Whether two elements of t share memory: by increasing stride, each dim of size > 1 must step
    past the extent of the dims before it (stride 0, an expand(), never does)."""
    if t.numel() == 0:
        return False
    extent = 1
    for stride, size in sorted((st, s) for s, st in zip(t.shape, t.stride()) if s > 1):
        if stride < extent:
            return True
        extent += (size - 1) * stride
    return False


def check_no_internal_overlap(op: str, arg: str, t: torch.Tensor) -> None:
    if has_internal_overlap(t):
        fail(op, ": ", arg, " has elements that share memory (sizes ", list(t.shape), ", strides ",
             list(t.stride()), ", e.g. from expand()), so writing it in place would depend on the order of "
             "the writes; pass ", arg, ".clone()")


def _span(t: torch.Tensor):
    """(memory key, first byte, end byte) of t's elements: addresses for real tensors; the storage
    and offsets in it for fake ones (torch.compile's tracing), which have no addresses."""
    last = sum((s - 1) * st for s, st in zip(t.shape, t.stride()))
    es = t.element_size()
    if type(t) is torch.Tensor and t.device.type != "meta":  # a plain tensor (fakes are subclasses): ~1 us less
        begin = t.data_ptr()
        return None, begin, begin + (last + 1) * es
    if is_fake(t) or t.device.type == "meta":  # views of one fake / meta storage share it
        begin, key = t.storage_offset() * es, t.untyped_storage()._cdata
    else:
        begin, key = t.data_ptr(), None
    return key, begin, begin + (last + 1) * es


def memory_overlaps(t: torch.Tensor, u: torch.Tensor) -> bool:
    if t.numel() == 0 or u.numel() == 0:
        return False
    (kt, tb, te), (ku, ub, ue) = _span(t), _span(u)
    return kt == ku and tb < ue and ub < te


def check_no_overlap(op: str, written: str, w: torch.Tensor, read: str, r: torch.Tensor) -> None:
    if memory_overlaps(w, r):
        fail(op, ": ", read, " overlaps ", written, " in memory, so writing ", written, " would change ", read,
             " while it is read; pass ", read, ".clone()")


def check_outputs_apart(op: str, a: str, ta: torch.Tensor, b: str, tb: torch.Tensor) -> None:
    if memory_overlaps(ta, tb):
        fail(op, ": ", a, " and ", b, " overlap in memory; pass separate buffers")
