"""Numba mirror of csrc/kernels/crop.cpp (kernel) and csrc/ops/crop.cpp (binding).

The source is a flat array over the image's storage span (no copy), indexed with element
strides, as the C++ kernel indexes its raw pointer.
"""

from __future__ import annotations

import numpy as np
import torch

import fastprep.ops._checks as checks
from fastprep.numba_kernels._cache import njit
from fastprep.numba_kernels._float_bits import float_to_bf16_bits, float_to_half_bits
from fastprep.numba_kernels._storage import UINDEX, UINT_OF_SIZE, array_at, pixel_row, span_count
from fastprep.ops._crop import check_crop, check_random_crop, crop_window, out_shape, sample_seed, window_source


@njit(cache=True, inline="always")
def fill_range(out, start, n, fill):
    for i in range(n):
        out[start + i] = fill


@njit(cache=True, inline="always")
def copy_planes(s, out, o, plane, c, sc, step, n, flip):
    """n pixels of every channel from s (pixel x at x * step + ch * sc, from the row's end when
    flip) into the output planes at o. Slices walked with range() indices, or unsigned ones
    counting down, which Numba knows are non-negative (no wraparound test per element): that is
    what lets the copies vectorise (slice assignment, negative strides or a signed index counting
    down cost 8-50x)."""
    if c == 3 and sc == 1 and step == 3:  # packed RGB, literal strides
        o0, o1, o2 = out[o:o + n], out[o + plane:o + plane + n], out[o + 2 * plane:o + 2 * plane + n]
        if flip:
            for x in range(n):
                q = UINDEX(3 * (n - 1 - x))
                o0[x], o1[x], o2[x] = s[q], s[q + UINDEX(1)], s[q + UINDEX(2)]
        else:
            for x in range(n):
                o0[x], o1[x], o2[x] = s[3 * x], s[3 * x + 1], s[3 * x + 2]
    elif step == 1:  # planar rows
        for ch in range(c):
            sp, op = s[ch * sc:ch * sc + n], out[o + ch * plane:o + ch * plane + n]
            if flip:
                for x in range(n):
                    op[x] = sp[UINDEX(n - 1 - x)]
            else:
                for x in range(n):
                    op[x] = sp[x]
    else:
        for ch in range(c):
            op = out[o + ch * plane:o + ch * plane + n]
            for x in range(n):
                op[x] = s[UINDEX((n - 1 - x if flip else x) * step + ch * sc)]


@njit(cache=True)
def crop_rows(src, base, out, obase, c, sc, sh, sw, h, top, left, height, width, x0, x1, fill):
    plane = height * width
    n = x1 - x0
    for y in range(height):
        sy = top + y
        orow = obase + y * width
        if sy < 0 or sy >= h or n <= 0:
            for ch in range(c):
                fill_range(out, orow + ch * plane, width, fill)
            continue
        for ch in range(c):
            fill_range(out, orow + ch * plane, x0, fill)
            fill_range(out, orow + ch * plane + x1, width - x1, fill)
        srow = base + sy * sh + (left + x0) * sw
        s, step = pixel_row(src, srow, sw, sc, c, n)
        copy_planes(s, out, orow + x0, plane, c, sc, step, n, sw < 0)


@njit(cache=True)
def crop_kernel(src, base, out, obase, c, h, w, sc, sh, sw, top, left, height, width, fill):
    x0 = min(max(-left, 0), width)
    x1 = min(max(w - left, x0), width)
    crop_rows(src, base, out, obase, c, sc, sh, sw, h, top, left, height, width, x0, x1, fill)


@njit(cache=True)
def crop_at(src, src_n, dst, dst_n, dtype, base, obase, c, h, w, sc, sh, sw, top, left, height, width, fill):
    """crop_kernel on tensors' addresses (_storage.py): src spans src_n elements of `dtype` (the
    same-size integer) from the image's first element, dst is the contiguous output."""
    crop_kernel(array_at(src, src_n, dtype), base, array_at(dst, dst_n, dtype), obase, c, h, w, sc, sh, sw, top,
                left, height, width, fill)


def fill_bits(dtype: torch.dtype, fill: float) -> int:
    if dtype == torch.uint8:
        return int(fill)
    f = np.float32(fill)
    if dtype == torch.float16:
        return int(float_to_half_bits(f))
    if dtype == torch.bfloat16:
        return int(float_to_bf16_bits(f))
    return int(f.view(np.uint32))


def _signed(bits: int, size: int) -> int:
    # The flat views are signed (torch has no uint16/uint32 numpy views); same bits.
    return bits - (1 << 8 * size) if size > 1 and bits >= 1 << (8 * size - 1) else bits


def flipped(v: checks.ImageView, hflip: bool) -> tuple[int, int]:
    """(offset of column 0, column stride) of the image read left-right flipped when hflip: from
    its last column with the stride negated, as csrc/ops/crop.cpp's run_crop."""
    return ((v.w - 1) * v.sw, -v.sw) if hflip and v.w > 0 else (0, v.sw)


def _run(op, img, v: checks.ImageView, height, width, offsets, fill, hflip=False) -> torch.Tensor:
    out = checks.new_output(op, img, out_shape(v, height, width), img.dtype,
                             lambda: window_source(height, width))
    if out.numel() == 0:
        return out
    element = UINT_OF_SIZE[out.element_size()]
    fb = element.dtype.type(_signed(fill_bits(img.dtype, fill), img.element_size()))
    src, src_n, dst, dst_n = img.data_ptr(), span_count(img), out.data_ptr(), out.numel()
    first, sw = flipped(v, hflip)
    for i in range(v.n):
        top, left = offsets(i)
        crop_at(src, src_n, dst, dst_n, element, i * v.sn + first, i * v.c * height * width, v.c, v.h, v.w, v.sc,
                v.sh, sw, top, left, height, width, fb)
    return out


def crop(img: torch.Tensor, top: int, left: int, height: int, width: int,
         layout: str = "CHW") -> torch.Tensor:
    v = check_crop(img, top, left, height, width, layout)
    return _run("crop", img, v, height, width, lambda i: (top, left), 0)


def random_crop(img: torch.Tensor, height: int, width: int, seed: int, layout: str = "CHW",
                pad_if_needed: bool = False, fill: float = 0.0, hflip: bool = False) -> torch.Tensor:
    v = check_random_crop(img, height, width, layout, pad_if_needed, fill)

    def offsets(i):
        return crop_window(v.h, v.w, height, width, sample_seed(seed, i, v.batched), pad_if_needed)

    return _run("random_crop", img, v, height, width, offsets, fill, hflip)
