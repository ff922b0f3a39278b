"""Numba mirror of csrc/kernels/seeded_draws.cpp (kernel) and csrc/ops/seeded_draws.cpp (binding):
torch's mt19937 seeded per seed, the first draws of its first state block. The 32-bit words are
kept in uint64 and masked, as Numba widens 32-bit integer arithmetic."""

from __future__ import annotations

import numpy as np
import torch

import fastprep.ops._checks as checks
from fastprep.numba_kernels._cache import njit
from fastprep.numba_kernels._storage import array_at
from fastprep.ops._seeded_draws import check_seeded_draws

_M32 = np.uint64(0xFFFFFFFF)
_UPPER, _LOWER = np.uint64(0x80000000), np.uint64(0x7FFFFFFF)
_SHIFT = 397


_LANES = 16  # seeds seeded side by side, as the C++ kernel's kLanes


@njit(cache=True, inline="always")
def output(mt, k, lane):
    y = (mt[k, lane] & _UPPER) | (mt[k + 1, lane] & _LOWER)
    v = mt[k + _SHIFT, lane] ^ (y >> np.uint64(1)) ^ (np.uint64(0x9908B0DF) if y & np.uint64(1) else np.uint64(0))
    v ^= v >> np.uint64(11)
    v ^= (v << np.uint64(7)) & np.uint64(0x9D2C5680)
    v ^= (v << np.uint64(15)) & np.uint64(0xEFC60000)
    return v ^ (v >> np.uint64(18))


@njit(cache=True)
def seeded_draws_kernel(seeds_at, n, count, out_at):
    seeds, out = array_at(seeds_at, n, np.uint64), array_at(out_at, n * count, np.uint64)
    words = 2 * count + _SHIFT
    mt = np.empty((words, _LANES), np.uint64)
    for i0 in range(0, n, _LANES):
        lanes = min(n - i0, _LANES)
        for lane in range(_LANES):
            mt[0, lane] = seeds[i0 + (lane if lane < lanes else 0)] & _M32
        for j in range(1, words):
            prev, row = mt[j - 1], mt[j]
            for lane in range(_LANES):
                row[lane] = (np.uint64(1812433253) * (prev[lane] ^ (prev[lane] >> np.uint64(30))) + np.uint64(j)) & _M32
        for lane in range(lanes):
            for k in range(count):
                word = (output(mt, 2 * k, lane) << np.uint64(32)) | output(mt, 2 * k + 1, lane)
                out[(i0 + lane) * count + k] = word % np.uint64(0xFFFFFFFFFFFFFFFF) + np.uint64(1 << 63)


def seeded_draws(seeds, count):
    sizes = check_seeded_draws(seeds, count)
    out = checks.new_output("seeded_draws", seeds, sizes, torch.int64, checks.shape_source("seeds", seeds))
    src = checks.contiguous_input("seeded_draws", "seeds", seeds)
    if out.numel():
        seeded_draws_kernel(src.data_ptr(), sizes[0], count, out.data_ptr())
    return out
