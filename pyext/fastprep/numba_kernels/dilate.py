"""Numba mirror of csrc/kernels/dilate.cpp (kernels) and csrc/ops/dilate.cpp (binding)."""

from __future__ import annotations

import numpy as np
import torch

from fastprep.numba_kernels._cache import njit
from fastprep.numba_kernels.mask_words import (
    bools_to_words,
    last_word_mask,
    packed_to_words,
    words_per_row,
    words_to_bools,
    words_to_packed,
)
from fastprep.ops import checks
from fastprep.ops.dilate import check_dilate, check_dilate_packed

_ONE = np.uint64(1)
_S63 = np.uint64(63)


@njit(cache=True, inline="always")
def spread_h(prev, cur, nxt):
    return cur | (cur << _ONE) | (prev >> _S63) | (cur >> _ONE) | (nxt << _S63)


@njit(cache=True)
def dilate_words(src, dst, h, width, square):
    # The C++ kernel's dilate_row inlined on flat indices: in Numba a call and row slices per row
    # cost ~3x, which is also why random_dilated_mask_kernel below has no rolling window.
    wpr = words_per_row(width)
    if wpr == 0:
        return
    last = last_word_mask(width)
    zero = np.uint64(0)
    vert = np.empty(wpr, dtype=np.uint64)  # up | dn rows (cross), up | cur | dn (square)
    for r in range(h):
        base = r * wpr
        if r > 0 and r + 1 < h:
            for j in range(wpr):
                vert[j] = src[base - wpr + j] | src[base + wpr + j]
        elif r > 0:
            for j in range(wpr):
                vert[j] = src[base - wpr + j]
        elif r + 1 < h:
            for j in range(wpr):
                vert[j] = src[base + wpr + j]
        else:
            vert[:] = 0
        if square:
            # The 3x3 square is the horizontal spread of the vertical OR.
            for j in range(wpr):
                vert[j] |= src[base + j]
            cur, co = vert, 0
        else:
            cur, co = src, base
        if wpr == 1:
            dst[base] = spread_h(zero, cur[co], zero) | vert[0]
        else:
            dst[base] = spread_h(zero, cur[co], cur[co + 1]) | vert[0]
            for j in range(1, wpr - 1):
                dst[base + j] = spread_h(cur[co + j - 1], cur[co + j], cur[co + j + 1]) | vert[j]
            dst[base + wpr - 1] = spread_h(cur[co + wpr - 2], cur[co + wpr - 1], zero) | vert[wpr - 1]
        dst[base + wpr - 1] &= last


@njit(cache=True, inline="always")
def capped_iterations(iterations, h, width):
    # As dilate.cpp: the fixed point is reached within h + width - 2 steps.
    return h + width if iterations - width > h else iterations


@njit(cache=True)
def run_iterations(a, b, h, width, square, iterations):
    """`iterations` dilations of a, alternating between a and b; returns the one holding the result."""
    for _ in range(iterations):
        dilate_words(a, b, h, width, square)
        a, b = b, a
    return a


@njit(cache=True)
def emit_rows(words, rows, width, packed, out, oo):
    wpr = words_per_row(width)
    row_bytes = (width + 7) // 8 if packed else width
    for r in range(rows):
        if packed:
            words_to_packed(words, r * wpr, width, out, oo + r * row_bytes)
        else:
            words_to_bools(words, r * wpr, width, out, oo + r * row_bytes)


@njit(cache=True)
def dilate_kernel(inp, out, images, h, width, square, iterations, packed):
    iterations = capped_iterations(iterations, h, width)
    wpr = words_per_row(width)
    row_bytes = (width + 7) // 8 if packed else width
    plane = h * wpr
    a = np.empty(plane, dtype=np.uint64)
    b = np.empty(plane, dtype=np.uint64)
    if packed and width % 64 == 0:
        # Packed rows of whole words are word images already: whole-array copies in and out
        # (the C++ kernel reads and writes them in place when 8-byte aligned).
        inp64 = inp.view(np.uint64)
        out64 = out.view(np.uint64)
        for i in range(images):
            a[:] = inp64[i * plane:(i + 1) * plane]
            out64[i * plane:(i + 1) * plane] = run_iterations(a, b, h, width, square, iterations)
        return
    for i in range(images):
        so = i * h * row_bytes
        for r in range(h):
            if packed:
                packed_to_words(inp, so + r * row_bytes, width, a, r * wpr)
            else:
                bools_to_words(inp, so + r * row_bytes, width, a, r * wpr)
        emit_rows(run_iterations(a, b, h, width, square, iterations), h, width, packed, out, i * h * row_bytes)


def _run(op: str, arg: str, x: torch.Tensor, width: int, square: bool, iterations: int,
         packed: bool) -> torch.Tensor:
    xc = checks.contiguous_input(op, arg, x)
    out = checks.new_output(op, xc, xc.shape, xc.dtype, checks.shape_source(arg, x))
    if out.numel() > 0:
        h = xc.shape[-2]
        images = xc.numel() // (h * xc.shape[-1])
        dilate_kernel(xc.view(torch.uint8).numpy().reshape(-1), out.view(torch.uint8).numpy().reshape(-1),
                      images, h, width, square, checks.until_unchanged(iterations, h, width), packed)
    return out


def dilate(mask: torch.Tensor, structure: str = "cross", iterations: int = 1) -> torch.Tensor:
    square = check_dilate(mask, structure, iterations)
    return _run("dilate", "mask", mask, mask.shape[-1], square, iterations, False)


def dilate_packed(packed: torch.Tensor, width: int, structure: str = "cross",
                  iterations: int = 1) -> torch.Tensor:
    square = check_dilate_packed(packed, width, structure, iterations)
    return _run("dilate_packed", "packed", packed, width, square, iterations, True)
