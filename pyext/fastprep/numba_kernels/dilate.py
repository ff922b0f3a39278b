"""Numba mirror of csrc/kernels/dilate.cpp (kernels) and csrc/ops/dilate.cpp (binding)."""

from __future__ import annotations

import numpy as np
import torch
from numba import njit

from fastprep.numba_kernels.random_mask import (bools_to_words, last_word_mask, mask_threshold,
                                                packed_to_words, random_mask_row, words_per_row,
                                                words_to_bools, words_to_packed)
from fastprep.ops.dilate import check_dilate, check_dilate_packed

_ONE = np.uint64(1)
_S63 = np.uint64(63)


@njit(cache=True, inline="always")
def spread_h(prev, cur, nxt):
    return cur | (cur << _ONE) | (prev >> _S63) | (cur >> _ONE) | (nxt << _S63)


@njit(cache=True)
def dilate_words(src, dst, h, width, square):
    wpr = words_per_row(width)
    if wpr == 0:
        return
    last = last_word_mask(width)
    zero = np.uint64(0)
    zeros = np.zeros(wpr, dtype=np.uint64)
    vert = np.empty(wpr, dtype=np.uint64)
    for r in range(h):
        cur = src[r * wpr:(r + 1) * wpr]
        up = src[(r - 1) * wpr:r * wpr] if r > 0 else zeros
        dn = src[(r + 1) * wpr:(r + 2) * wpr] if r + 1 < h else zeros
        o = dst[r * wpr:(r + 1) * wpr]
        if square:
            for j in range(wpr):
                vert[j] = up[j] | cur[j] | dn[j]
            cur = vert
        if wpr == 1:
            o[0] = spread_h(zero, cur[0], zero) | up[0] | dn[0]
        else:
            o[0] = spread_h(zero, cur[0], cur[1]) | up[0] | dn[0]
            for j in range(1, wpr - 1):
                o[j] = spread_h(cur[j - 1], cur[j], cur[j + 1]) | up[j] | dn[j]
            o[wpr - 1] = spread_h(cur[wpr - 2], cur[wpr - 1], zero) | up[wpr - 1] | dn[wpr - 1]
        o[wpr - 1] &= last


@njit(cache=True)
def run_iterations(a, b, h, width, square, iterations):
    """`iterations` dilations of a, alternating between a and b; returns the one holding the result."""
    for _ in range(iterations):
        dilate_words(a, b, h, width, square)
        a, b = b, a
    return a


@njit(cache=True)
def emit_rows(words, rows, width, packed, out):
    wpr = words_per_row(width)
    row_bytes = (width + 7) // 8 if packed else width
    for r in range(rows):
        if packed:
            words_to_packed(words[r * wpr:], width, out[r * row_bytes:])
        else:
            words_to_bools(words[r * wpr:], width, out[r * row_bytes:])


@njit(cache=True)
def dilate_kernel(inp, out, images, h, width, square, iterations, packed):
    # Unlike the C++ kernel, packed rows are always copied into words (no aligned direct path).
    wpr = words_per_row(width)
    row_bytes = (width + 7) // 8 if packed else width
    a = np.empty(h * wpr, dtype=np.uint64)
    b = np.empty(h * wpr, dtype=np.uint64)
    for i in range(images):
        src = inp[i * h * row_bytes:]
        for r in range(h):
            if packed:
                packed_to_words(src[r * row_bytes:], width, a[r * wpr:])
            else:
                bools_to_words(src[r * row_bytes:], width, a[r * wpr:])
        emit_rows(run_iterations(a, b, h, width, square, iterations), h, width, packed, out[i * h * row_bytes:])


@njit(cache=True)
def random_dilated_mask_kernel(seed, p, images, h, width, square, iterations, packed, out):
    q = mask_threshold(p)
    wpr = words_per_row(width)
    row_bytes = (width + 7) // 8 if packed else width
    a = np.empty(h * wpr, dtype=np.uint64)
    b = np.empty(h * wpr, dtype=np.uint64)
    for i in range(images):
        for r in range(h):
            random_mask_row(np.uint64(seed), q, i * h + r, wpr, width, a[r * wpr:])
        emit_rows(run_iterations(a, b, h, width, square, iterations), h, width, packed, out[i * h * row_bytes:])


def _run(x: torch.Tensor, width: int, square: bool, iterations: int, packed: bool) -> torch.Tensor:
    xc = x.contiguous()
    out = torch.empty_like(xc)
    if out.numel() > 0:
        h = xc.shape[-2]
        images = xc.numel() // (h * xc.shape[-1])
        dilate_kernel(xc.view(torch.uint8).numpy().reshape(-1), out.view(torch.uint8).numpy().reshape(-1),
                      images, h, width, square, iterations, packed)
    return out


def dilate(mask: torch.Tensor, structure: str = "cross", iterations: int = 1) -> torch.Tensor:
    square = check_dilate(mask, structure, iterations)
    return _run(mask, mask.shape[-1], square, iterations, False)


def dilate_packed(packed: torch.Tensor, width: int, structure: str = "cross",
                  iterations: int = 1) -> torch.Tensor:
    square = check_dilate_packed(packed, width, structure, iterations)
    return _run(packed, width, square, iterations, True)
