"""Numba mirror of csrc/kernels/dilate.cpp (kernels) and csrc/ops/dilate.cpp (binding)."""

from __future__ import annotations

import numpy as np
import torch

import fastprep.ops._checks as checks
from fastprep.numba_kernels._cache import njit
from fastprep.numba_kernels._mask_words import (
    bools_to_words,
    last_word_mask,
    packed_to_words,
    words_per_row,
    words_to_bools,
    words_to_packed,
)
from fastprep.numba_kernels._storage import array_at
from fastprep.ops._dilate import check_dilate, check_dilate_packed

_ONE = np.uint64(1)
_S63 = np.uint64(63)


@njit(cache=True, inline="always")
def spread_h(prev, cur, nxt):
    return cur | (cur << _ONE) | (prev >> _S63) | (cur >> _ONE) | (nxt << _S63)


@njit(cache=True, inline="always")
def edge_word(src, h, wpr, r, j, square):
    """Output word j of row r with every neighbour bounds-checked (pixels outside are false)."""
    zero = np.uint64(0)
    i = r * wpr + j
    up, dn, lt, rt = r > 0, r + 1 < h, j > 0, j + 1 < wpr
    c = src[i]
    u = src[i - wpr] if up else zero
    d = src[i + wpr] if dn else zero
    left = src[i - 1] if lt else zero
    right = src[i + 1] if rt else zero
    if not square:
        return spread_h(left, c, right) | u | d
    if lt:  # the square spreads the vertical OR sideways
        left |= (src[i - 1 - wpr] if up else zero) | (src[i - 1 + wpr] if dn else zero)
    if rt:
        right |= (src[i + 1 - wpr] if up else zero) | (src[i + 1 + wpr] if dn else zero)
    return spread_h(left, u | c | d, right)


@njit(cache=True)
def dilate_words(src, dst, h, width, square):
    # The C++ kernel's dilate_row for a whole image: one flat pass over every word with a row
    # above, below, and a word either side in the row (slices at fixed offsets, so every index is
    # provably non-negative: Numba drops its wraparound test and LLVM vectorises), then the
    # words at the image's edges (first and last rows, each row's first and last word) with
    # their neighbours checked.
    wpr = words_per_row(width)
    n = h * wpr
    if n == 0:
        return
    m = n - 2 * wpr - 2  # output words wpr + 1 .. n - wpr - 2
    if h > 2 and wpr > 2 and m > 0:
        up, mid, dn = src[:n - 2 * wpr], src[wpr:n - wpr], src[2 * wpr:]
        o = dst[wpr + 1:n - wpr - 1]
        if square:
            u0, u1, u2, c0, c1, c2, d0, d1, d2 = up, up[1:], up[2:], mid, mid[1:], mid[2:], dn, dn[1:], dn[2:]
            for k in range(m):
                o[k] = spread_h(u0[k] | c0[k] | d0[k], u1[k] | c1[k] | d1[k], u2[k] | c2[k] | d2[k])
        else:
            c0, c1, c2, u1, d1 = mid, mid[1:], mid[2:], up[1:], dn[1:]
            for k in range(m):
                o[k] = spread_h(c0[k], c1[k], c2[k]) | u1[k] | d1[k]
        for r in range(1, h - 1):
            dst[r * wpr] = edge_word(src, h, wpr, r, 0, square)
            dst[r * wpr + wpr - 1] = edge_word(src, h, wpr, r, wpr - 1, square)
        for j in range(wpr):
            dst[j] = edge_word(src, h, wpr, 0, j, square)
            dst[n - wpr + j] = edge_word(src, h, wpr, h - 1, j, square)
    else:  # two rows or fewer, or two words a row or fewer: every word is an edge word
        for r in range(h):
            for j in range(wpr):
                dst[r * wpr + j] = edge_word(src, h, wpr, r, j, square)
    last = last_word_mask(width)
    for r in range(h):
        dst[r * wpr + wpr - 1] &= last


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


# The two row readers are separate functions: with both inlined into one loop (a branch on
# `packed`), LLVM made the bool rows 3 us slower on a 256^2 image.
@njit(cache=True)
def bool_rows_to_words(src, so, rows, width, words):
    wpr = words_per_row(width)
    for r in range(rows):
        bools_to_words(src, so + r * width, width, words, r * wpr)


@njit(cache=True)
def packed_rows_to_words(src, so, rows, width, words):
    wpr, row_bytes = words_per_row(width), (width + 7) // 8
    for r in range(rows):
        packed_to_words(src, so + r * row_bytes, width, words, r * wpr)


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
        if packed:
            packed_rows_to_words(inp, so, h, width, a)
        else:
            bool_rows_to_words(inp, so, h, width, a)
        emit_rows(run_iterations(a, b, h, width, square, iterations), h, width, packed, out, so)


@njit(cache=True)
def dilate_word_image(src, dst, a, b, h, width, square, iterations):
    """`iterations` dilations of the word image src into dst, through a and b between steps."""
    if iterations == 0:
        dst[:] = src
    prev = src
    for k in range(iterations):
        nxt = dst if k == iterations - 1 else (a if k % 2 == 0 else b)
        dilate_words(prev, nxt, h, width, square)
        prev = nxt


@njit(cache=True)
def dilate_at(src, dst, nbytes, images, h, width, square, iterations, packed):
    """dilate_kernel on the nbytes at addresses src and dst (contiguous tensors' data_ptr())."""
    if packed and width % 64 == 0 and src % 8 == 0 and dst % 8 == 0:
        # Packed rows of whole words at word addresses are word images: dilated in place, as
        # the C++ kernel does (dilate_kernel copies them in and out).
        iterations = capped_iterations(iterations, h, width)
        plane = h * words_per_row(width)
        a = np.empty(plane if iterations > 1 else 0, dtype=np.uint64)
        b = np.empty(plane if iterations > 2 else 0, dtype=np.uint64)
        in64, out64 = array_at(src, nbytes // 8, np.uint64), array_at(dst, nbytes // 8, np.uint64)
        for i in range(images):
            dilate_word_image(in64[i * plane:(i + 1) * plane], out64[i * plane:(i + 1) * plane], a, b, h, width,
                              square, iterations)
        return
    dilate_kernel(array_at(src, nbytes, np.uint8), array_at(dst, nbytes, np.uint8), images, h, width, square,
                  iterations, packed)


def _run(op: str, arg: str, x: torch.Tensor, width: int, square: bool, iterations: int,
         packed: bool) -> torch.Tensor:
    xc = checks.contiguous_input(op, arg, x)
    out = checks.new_output(op, xc, xc.shape, xc.dtype, checks.shape_source(arg, x))
    if out.numel() > 0:
        h = xc.shape[-2]
        images = xc.numel() // (h * xc.shape[-1])
        dilate_at(xc.data_ptr(), out.data_ptr(), out.nbytes, images, h, width, square,
                  checks.until_unchanged(iterations, h, width), packed)
    return out


def dilate(mask: torch.Tensor, structure: str = "cross", iterations: int = 1) -> torch.Tensor:
    square = check_dilate(mask, structure, iterations)
    return _run("dilate", "mask", mask, mask.shape[-1], square, iterations, False)


def dilate_packed(packed: torch.Tensor, width: int, structure: str = "cross",
                  iterations: int = 1) -> torch.Tensor:
    square = check_dilate_packed(packed, width, structure, iterations)
    return _run("dilate_packed", "packed", packed, width, square, iterations, True)
