"""Numba mirror of csrc/kernels/float_bits.h: bit-exact float32 <-> float16 / bfloat16
conversions (Numba has no bf16, and fp16 casts must not depend on the compiler)."""

import numpy as np

from fastprep.numba_kernels._cache import njit

_U = np.uint32
_SUB_UNIT = np.float32(5.9604644775390625e-08)  # 2^-24


@njit(cache=True, inline="always")
def float_to_bf16_bits(f):
    x = np.float32(f).view(np.uint32)
    rounded = (x + _U(0x7FFF) + ((x >> _U(16)) & _U(1))) >> _U(16)
    if (x & _U(0x7FFFFFFF)) > _U(0x7F800000):
        return np.uint16((x >> _U(16)) | _U(0x40))
    return np.uint16(rounded)


@njit(cache=True, inline="always")
def float_to_half_bits(f):
    x = np.float32(f).view(np.uint32)
    sign = (x >> _U(16)) & _U(0x8000)
    a = x & _U(0x7FFFFFFF)
    normal = _U(a - _U(0x38000000) + _U(0xFFF) + ((a >> _U(13)) & _U(1))) >> _U(13)
    e = a >> _U(23)
    # As color.h: kept in [14, 25] even where unused, since LLVM's shift by >= 32 is poison.
    shift = _U(25) if e < _U(101) else (_U(14) if e > _U(112) else _U(126) - e)
    mant = (a & _U(0x7FFFFF)) | _U(0x800000)
    sub = (mant + (_U(1) << (shift - _U(1))) - _U(1) + ((mant >> shift) & _U(1))) >> shift
    payload = (a >> _U(13)) & _U(0x3FF)
    if a > _U(0x7F800000):
        h = _U(0x7C00) | (payload if payload != _U(0) else _U(1))
    elif a >= _U(0x47800000):
        h = _U(0x7C00)
    elif a >= _U(0x38800000):
        h = normal
    else:
        h = sub
    return np.uint16(sign | h)


@njit(cache=True, inline="always")
def half_bits_to_float(hb):
    h = _U(hb) & _U(0xFFFF)
    sign = (h & _U(0x8000)) << _U(16)
    e = (h >> _U(10)) & _U(0x1F)
    m = h & _U(0x3FF)
    if e == _U(0x1F):
        bits = _U(0x7F800000) | (m << _U(13))
    elif e != _U(0):
        bits = ((e + _U(112)) << _U(23)) | (m << _U(13))
    else:
        bits = np.float32(np.float32(m) * _SUB_UNIT).view(np.uint32)
    return _U(sign | bits).view(np.float32)


@njit(cache=True, inline="always")
def bf16_bits_to_float(b):
    return np.uint32((np.uint32(b) & np.uint32(0xFFFF)) << np.uint32(16)).view(np.float32)
