"""Numba mirror of csrc/kernels/random_mask.cpp (the generator), the random_dilated_mask kernel of
csrc/kernels/dilate.cpp and csrc/ops/random_mask.cpp (bindings).
Read csrc/kernels/random_mask.h for the counter and precision definitions both follow."""

from __future__ import annotations

import numpy as np
import torch

import fastprep.ops._checks as checks
from fastprep.numba_kernels._cache import njit
from fastprep.numba_kernels._counter_rng import random_word
from fastprep.numba_kernels._dilate import capped_iterations, emit_rows, run_iterations
from fastprep.numba_kernels._mask_words import last_word_mask, words_per_row, words_to_bools, words_to_packed
from fastprep.numba_kernels._storage import array_at
from fastprep.ops._random_mask import check_dilated_args, check_mask_args

MASK_DIGITS = 16
_ALL = np.uint64(0xFFFFFFFFFFFFFFFF)


@njit(cache=True, inline="always")
def mask_threshold(p):
    return np.uint32(p * 65536.0 + 0.5)


# Rows are addressed by (array, offset) rather than slices: a slice per row costs more than the
# row's work here, and offsets keep every array C-contiguous so LLVM vectorises the loops.
@njit(cache=True)
def random_words(seed, q, first, count, words, wo):
    """Mask words [first, first + count) of the flattened word grid (mask_rows.h's random_words):
    a block of rows is one run of counters, so these loops run across rows."""
    w_ = words[wo:wo + count]  # a local slice: offset indexing would stop the vectorisation
    if q == 0 or q >= (1 << MASK_DIGITS):
        w_[:] = np.uint64(0) if q == 0 else _ALL
        return
    lowest = 0
    while not (q >> lowest) & 1:
        lowest += 1
    base = np.uint64(first) * np.uint64(MASK_DIGITS)
    step = np.uint64(MASK_DIGITS)
    for j in range(count):
        w_[j] = random_word(seed, base + np.uint64(j) * step)
    t = 1
    for k in range(lowest + 1, MASK_DIGITS):
        c = base + np.uint64(t)
        if (q >> k) & 1:
            for j in range(count):
                w_[j] |= random_word(seed, c + np.uint64(j) * step)
        else:
            for j in range(count):
                w_[j] &= random_word(seed, c + np.uint64(j) * step)
        t += 1


@njit(cache=True)
def random_rows(seed, q, row0, rows, wpr, width, words, wo):
    """The mask words of `rows` rows from global row `row0`, padding bits zero."""
    random_words(seed, q, np.uint64(row0) * np.uint64(wpr), rows * wpr, words, wo)
    last = last_word_mask(width)
    if wpr > 0 and last != _ALL:
        for r in range(rows):
            words[wo + r * wpr + wpr - 1] &= last


@njit(cache=True)
def random_mask_kernel(seed, p, rows, width, packed, out):
    q = mask_threshold(p)
    wpr = words_per_row(width)
    if wpr == 0:
        return
    row_bytes = (width + 7) // 8 if packed else width
    block = max(1, 1024 // wpr)  # rows per block, as random_mask.cpp
    words = np.empty(block * wpr, dtype=np.uint64)
    for r0 in range(0, rows, block):
        n = min(block, rows - r0)
        random_rows(np.uint64(seed), q, r0, n, wpr, width, words, 0)
        for r in range(n):
            if packed:
                words_to_packed(words, r * wpr, width, out, (r0 + r) * row_bytes)
            else:
                words_to_bools(words, r * wpr, width, out, (r0 + r) * row_bytes)


@njit(cache=True)
def random_dilated_mask_kernel(seed, p, images, h, width, square, iterations, packed, out):
    iterations = capped_iterations(iterations, h, width)
    q = mask_threshold(p)
    wpr = words_per_row(width)
    row_bytes = (width + 7) // 8 if packed else width
    useed = np.uint64(seed)
    # dilate(random_mask(...)), as kernels/dilate.cpp's random_dilated_mask. A whole image of words,
    # then dilation: the C++ kernel streams blocks of rows through L1, which measured slower here
    # (per-row calls and slices), and both give the same bits.
    a = np.empty(h * wpr, dtype=np.uint64)
    b = np.empty(h * wpr, dtype=np.uint64)
    for i in range(images):
        random_rows(useed, q, i * h, h, wpr, width, a, 0)
        emit_rows(run_iterations(a, b, h, width, square, iterations), h, width, packed, out, i * h * row_bytes)


@njit(cache=True)
def random_mask_at(seed, p, rows, width, packed, dst, nbytes):
    random_mask_kernel(seed, p, rows, width, packed, array_at(dst, nbytes, np.uint8))


@njit(cache=True)
def random_dilated_mask_at(seed, p, images, h, width, square, iterations, packed, dst, nbytes):
    random_dilated_mask_kernel(seed, p, images, h, width, square, iterations, packed, array_at(dst, nbytes, np.uint8))


def _leading_rows(shape, keep: int) -> int:
    rows = 1
    for s in shape[:len(shape) - keep]:
        rows *= s
    return rows


def random_mask(shape, p: float, seed: int, packed: bool = False) -> torch.Tensor:
    shape = list(shape)
    sizes = check_mask_args("random_mask", shape, p, packed)
    out = checks.new_output("random_mask", None, sizes, torch.uint8 if packed else torch.bool,
                             lambda: f"shape={shape}")
    if out.numel() > 0:
        random_mask_at(int(seed), float(p), _leading_rows(shape, 1), shape[-1], packed,
                       out.data_ptr(), out.nbytes)
    return out


def random_dilated_mask(shape, p: float, seed: int, structure: str = "cross", iterations: int = 1,
                        packed: bool = False) -> torch.Tensor:
    shape = list(shape)
    sizes, square = check_dilated_args(shape, p, structure, iterations, packed)
    out = checks.new_output("random_dilated_mask", None, sizes, torch.uint8 if packed else torch.bool,
                             lambda: f"shape={shape}")
    if out.numel() > 0:
        random_dilated_mask_at(int(seed), float(p), _leading_rows(shape, 2), shape[-2], shape[-1],
                               square, checks.until_unchanged(iterations, shape[-2], shape[-1]), packed,
                               out.data_ptr(), out.nbytes)
    return out
