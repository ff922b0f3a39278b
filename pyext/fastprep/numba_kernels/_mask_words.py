"""Numba mirror of the row <-> 64-bit-word conversions of csrc/kernels/random_mask.h / .cpp that
the mask kernels share (random masks, dilation, mask_fill): bit b of word j is pixel 64j + b,
padding bits of a row's last word are zero."""

from __future__ import annotations

import numpy as np

from fastprep.numba_kernels._cache import njit
from fastprep.numba_kernels._vector_bits import bools64_to_word, word_to_bools64

_ALL = np.uint64(0xFFFFFFFFFFFFFFFF)


@njit(cache=True, inline="always")
def words_per_row(width):
    return (width + 63) // 64


@njit(cache=True, inline="always")
def last_word_mask(width):
    r = width % 64
    return _ALL if r == 0 else (np.uint64(1) << np.uint64(r)) - np.uint64(1)


# A whole word moves in one vector instruction or a few (vector_bits). A row's last partial word
# moves as the 64 pixels ending at the row's end, shifted (rows of 64 pixels or more): reads stay
# inside the row and writes put the same bytes the full words wrote. Offsets, not slices: a slice
# per row costs an atomic reference count pair, which at 4 words a row doubles the row's time.
@njit(cache=True, inline="always")
def words_to_bools(words, wo, width, out, oo):
    full, rem = width // 64, width % 64
    for j in range(full):
        word_to_bools64(words[wo + j], out, oo + 64 * j)
    if rem == 0:
        return
    if full > 0:  # pixels width - 64 .. width - 1: the last full word's top and the partial word
        tail = (words[wo + full - 1] >> np.uint64(rem)) | (words[wo + full] << np.uint64(64 - rem))
        word_to_bools64(tail, out, oo + width - 64)
        return
    for x in range(width):
        out[oo + x] = np.uint8((words[wo] >> np.uint64(x)) & np.uint64(1))


@njit(cache=True, inline="always")
def bools_to_words(row, ro, width, words, wo):
    full, rem = width // 64, width % 64
    for j in range(full):
        words[wo + j] = bools64_to_word(row, ro + 64 * j)
    if rem == 0:
        return
    if full > 0:  # the word of pixels width - 64 .. width - 1, its top `rem` bits to the bottom
        words[wo + full] = bools64_to_word(row, ro + width - 64) >> np.uint64(64 - rem)
        return
    w = np.uint64(0)
    for x in range(width):
        if row[ro + x] != 0:
            w |= np.uint64(1) << np.uint64(x)
    words[wo] = w


@njit(cache=True, inline="always")
def load_word(a, i):
    """Bytes a[i .. i + 7] as a little-endian word (LLVM makes it one load)."""
    w = np.uint64(0)
    for k in range(8):
        w |= np.uint64(a[i + k]) << np.uint64(8 * k)
    return w


@njit(cache=True, inline="always")
def store_word(a, i, w):
    """Word w into bytes a[i .. i + 7], little-endian (LLVM makes it one store)."""
    for k in range(8):
        a[i + k] = np.uint8((w >> np.uint64(8 * k)) & np.uint64(0xFF))


# Byte k of a word is bits 8k..8k+7 (little-endian, as the C++ memcpy): whole words move as one
# load or store, the row's last few bytes one at a time.
@njit(cache=True, inline="always")
def words_to_packed(words, wo, width, out, oo):
    nbytes = (width + 7) // 8
    for j in range(nbytes // 8):
        store_word(out, oo + 8 * j, words[wo + j])
    for i in range(nbytes // 8 * 8, nbytes):
        out[oo + i] = np.uint8((words[wo + i // 8] >> np.uint64(8 * (i % 8))) & np.uint64(0xFF))


@njit(cache=True, inline="always")
def packed_to_words(row, ro, width, words, wo):
    nbytes = (width + 7) // 8
    for j in range(nbytes // 8):
        words[wo + j] = load_word(row, ro + 8 * j)
    if nbytes % 8 != 0:
        w = np.uint64(0)
        for i in range(nbytes // 8 * 8, nbytes):
            w |= np.uint64(row[ro + i]) << np.uint64(8 * (i % 8))
        words[wo + nbytes // 8] = w
    if nbytes > 0:
        words[wo + words_per_row(width) - 1] &= last_word_mask(width)
