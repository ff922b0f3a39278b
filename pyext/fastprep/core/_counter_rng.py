"""fastprep's one random generator in plain Python: the definition every backend mirrors.

Word `i` of seed `s` is output `i` of SplitMix64 started at `s`, ``mix64(s + (i + 1) * golden)``
mod 2^64; ``derive_seed(s, k)`` is word `k` of the stream keyed ``s ^ DERIVE_KEY``. The same
functions exist in C++ (csrc/kernels/counter_rng.h, for the native kernels) and in Numba
(numba_kernels/_counter_rng.py, which takes its constants from here); tests/ops/test_counter_rng.py
holds the known answers all three give. This module imports nothing from fastprep or Numba, so
the op contract (fastprep.ops) and the seed API (fastprep.core._rng) use it on any backend.

Every function takes Python ints or numpy uint64 arrays (one element per sample, combined
elementwise with ints or arrays), with the same bits: the transforms draw one sample's parameters
with ints, fastprep.Loader a whole chunk's with arrays (uint64 arithmetic wraps mod 2^64 as the
ints are masked to). A signed seed array enters as ``seeds.view(np.uint64)``.
"""

from __future__ import annotations

from typing import Any

MASK64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
DERIVE_KEY = 0xD1B54A32D192ED03
MIX_M1 = 0xBF58476D1CE4E5B9
MIX_M2 = 0x94D049BB133111EB
_LO32 = 0xFFFFFFFF


def mix64(z: Any) -> Any:
    z = ((z ^ (z >> 30)) * MIX_M1) & MASK64
    z = ((z ^ (z >> 27)) * MIX_M2) & MASK64
    return z ^ (z >> 31)


def random_word(seed: Any, counter: Any) -> Any:
    """Word `counter` of the stream of `seed` (both taken mod 2^64), a uint64 as a Python int."""
    return mix64((seed + (((counter + 1) * GOLDEN) & MASK64)) & MASK64)


def _is_array(x: Any) -> bool:
    return hasattr(x, "dtype")  # a numpy array (a Python int, or a SymInt under tracing, has none)


def as_signed(word: Any) -> Any:
    """A uint64 word as the int64 with the same bits."""
    if _is_array(word):
        return word.view("int64")
    return word - (1 << 64) if word >> 63 else word


def derive_seed(seed: Any, stream: Any) -> Any:
    """The int64 seed of sub-stream `stream` of `seed`."""
    return as_signed(random_word((seed & MASK64) ^ DERIVE_KEY, stream & MASK64))


def _mul_hi(word: Any, n: Any) -> Any:
    """floor(word * n / 2^64) from 32-bit halves, as numba_kernels/_counter_rng.py (no 128-bit
    integers in numpy either): the three low partial sums stay below 3 * 2^32."""
    w_lo, w_hi, m_lo, m_hi = word & _LO32, word >> 32, n & _LO32, n >> 32
    hi_lo, lo_hi = w_hi * m_lo, w_lo * m_hi
    mid = ((w_lo * m_lo) >> 32) + (hi_lo & _LO32) + (lo_hi & _LO32)
    return w_hi * m_hi + (hi_lo >> 32) + (lo_hi >> 32) + (mid >> 32)


def uniform_below(word: Any, n: Any) -> Any:
    """An integer in [0, n) from a uint64 word by multiply-shift: the top 32 bits for
    n <= 2^32, the whole word (a 128-bit product) above that. With an array `n` (any integer
    dtype, n >= 1), an int64 array."""
    if type(n) is int or not _is_array(n):
        if n <= 1 << 32:
            return ((word >> 32) * n) >> 32
        return _mul_hi(word, n) if _is_array(word) else (word * n) >> 64
    n = n.astype("uint64")  # (numpy mixes uint64 with int64 as float64)
    small = n <= 1 << 32
    if small.all():
        return (((word >> 32) * n) >> 32).astype("int64")
    # Elementwise: the big rows' products wrap in the small formula, so each row takes its own.
    return (((word >> 32) * (n * small)) >> 32 | _mul_hi(word, n * ~small)).astype("int64")
