"""Numba mirror of the row <-> 64-bit-word conversions of csrc/kernels/random_mask.h / .cpp that
the mask kernels share (random masks, dilation, mask_fill): bit b of word j is pixel 64j + b,
padding bits of a row's last word are zero."""

from __future__ import annotations

import numpy as np

from fastprep.numba_kernels._cache import njit
from fastprep.numba_kernels.vector_bits import bools64_to_word, word_to_bools64

_ALL = np.uint64(0xFFFFFFFFFFFFFFFF)


@njit(cache=True, inline="always")
def words_per_row(width):
    return (width + 63) // 64


@njit(cache=True, inline="always")
def last_word_mask(width):
    r = width % 64
    return _ALL if r == 0 else (np.uint64(1) << np.uint64(r)) - np.uint64(1)


# A whole word moves in one vector instruction or a few (vector_bits); the row's last partial
# word goes bit by bit.
@njit(cache=True)
def words_to_bools(words, wo, width, out, oo):
    o = out[oo:oo + width]
    w_ = words[wo:wo + words_per_row(width)]
    full = width // 64
    for j in range(full):
        word_to_bools64(w_[j], o, 64 * j)
    for x in range(64 * full, width):
        o[x] = np.uint8((w_[x // 64] >> np.uint64(x % 64)) & np.uint64(1))


@njit(cache=True)
def bools_to_words(row, ro, width, words, wo):
    r_ = row[ro:ro + width]
    w_ = words[wo:wo + words_per_row(width)]
    full = width // 64
    for j in range(full):
        w_[j] = bools64_to_word(r_, 64 * j)
    if full < w_.size:
        w_[full] = 0
    for x in range(64 * full, width):
        if r_[x] != 0:
            w_[x // 64] |= np.uint64(1) << np.uint64(x % 64)


@njit(cache=True, inline="always")
def load_word(a, i):
    """Bytes a[i .. i + 7] as a little-endian word (LLVM makes it one load)."""
    w = np.uint64(0)
    for k in range(8):
        w |= np.uint64(a[i + k]) << np.uint64(8 * k)
    return w


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
