"""Numba mirror of csrc/kernels/color.h: the fp16/bf16 bit conversions."""

import numpy as np
from numba import njit


@njit(cache=True, inline="always")
def float_to_bf16_bits(f):
    x = np.float32(f).view(np.uint32)
    if (x & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000):
        return np.uint16((x >> np.uint32(16)) | np.uint32(0x40))
    return np.uint16((x + np.uint32(0x7FFF) + ((x >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16))


@njit(cache=True, inline="always")
def float_to_half_bits(f):
    x = np.float32(f).view(np.uint32)
    sign = (x >> np.uint32(16)) & np.uint32(0x8000)
    a = x & np.uint32(0x7FFFFFFF)
    if a > np.uint32(0x7F800000):
        return np.uint16(sign | np.uint32(0x7E00) | ((a >> np.uint32(13)) & np.uint32(0x3FF)))
    if a >= np.uint32(0x47800000):
        return np.uint16(sign | np.uint32(0x7C00))
    if a >= np.uint32(0x38800000):
        h = (((a >> np.uint32(23)) - np.uint32(112)) << np.uint32(10)) | ((a >> np.uint32(13)) & np.uint32(0x3FF))
        rem = a & np.uint32(0x1FFF)
        halfway = np.uint32(0x1000)
    else:
        shift = np.uint32(126) - (a >> np.uint32(23))
        if shift > np.uint32(24):
            return np.uint16(sign)
        mant = (a & np.uint32(0x7FFFFF)) | np.uint32(0x800000)
        h = mant >> shift
        rem = mant & ((np.uint32(1) << shift) - np.uint32(1))
        halfway = np.uint32(1) << (shift - np.uint32(1))
    if rem > halfway or (rem == halfway and (h & np.uint32(1)) != 0):
        h += np.uint32(1)
    return np.uint16(sign | h)


@njit(cache=True, inline="always")
def half_bits_to_float(hb):
    h = np.uint32(hb) & np.uint32(0xFFFF)
    sign = (h & np.uint32(0x8000)) << np.uint32(16)
    e = (h >> np.uint32(10)) & np.uint32(0x1F)
    m = h & np.uint32(0x3FF)
    if e == np.uint32(0x1F):
        return np.uint32(sign | np.uint32(0x7F800000) | (m << np.uint32(13))).view(np.float32)
    if e != np.uint32(0):
        return np.uint32(sign | ((e + np.uint32(112)) << np.uint32(23)) | (m << np.uint32(13))).view(np.float32)
    if m == np.uint32(0):
        return np.uint32(sign).view(np.float32)
    exp = np.uint32(113)
    while (m & np.uint32(0x400)) == np.uint32(0):
        m = m << np.uint32(1)
        exp -= np.uint32(1)
    return np.uint32(sign | (exp << np.uint32(23)) | ((m & np.uint32(0x3FF)) << np.uint32(13))).view(np.float32)


@njit(cache=True, inline="always")
def bf16_bits_to_float(b):
    return np.uint32((np.uint32(b) & np.uint32(0xFFFF)) << np.uint32(16)).view(np.float32)
