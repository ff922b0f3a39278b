"""Numba mirror of csrc/kernels/pack_bits.cpp (kernels) and csrc/ops/pack_bits.cpp (binding).

Arrays are flat uint8 views of contiguous [outer, n, inner] tensors, as in the C++ kernels.
"""

from __future__ import annotations

import numpy as np
import torch

import fastprep.ops._checks as checks
from fastprep.numba_kernels._cache import njit
from fastprep.numba_kernels._mask_words import load_word
from fastprep.numba_kernels._storage import array_at
from fastprep.numba_kernels._vector_bits import (
    bit_plane64,
    bools64_to_word,
    bools64_to_word_big,
    or_bits64,
    word_to_bools64,
    word_to_bools64_big,
)
from fastprep.ops._pack_bits import check_pack, check_unpack

_GATHER_LITTLE = np.uint64(0x0102040810204080)
_GATHER_BIG = np.uint64(0x8040201008040201)
_SPREAD_LITTLE = np.uint64(0x8040201008040201)
_SPREAD_BIG = np.uint64(0x0102040810204080)
_LOW7 = np.uint64(0x7F7F7F7F7F7F7F7F)
_HIGH1 = np.uint64(0x8080808080808080)
_ONES = np.uint64(0x0101010101010101)


@njit(cache=True, inline="always")
def bytes_to_bits(w):
    return ((((w & _LOW7) + _LOW7) | w) & _HIGH1) >> np.uint64(7)


@njit(cache=True, inline="always")
def bit_shift(k, little):
    return k if little else 7 - k


# Rows are taken as slices so every index below is provably non-negative: Numba then drops its
# negative-index wraparound branch, which otherwise blocks load combining (measured 10x slower).

@njit(cache=True)
def pack_run(x, out, n, little):
    """n bytes (nonzero = 1) -> ceil(n / 8) packed bytes: 64 at a time by a byte test into a word
    (vector_bits, as the C++ pack_run_v4), then 8 at a time by SWAR, then the last partial byte."""
    blocks = n // 64
    for j in range(blocks):
        w = bools64_to_word(x, 64 * j) if little else bools64_to_word_big(x, 64 * j)
        for k in range(8):
            out[8 * j + k] = np.uint8((w >> np.uint64(8 * k)) & np.uint64(0xFF))
    gather = _GATHER_LITTLE if little else _GATHER_BIG
    full = n // 8
    for j in range(8 * blocks, full):
        out[j] = np.uint8((bytes_to_bits(load_word(x, 8 * j)) * gather) >> np.uint64(56))
    if 8 * full < n:
        b = 0
        for k in range(n - 8 * full):
            b |= (1 if x[8 * full + k] != 0 else 0) << bit_shift(k, little)
        out[full] = np.uint8(b)


