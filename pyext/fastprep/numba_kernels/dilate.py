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
    # The C++ kernel's dilate_row for a whole image in long flat loops over slices (LLVM
    # vectorises them, and slice indices are provably non-negative, so Numba drops its
    # wraparound test); a loop per row costs ~5x at 16 words a row. The flat horizontal spread
    # carries bits across rows at each row's first and last word: the row loop at the end redoes
    # those two words.
    wpr = words_per_row(width)
    n = h * wpr
    if n == 0:
        return
    zero = np.uint64(0)
    last = last_word_mask(width)
    v = src
    if square:  # the 3x3 square is the horizontal spread of the vertical OR
        v = src.copy()
        v_up, v_dn = v[wpr:], v[:n - wpr]
        for k in range(n - wpr):
            v_up[k] |= src[k]  # row r gets row r - 1
        for k in range(n - wpr):
            v_dn[k] |= src[wpr + k]  # row r gets row r + 1
    if wpr == 1:
        for k in range(n):
            dst[k] = spread_h(zero, v[k], zero)
    elif n > 2:
        prev, cur, nxt, o = v[:n - 2], v[1:n - 1], v[2:], dst[1:n - 1]
        for k in range(n - 2):
            o[k] = spread_h(prev[k], cur[k], nxt[k])
    if not square:  # the cross adds the rows above and below
        o_up, o_dn = dst[wpr:], dst[:n - wpr]
        for k in range(n - wpr):
            o_up[k] |= src[k]
        for k in range(n - wpr):
            o_dn[k] |= src[wpr + k]
    for r in range(h):
        i, k = r * wpr, r * wpr + wpr - 1
        if wpr > 1:
            a = spread_h(zero, v[i], v[i + 1])
            b = spread_h(v[k - 1], v[k], zero)
            if not square:
                if r > 0:
                    a |= src[i - wpr]
                    b |= src[k - wpr]
                if r + 1 < h:
                    a |= src[i + wpr]
                    b |= src[k + wpr]
            dst[i] = a
            dst[k] = b
        dst[k] &= last


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
