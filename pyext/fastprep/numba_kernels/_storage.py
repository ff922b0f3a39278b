"""Tensor memory as arrays for the Numba kernels, which (as the C++ kernels on raw pointers) index
flat arrays with element strides and move float16 / bfloat16 values as their bits.

The Python side passes each tensor as its address (``data_ptr()``) and element count, and the
kernel's entry point makes the array (:func:`array_at`): Tensor.numpy() and the views around it
cost ~1.3 us a tensor, the largest share of a small op's Numba call, where data_ptr() costs 0.1.
The arrays hold no reference, as the C++ kernels' raw pointers: the caller keeps its tensors alive
through the call, and passes counts that its checks have bounded.
"""

from __future__ import annotations

import numpy as np
import torch
from llvmlite import ir
from numba import carray, types
from numba.core import cgutils
from numba.extending import intrinsic

from fastprep.numba_kernels._cache import njit


# An element type goes into a jit entry as a zero-length array of it, which array_at reads the type
# of: Numba types a dtype-class argument (np.uint8) on its slow path, ~4.3 us a call, where it
# types an array in ~0.05 us.
def _token(dtype) -> np.ndarray:
    return np.empty(0, dtype)


# The same-size integer a kernel moves each element as, where numpy has no such float type.
UINT_OF_SIZE = {size: _token(dtype) for size, dtype in ((1, np.uint8), (2, np.int16), (4, np.int32))}
# The numpy element holding each image dtype's values (float16 and bfloat16 as bits).
FLAT_DTYPE = {torch.uint8: _token(np.uint8), torch.float32: _token(np.float32), torch.float16: _token(np.int16),
              torch.bfloat16: _token(np.int16)}


# An index type Numba knows is non-negative: a signed index gets a wraparound test per element,
# which keeps a loop that counts down (a flipped read) from vectorising.
UINDEX = np.uint64


def span_count(t: torch.Tensor) -> int:
    """The elements from t's first to its last (element i of t is at the sum of index x stride),
    0 for an empty t."""
    if t.is_contiguous():  # the usual case, 0.1 us where the sum below takes 0.9
        return t.numel()
    if t.numel() == 0:
        return 0
    return 1 + sum((s - 1) * st for s, st in zip(t.shape, t.stride()))


@intrinsic
def _pointer(typingctx, address, dtype):
    # dtype: a number class (np.uint8) in jit code, or a token array from the Python side.
    if isinstance(dtype, types.NumberClass):
        element = dtype.instance_type
    elif isinstance(dtype, types.Array):
        element = dtype.dtype
    else:
        return None
    if not isinstance(address, types.Integer):
        return None
    pointer = types.CPointer(element)

    def codegen(context, builder, sig, args):
        return builder.inttoptr(args[0], context.get_value_type(pointer))

    return pointer(address, dtype), codegen


@njit(cache=True, inline="always")
def array_at(address, n, dtype):
    """The n elements of `dtype` (a number class, or a token array of UINT_OF_SIZE / FLAT_DTYPE) at
    `address` as a 1-D C-contiguous array (no copy)."""
    return carray(_pointer(address, dtype), n)


@intrinsic
def prefetch(typingctx, arr, index):
    """A read prefetch of element `index` of a 1-D array (llvm.prefetch, kept in every cache level),
    as the C++ kernels' __builtin_prefetch. A prefetch never faults: an index past either end is
    harmless, so none is checked."""
    if not isinstance(arr, types.Array) or arr.ndim != 1 or not isinstance(index, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        data = context.make_array(sig.args[0])(context, builder, args[0]).data
        address = builder.bitcast(builder.gep(data, [args[1]]), ir.IntType(8).as_pointer())
        i32 = ir.IntType(32)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(
            ir.VoidType(), [ir.IntType(8).as_pointer(), i32, i32, i32]), "llvm.prefetch.p0i8")
        builder.call(fn, [address, i32(0), i32(3), i32(1)])  # read, high locality, data cache
        return context.get_dummy_value()

    return types.none(arr, index), codegen


@njit(cache=True, inline="always")
def pixel_row(src, p, sw, sc, c, n):
    """(s, step): the slice of src holding n pixels from index p, `sw` elements apart (right to
    left from p when sw < 0), with c channels `sc` apart, and |sw|. A slice starts at its lowest
    pixel, so every index into it is non-negative and Numba drops its wraparound test."""
    step = -sw if sw < 0 else sw
    lo = p + (n - 1) * sw if sw < 0 else p
    return src[lo:lo + (n - 1) * step + (c - 1) * sc + 1], step