@njit(cache=True)
def pack_rows(x, out, rows, n, little):
    if n % 8 == 0:  # rows of whole bytes: one run
        pack_run(x[:rows * n], out[:rows * n // 8], rows * n, little)
        return
    nb = (n + 7) // 8
    for r in range(rows):
        pack_run(x[r * n:(r + 1) * n], out[r * nb:(r + 1) * nb], n, little)


@njit(cache=True)
def pack_planes(x, out, outer, n, inner, little):
    """Up to 8 planes of `inner` bytes -> one plane, bit bit_shift(k) from plane k, 64 bytes at a
    time with every plane's bits ORed in before the next 64 (the C++ pack_planes_v4 keeps them in
    a register; here they stay in L1)."""
    nb = (n + 7) // 8
    blocks = inner // 64
    for o in range(outer):
        for j in range(nb):
            orow = out[(o * nb + j) * inner:(o * nb + j + 1) * inner]
            orow[:] = 0
            kmax = min(n - 8 * j, 8)
            first = (o * n + 8 * j) * inner
            for b in range(blocks):
                for k in range(kmax):
                    or_bits64(bools64_to_word(x, first + k * inner + 64 * b), 1 << bit_shift(k, little), orow, 64 * b)
            for k in range(kmax):
                xrow = x[first + k * inner:first + (k + 1) * inner]
                s = bit_shift(k, little)
                for i in range(64 * blocks, inner):
                    orow[i] |= np.uint8((1 if xrow[i] != 0 else 0) << s)


@njit(cache=True)
def unpack_run(packed, out, count, little):
    """count elements from ceil(count / 8) packed bytes -> 0/1 bytes: 64 at a time from a word
    (vector_bits, as the C++ unpack_run_v4), then 8 at a time by SWAR, then the rest."""
    blocks = count // 64
    for j in range(blocks):
        w = load_word(packed, 8 * j)
        if little:
            word_to_bools64(w, out, 64 * j)
        else:
            word_to_bools64_big(w, out, 64 * j)
    spread = _SPREAD_LITTLE if little else _SPREAD_BIG
    full = count // 8
    for j in range(8 * blocks, full):
        w = bytes_to_bits((np.uint64(packed[j]) * _ONES) & spread)
        for k in range(8):
            out[8 * j + k] = np.uint8((w >> np.uint64(8 * k)) & np.uint64(0xFF))
    for k in range(count - 8 * full):
        out[8 * full + k] = (packed[full] >> bit_shift(k, little)) & 1


@njit(cache=True)
def unpack_rows(packed, out, rows, m, count, little):
    if count == 8 * m:  # whole bytes: one run
        unpack_run(packed[:rows * m], out[:rows * count], rows * count, little)
        return
    for r in range(rows):
        unpack_run(packed[r * m:(r + 1) * m], out[r * count:(r + 1) * count], count, little)


@njit(cache=True)
def unpack_planes(packed, out, outer, m, inner, count, little):
    blocks = inner // 64
    for o in range(outer):
        for c in range(count):
            prow = packed[(o * m + c // 8) * inner:(o * m + c // 8 + 1) * inner]
            orow = out[(o * count + c) * inner:(o * count + c + 1) * inner]
            s = bit_shift(c % 8, little)
            for b in range(blocks):
                bit_plane64(prow, 64 * b, s, orow, 64 * b)
            for i in range(64 * blocks, inner):
                orow[i] = (prow[i] >> s) & 1


@njit(cache=True)
def pack_bits_kernel(x, out, outer, n, inner, little):
    if inner == 1:
        pack_rows(x, out, outer, n, little)
    else:
        pack_planes(x, out, outer, n, inner, little)


@njit(cache=True)
def unpack_bits_kernel(packed, out, outer, m, inner, count, little):
    if inner == 1:
        unpack_rows(packed, out, outer, m, count, little)
    else:
        unpack_planes(packed, out, outer, m, inner, count, little)


@njit(cache=True)
def pack_bits_at(src, src_n, dst, dst_n, outer, n, inner, little):
    pack_bits_kernel(array_at(src, src_n, np.uint8), array_at(dst, dst_n, np.uint8), outer, n, inner, little)


@njit(cache=True)
def unpack_bits_at(src, src_n, dst, dst_n, outer, m, inner, count, little):
    unpack_bits_kernel(array_at(src, src_n, np.uint8), array_at(dst, dst_n, np.uint8), outer, m, inner, count,
                       little)


def pack_bits(x: torch.Tensor, dim: int = -1, bitorder: str = "little") -> torch.Tensor:
    d, little = check_pack(x, dim, bitorder)
    xc = checks.contiguous_input("pack_bits", "x", x)
    outer, n, inner = checks.axis_view(xc.shape, d)
    shape = list(xc.shape)
    shape[d] = (n + 7) // 8
    out = checks.new_output("pack_bits", xc, shape, torch.uint8, checks.shape_source("x", x))
    if out.numel() > 0:
        pack_bits_at(xc.data_ptr(), xc.numel(), out.data_ptr(), out.numel(), outer, n, inner, little)
    return out


def unpack_bits(packed: torch.Tensor, count: int, dim: int = -1,
                bitorder: str = "little") -> torch.Tensor:
    d, little = check_unpack(packed, count, dim, bitorder)
    pc = checks.contiguous_input("unpack_bits", "packed", packed)
    outer, m, inner = checks.axis_view(pc.shape, d)
    shape = list(pc.shape)
    shape[d] = count
    out = checks.new_output("unpack_bits", pc, shape, torch.bool, lambda: f"count={count}")
    if out.numel() > 0:
        unpack_bits_at(pc.data_ptr(), pc.numel(), out.data_ptr(), out.numel(), outer, m, inner, count, little)
    return out
