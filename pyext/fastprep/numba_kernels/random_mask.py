"""Numba mirror of csrc/kernels/random_mask.cpp (kernels) and csrc/ops/random_mask.cpp (binding).
Read csrc/kernels/random_mask.h for the counter and precision definitions both follow."""

from __future__ import annotations

import numpy as np
import torch
from numba import njit

from fastprep import _checks
from fastprep.numba_kernels.counter_rng import random_word
from fastprep.ops.random_mask import check_dilated_args, check_mask_args

MASK_DIGITS = 16
_ALL = np.uint64(0xFFFFFFFFFFFFFFFF)


@njit(cache=True, inline="always")
def mask_threshold(p):
    return np.uint32(p * 65536.0 + 0.5)


@njit(cache=True, inline="always")
def words_per_row(width):
    return (width + 63) // 64


@njit(cache=True, inline="always")
def last_word_mask(width):
    r = width % 64
    return _ALL if r == 0 else (np.uint64(1) << np.uint64(r)) - np.uint64(1)


# Rows are addressed by (array, offset) rather than slices: a slice per row costs more than the
# row's work here, and offsets keep every array C-contiguous so LLVM vectorises the loops.
@njit(cache=True)
def random_mask_row(seed, q, row, wpr, width, words, wo):
    w_ = words[wo:wo + wpr]  # a local slice: offset indexing would stop the vectorisation
    if q == 0 or q >= (1 << MASK_DIGITS):
        w_[:] = np.uint64(0) if q == 0 else _ALL
    else:
        lowest = 0
        while not (q >> lowest) & 1:
            lowest += 1
        base = np.uint64(row) * np.uint64(wpr) * np.uint64(MASK_DIGITS)
        step = np.uint64(MASK_DIGITS)
        for j in range(wpr):
            w_[j] = random_word(seed, base + np.uint64(j) * step)
        t = 1
        for k in range(lowest + 1, MASK_DIGITS):
            c = base + np.uint64(t)
            if (q >> k) & 1:
                for j in range(wpr):
                    w_[j] |= random_word(seed, c + np.uint64(j) * step)
            else:
                for j in range(wpr):
                    w_[j] &= random_word(seed, c + np.uint64(j) * step)
            t += 1
    if wpr > 0:
        w_[wpr - 1] &= last_word_mask(width)


# Bit-at-a-time loops with a constant trip count of 64 over a local slice: LLVM vectorises these
# (variable shifts); Numba has no mask-register moves. Indexing with an outer offset instead
# stops the vectorisation (8x slower).
@njit(cache=True)
def words_to_bools(words, wo, width, out, oo):
    o = out[oo:oo + width]
    w_ = words[wo:wo + words_per_row(width)]
    full = width // 64
    for j in range(full):
        w = w_[j]
        for b in range(64):
            o[64 * j + b] = np.uint8((w >> np.uint64(b)) & np.uint64(1))
    for x in range(64 * full, width):
        o[x] = np.uint8((w_[x // 64] >> np.uint64(x % 64)) & np.uint64(1))


@njit(cache=True)
def bools_to_words(row, ro, width, words, wo):
    r_ = row[ro:ro + width]
    w_ = words[wo:wo + words_per_row(width)]
    full = width // 64
    for j in range(full):
        acc = np.uint64(0)
        for b in range(64):
            acc |= np.uint64(r_[64 * j + b] != 0) << np.uint64(b)
        w_[j] = acc
    if full < w_.size:
        w_[full] = 0
    for x in range(64 * full, width):
        if r_[x] != 0:
            w_[x // 64] |= np.uint64(1) << np.uint64(x % 64)


# Byte k of a word is bits 8k..8k+7 (little-endian, as the C++ memcpy); shifts beat a uint8 view.
@njit(cache=True)
def words_to_packed(words, wo, width, out, oo):
    for i in range((width + 7) // 8):
        out[oo + i] = np.uint8((words[wo + i // 8] >> np.uint64(8 * (i % 8))) & np.uint64(0xFF))


@njit(cache=True)
def packed_to_words(row, ro, width, words, wo):
    wpr = words_per_row(width)
    if wpr == 0:
        return
    for j in range(wpr):
        words[wo + j] = 0
    for i in range((width + 7) // 8):
        words[wo + i // 8] |= np.uint64(row[ro + i]) << np.uint64(8 * (i % 8))
    words[wo + wpr - 1] &= last_word_mask(width)


@njit(cache=True)
def random_mask_kernel(seed, p, rows, width, packed, out):
    q = mask_threshold(p)
    wpr = words_per_row(width)
    row_bytes = (width + 7) // 8 if packed else width
    words = np.empty(wpr, dtype=np.uint64)
    for r in range(rows):
        random_mask_row(np.uint64(seed), q, r, wpr, width, words, 0)
        if packed:
            words_to_packed(words, 0, width, out, r * row_bytes)
        else:
            words_to_bools(words, 0, width, out, r * row_bytes)


def _leading_rows(shape, keep: int) -> int:
    rows = 1
    for s in shape[:len(shape) - keep]:
        rows *= s
    return rows


def random_mask(shape, p: float, seed: int, packed: bool = False) -> torch.Tensor:
    shape = list(shape)
    sizes = check_mask_args("random_mask", shape, p, packed)
    out = _checks.new_output("random_mask", None, sizes, torch.uint8 if packed else torch.bool,
                             lambda: f"shape={shape}")
    if out.numel() > 0:
        random_mask_kernel(np.int64(seed), np.float64(p), _leading_rows(shape, 1), shape[-1], packed,
                           out.view(torch.uint8).numpy().reshape(-1))
    return out


def random_dilated_mask(shape, p: float, seed: int, structure: str = "cross", iterations: int = 1,
                        packed: bool = False) -> torch.Tensor:
    from fastprep.numba_kernels.dilate import random_dilated_mask_kernel  # noqa: PLC0415 (cycle)

    shape = list(shape)
    sizes, square = check_dilated_args(shape, p, structure, iterations, packed)
    out = _checks.new_output("random_dilated_mask", None, sizes, torch.uint8 if packed else torch.bool,
                             lambda: f"shape={shape}")
    if out.numel() > 0:
        random_dilated_mask_kernel(np.int64(seed), np.float64(p), _leading_rows(shape, 2), shape[-2],
                                   shape[-1], square, iterations, packed,
                                   out.view(torch.uint8).numpy().reshape(-1))
    return out
