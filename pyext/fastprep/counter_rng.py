"""fastprep's one random generator in plain Python: the definition every backend mirrors.

Word `i` of seed `s` is output `i` of SplitMix64 started at `s`, ``mix64(s + (i + 1) * golden)``
mod 2^64; ``derive_seed(s, k)`` is word `k` of the stream keyed ``s ^ DERIVE_KEY``. The same
functions exist in C++ (csrc/kernels/counter_rng.h, for the native kernels) and in Numba
(numba_kernels/counter_rng.py, which takes its constants from here); tests/test_counter_rng.py
holds the known answers all three give. This module imports nothing from fastprep or Numba, so
the op contract (fastprep.ops) and the seed API (fastprep.rng) use it on any backend.
"""

from __future__ import annotations

MASK64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
DERIVE_KEY = 0xD1B54A32D192ED03
MIX_M1 = 0xBF58476D1CE4E5B9
MIX_M2 = 0x94D049BB133111EB


def mix64(z: int) -> int:
    z = ((z ^ (z >> 30)) * MIX_M1) & MASK64
    z = ((z ^ (z >> 27)) * MIX_M2) & MASK64
    return z ^ (z >> 31)


def random_word(seed: int, counter: int) -> int:
    """Word `counter` of the stream of `seed` (both taken mod 2^64), a uint64 as a Python int."""
    return mix64((seed + ((counter + 1) & MASK64) * GOLDEN) & MASK64)


def derive_seed(seed: int, stream: int) -> int:
    """The int64 seed of sub-stream `stream` of `seed`."""
    w = random_word((seed & MASK64) ^ DERIVE_KEY, stream & MASK64)
    return w - (1 << 64) if w >> 63 else w


def uniform_below(word: int, n: int) -> int:
    """An integer in [0, n) from a uint64 word by multiply-shift: the top 32 bits for
    n <= 2^32, the whole word (a 128-bit product) above that."""
    if n <= 1 << 32:
        return ((word >> 32) * n) >> 32
    return (word * n) >> 64
