"""Numba mirror of csrc/kernels/mask_fill.cpp (kernel) and csrc/ops/mask_fill.cpp (binding).

The image is seen as a strided [N, C, H, W] array of same-size integers (the value's raw bits),
as the C++ kernel does; Numba follows the strides itself.
"""

from __future__ import annotations

import numpy as np
import torch
from numpy.lib.stride_tricks import as_strided

import fastprep.ops._checks as checks
from fastprep.numba_kernels._cache import njit
from fastprep.numba_kernels._mask_words import load_word
from fastprep.numba_kernels._storage import UINT_OF_SIZE, array_at, span_count
from fastprep.numba_kernels._vector_bits import word_to_bools64
from fastprep.ops._mask_fill import check_mask_fill

# The integer dtype each image dtype's bits are moved as.
_BITS_DTYPE = {torch.uint8: torch.uint8, torch.float16: torch.int16, torch.bfloat16: torch.int16,
               torch.float32: torch.int32}


@njit(cache=True, inline="always")
def row_bits(mask, off, w, packed, bits):
    """Row `off` of the mask as a byte per pixel, nonzero = masked: a bool mask's own row, or a
    packed row spread into `bits` a word at a time (vector_bits). Row slices keep every index
    provably non-negative, so Numba adds no wraparound test per pixel (that cost 5x)."""
    if not packed:
        return mask[off:off + w]
    row = mask[off:off + (w + 7) // 8]
    full = w // 64
    for j in range(full):
        word_to_bools64(load_word(row, 8 * j), bits, 64 * j)
    for x in range(64 * full, w):
        bits[x] = (row[x >> 3] >> (x & 7)) & 1
    return bits


@njit(cache=True)
def mask_fill_kernel(src, dst, in_place, mask, mask_n, packed, value):
    n_img, c_n, h, w = dst.shape
    row_bytes = (w + 7) // 8 if packed else w
    bits = np.empty(w, dtype=np.uint8)
    pixel_major = dst.strides[1] < dst.strides[3]
    for n in range(n_img):
        mimg = (0 if mask_n == 1 else n) * h * row_bytes
        for y in range(h):
            m = row_bits(mask, mimg + y * row_bytes, w, packed, bits)
            if in_place and pixel_major:
                for x in range(w):
                    if m[x]:
                        for c in range(c_n):
                            dst[n, c, y, x] = value
            elif pixel_major:
                for x in range(w):
                    for c in range(c_n):
                        dst[n, c, y, x] = value if m[x] else src[n, c, y, x]
            else:
                for c in range(c_n):
                    # Row views: on C-contiguous images these are unit-stride and vectorise.
                    sp = src[n, c, y]
                    dp = dst[n, c, y]
                    for x in range(w):
                        dp[x] = value if m[x] else sp[x]


@njit(cache=True)
def fill_dense_pixels(src, s_img, s_row, dst, d_img, d_row, n_img, c_n, h, w, mask, mask_n, packed, value):
    """mask_fill_kernel out of place on dense pixel-major rows (packed HWC: channels at stride 1,
    pixels at stride C), as the C++ kernel's dense_pixels: a row is one run of w * C elements,
    selected by its mask bytes repeated C times (per element through the [N, C, H, W] view it took
    18x the time). s_img, s_row, d_img, d_row: image and row strides in elements."""
    row_bytes = (w + 7) // 8 if packed else w
    bits = np.empty(w, dtype=np.uint8)
    run = np.empty(w * c_n, dtype=np.uint8)
    for n in range(n_img):
        mimg = (0 if mask_n == 1 else n) * h * row_bytes
        for y in range(h):
            m = row_bits(mask, mimg + y * row_bytes, w, packed, bits)
            if c_n == 3:  # the usual RGB: a literal count, so the repeat vectorises
                for x in range(w):
                    run[3 * x] = run[3 * x + 1] = run[3 * x + 2] = m[x]
            else:
                for x in range(w):
                    for c in range(c_n):
                        run[x * c_n + c] = m[x]
            s0, d0 = n * s_img + y * s_row, n * d_img + y * d_row
            sr, dr = src[s0:s0 + w * c_n], dst[d0:d0 + w * c_n]
            for e in range(w * c_n):
                dr[e] = value if run[e] else sr[e]


_VALUE_BITS: dict = {}


def _value_bits(value: float, dtype: torch.dtype):
    """torch's own conversion of `value` to `dtype` (as the C++ binding's torch::stable::full), as
    a typed scalar of its bits. Kept per (dtype, value) as the C++ binding keeps its last one: the
    conversion through a tensor costs 4 us a call. The key holds repr(value), so 0.0 and -0.0
    (equal, and hashed alike) stay apart."""
    key = (dtype, type(value), repr(value))
    bits = _VALUE_BITS.get(key)
    if bits is None:
        if len(_VALUE_BITS) >= 256:
            _VALUE_BITS.clear()
        bits = _VALUE_BITS[key] = torch.tensor([value], dtype=dtype).view(_BITS_DTYPE[dtype]).numpy()[0]
    return bits


@njit(cache=True)
def mask_fill_at(src, src_n, dst, dtype, shape, src_strides, dst_strides, c_order, in_place, mask, mask_bytes,
                 mask_n, packed, value):
    """mask_fill_kernel on tensors' addresses (_storage.py): src spans src_n elements of `dtype`
    (the same-size integer) from img's first, dst is img itself (in_place) or the contiguous
    output; shape and the byte strides view each as [N, C, H, W]."""
    m = array_at(mask, mask_bytes, np.uint8)
    s = array_at(src, src_n, dtype)
    d = s if in_place else array_at(dst, shape[0] * shape[1] * shape[2] * shape[3], dtype)
    size, c = s.itemsize, shape[1]
    # Both views dense pixel-major (channels at stride 1, pixels at stride C), as the C++ kernel's
    # dense_pixels decides.
    if not in_place and src_strides[1] == dst_strides[1] == size and src_strides[3] == dst_strides[3] == c * size:
        fill_dense_pixels(s, src_strides[0] // size, src_strides[2] // size, d, dst_strides[0] // size,
                          dst_strides[2] // size, shape[0], c, shape[2], shape[3], m, mask_n, packed, value)
    elif c_order:  # contiguous CHW: C-ordered views, whose rows LLVM knows to be unit-stride
        mask_fill_kernel(s.reshape(shape), d.reshape(shape), in_place, m, mask_n, packed, value)
    else:
        mask_fill_kernel(as_strided(s, shape, src_strides), as_strided(d, shape, dst_strides), in_place, m, mask_n,
                         packed, value)


def _run(img: torch.Tensor, mask: torch.Tensor, value: float, layout: str, op: str):
    """Checks, then allocates (the output of mask_fill; img itself for mask_fill_) and fills, in
    the C++ binding's order: nothing is allocated before the checks pass."""
    args = check_mask_fill(op, img, mask, value, layout)
    mc = checks.contiguous_input(op, "mask", mask)
    # The out-of-place output is contiguous and filled in one pass from img.
    dst = img if op == "mask_fill_" else checks.new_output(op, img, img.shape, img.dtype,
                                                            checks.shape_source("img", img))
    if img.numel() > 0:
        v, size = args.view, img.element_size()
        hw = v.h * v.w
        img_strides = (v.sn * size, v.sc * size, v.sh * size, v.sw * size)
        # The contiguous output's byte strides in [N, C, H, W] order (img's own in place).
        out_strides = img_strides if img is dst else tuple(
            s * size for s in ((v.c * hw, hw, v.w, 1) if layout == "CHW" else (v.c * hw, 1, v.w * v.c, v.c)))
        mask_fill_at(img.data_ptr(), span_count(img), dst.data_ptr(), UINT_OF_SIZE[size], (v.n, v.c, v.h, v.w),
                     img_strides, out_strides, layout == "CHW" and img.is_contiguous(), img is dst, mc.data_ptr(),
                     mc.numel(), args.mask_n, args.packed, _value_bits(value, img.dtype))
    return dst


def mask_fill(img: torch.Tensor, mask: torch.Tensor, value: float = 0,
              layout: str = "CHW") -> torch.Tensor:
    return _run(img, mask, value, layout, "mask_fill")


def mask_fill_(img: torch.Tensor, mask: torch.Tensor, value: float = 0,
               layout: str = "CHW") -> None:
    _run(img, mask, value, layout, "mask_fill_")
