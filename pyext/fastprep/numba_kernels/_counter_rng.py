"""The counter generator for Numba kernels: fastprep/core/_counter_rng.py (the plain-Python definition,
whose constants it takes) compiled on uint64, as csrc/kernels/counter_rng.h is for C++."""

import numpy as np

import fastprep.core._counter_rng as definition
from fastprep.numba_kernels._cache import njit

GOLDEN = np.uint64(definition.GOLDEN)
DERIVE_KEY = np.uint64(definition.DERIVE_KEY)
_M1 = np.uint64(definition.MIX_M1)
_M2 = np.uint64(definition.MIX_M2)


@njit(cache=True)
def mix64(z):
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


@njit(cache=True)
def random_word(seed, counter):
    return mix64(np.uint64(seed) + (np.uint64(counter) + np.uint64(1)) * GOLDEN)


@njit(cache=True)
def derive_seed(seed, stream):
    return np.int64(random_word(np.uint64(seed) ^ DERIVE_KEY, np.uint64(stream)))


_S32 = np.uint64(32)
_LO32 = np.uint64(0xFFFFFFFF)


@njit(cache=True)
def uniform_below(word, n):
    w, m = np.uint64(word), np.uint64(n)
    if m <= np.uint64(1 << 32):
        return ((w >> _S32) * m) >> _S32
    # floor(w * m / 2^64) from 32-bit halves (Numba has no 128-bit integers): the three low
    # partial sums stay below 3 * 2^32, so nothing wraps.
    w_lo, w_hi, m_lo, m_hi = w & _LO32, w >> _S32, m & _LO32, m >> _S32
    hi_lo, lo_hi = w_hi * m_lo, w_lo * m_hi
    mid = ((w_lo * m_lo) >> _S32) + (hi_lo & _LO32) + (lo_hi & _LO32)
    return w_hi * m_hi + (hi_lo >> _S32) + (lo_hi >> _S32) + (mid >> _S32)
