"""Numba mirror of csrc/kernels/color.cpp (kernels) and csrc/ops/color.cpp (binding). Same integer
formulas, same float32 operations in the same order."""

from __future__ import annotations

import numpy as np
import torch
from numba.core import types
from numba.extending import overload

import fastprep.ops._checks as checks
from fastprep.numba_kernels._cache import njit
from fastprep.numba_kernels._float_bits import (
    bf16_bits_to_float,
    float_to_bf16_bits,
    float_to_half_bits,
    half_bits_to_float,
)
from fastprep.numba_kernels._storage import FLAT_DTYPE, array_at, span_count
from fastprep.ops._color import check_color, out_shape

# kernels/color.h's ColorType codes.
U8, F32, F16, BF16 = 0, 1, 2, 3
TYPE_CODE = {torch.uint8: U8, torch.float32: F32, torch.float16: F16, torch.bfloat16: BF16}


_I = np.int32
_F = np.float32
# (D, Shift) of each division of ycbcr_to_rgb: see color_pixel.h.
DIVISIONS = ((500, 0), (125000, 3), (250, 0))
# rgb_to_ycbcr's exact divisions (color_pixel.h): trunc(N * INV_1000) = floor(N / 1000) for N in
# [0, 255500], trunc(N * INV_31250) = floor(N / 31250) for N in [0, 8000000], in float32.
INV_1000 = np.nextafter(_F(1) / _F(1000), _F(1))
INV_31250 = _F(1) / _F(31250)


@njit(cache=True, inline="always")
def div_clamped(n, d, shift):
    """floor(n / d) for n clamped to [0, 256 d), as color_pixel.h: (clamped n) >> shift is exact in
    float32, times float32(1 / (d >> shift)), truncated. Every step is cast to int32 (no value
    leaves int32) so LLVM keeps 32-bit lanes, as in C++."""
    c = _I(min(max(_I(n), _I(0)), _I(256 * d - 1)))
    return _I(_F(_I(c >> _I(shift))) * (_F(1) / _F(d >> shift)))


_C = {k: np.float32(v) for k, v in dict(
    yr=0.299, yg=0.587, yb=0.114, br=-0.168736, bg=0.331264, half=0.5, rg=0.418688, rb=0.081312,
    kr=1.402, gb=0.344136, gr=0.714136, kb=1.772).items()}
YR, YG, YB, BR, BG, HALF, RG, RB = (_C[k] for k in ("yr", "yg", "yb", "br", "bg", "half", "rg", "rb"))
KR, GB, GR, KB = (_C[k] for k in ("kr", "gb", "gr", "kb"))


CHUNK = 256


@njit(cache=True, inline="always")
def gather_bits(src, p, sc, sw, n, t0, t1, t2, in_type):
    """The chunk's three channels of fp16 (in_type F16) or bf16 bits into contiguous float32
    temporaries (as color.cpp does)."""
    s = src[p:p + (n - 1) * sw + 2 * sc + 1]
    if in_type == F16:
        for i in range(n):
            t0[i] = half_bits_to_float(s[i * sw])
            t1[i] = half_bits_to_float(s[i * sw + sc])
            t2[i] = half_bits_to_float(s[i * sw + 2 * sc])
    else:
        for i in range(n):
            t0[i] = bf16_bits_to_float(s[i * sw])
            t1[i] = bf16_bits_to_float(s[i * sw + sc])
            t2[i] = bf16_bits_to_float(s[i * sw + 2 * sc])


@njit(cache=True, inline="always")
def gather_values(src, p, sc, sw, n, t0, t1, t2):
    """gather_bits of uint8 or float32 values."""
    s = src[p:p + (n - 1) * sw + 2 * sc + 1]
    for i in range(n):
        t0[i] = s[i * sw]
        t1[i] = s[i * sw + sc]
        t2[i] = s[i * sw + 2 * sc]


@njit(cache=True, inline="always")
def gather_planes_bits(src, p, sc, n, t0, t1, t2, in_type):
    """gather_bits of planar rows (column stride 1): a slice per plane. Indexed from one slice at a
    runtime plane offset, LLVM left the loop scalar (CHW uint8 colour took 130 us, HWC 33)."""
    s0, s1, s2 = src[p:p + n], src[p + sc:p + sc + n], src[p + 2 * sc:p + 2 * sc + n]
    if in_type == F16:
        for i in range(n):
            t0[i], t1[i], t2[i] = half_bits_to_float(s0[i]), half_bits_to_float(s1[i]), half_bits_to_float(s2[i])
    else:
        for i in range(n):
            t0[i], t1[i], t2[i] = bf16_bits_to_float(s0[i]), bf16_bits_to_float(s1[i]), bf16_bits_to_float(s2[i])


@njit(cache=True, inline="always")
def gather_planes_values(src, p, sc, n, t0, t1, t2):
    """gather_planes_bits of uint8 or float32 values."""
    s0, s1, s2 = src[p:p + n], src[p + sc:p + sc + n], src[p + 2 * sc:p + 2 * sc + n]
    for i in range(n):
        t0[i], t1[i], t2[i] = s0[i], s1[i], s2[i]


def _holds_bits(dtype: types.Type) -> bool:
    """Whether arrays of `dtype` hold fp16 / bf16 bits (FLAT_DTYPE's int16) rather than values
    (uint8, float32); any other element type is a caller's bug, refused while compiling."""
    if dtype == types.int16:
        return True
    if dtype in (types.uint8, types.float32):
        return False
    raise TypeError(f"numba_kernels.color: no pixel type is stored as {dtype}")


def gather_any(src, p, sc, sw, n, t0, t1, t2, in_type):
    """A chunk of pixels into float32 / int temporaries, whatever the strides (compiled only)."""
    raise NotImplementedError("numba_kernels.color.gather_any runs compiled only")


# gather_any is chosen by the source's element type while compiling, not by in_type at run time:
# a uint8 or float32 source compiles only the plain loops, so each (source, output) signature
# compiles a third of the gather loops it did (a cold compile of rgb_to_ycbcr's float path: 14 -> 6 s
# of CPU on a Zen 3; same run time). Not inlined into its caller (an overload inlined at the IR level
# trips Numba's IR checks on the inlined bit conversions): the stride cases live inside it so that
# the literal strides still reach the loops (packed HWC, a slice per plane: LLVM vectorises those).
@overload(gather_any)
def _gather_any_typed(src, p, sc, sw, n, t0, t1, t2, in_type):
    if _holds_bits(src.dtype):
        def gather_any_bits(src, p, sc, sw, n, t0, t1, t2, in_type):
            if sw == 3 and sc == 1:
                gather_bits(src, p, 1, 3, n, t0, t1, t2, in_type)
            elif sw == 1:
                gather_planes_bits(src, p, sc, n, t0, t1, t2, in_type)
            else:
                gather_bits(src, p, sc, sw, n, t0, t1, t2, in_type)
        return gather_any_bits

    def gather_any_values(src, p, sc, sw, n, t0, t1, t2, in_type):
        if sw == 3 and sc == 1:
            gather_values(src, p, 1, 3, n, t0, t1, t2)
        elif sw == 1:
            gather_planes_values(src, p, sc, n, t0, t1, t2)
        else:
            gather_values(src, p, sc, sw, n, t0, t1, t2)
    return gather_any_values


@njit(cache=True, inline="always")
def rgb_to_ycbcr_chunk_u8(t0, t1, t2, n, o0, o1, o2):
    """Exact uint8 RGB -> YCbCr of n pixels in contiguous uint8 temporaries, as color_simd.h: the
    numerators are integer dot products, then color_pixel.h's one-step float32 divisions (exact:
    every numerator is an integer in [0, 2^24)). Each product and sum is cast back to int32, where
    Numba would widen to int64, so LLVM sees 16-bit factors and emits vpmaddwd / vpdpwssd: 20% less
    time than the same formula in float32, and uint8 temporaries gather in half the time."""
    for i in range(n):
        r, g, b = _I(t0[i]), _I(t1[i]), _I(t2[i])
        ny = _I(_I(_I(_I(299) * r) + _I(_I(587) * g)) + _I(_I(_I(114) * b) + _I(500)))
        ncb = _I(_I(_I(_I(-5273) * r) - _I(_I(10352) * g)) + _I(_I(_I(15625) * b) + _I(4015625)))
        ncr = _I(_I(_I(_I(15625) * r) - _I(_I(13084) * g)) - _I(_I(_I(2541) * b) - _I(4015625)))
        o0[i] = _I(_F(ny) * INV_1000)
        o1[i] = min(_I(_F(ncb) * INV_31250), _I(255))
        o2[i] = min(_I(_F(ncr) * INV_31250), _I(255))


@njit(cache=True, inline="always")
def ycbcr_to_rgb_chunk_u8(t0, t1, t2, n, o0, o1, o2):
    """Exact uint8 YCbCr -> RGB of n pixels in contiguous int32 temporaries (as color_pixel.h)."""
    for i in range(n):
        a, b, c = t0[i], _I(t1[i] - _I(128)), _I(t2[i] - _I(128))
        o0[i] = div_clamped(_I(500) * a + _I(250) + _I(701) * c, 500, 0)
        o1[i] = div_clamped(_I(125000) * a + _I(62500) - _I(43017) * b - _I(89267) * c, 125000, 3)
        o2[i] = div_clamped(_I(250) * a + _I(125) + _I(443) * b, 250, 0)


@njit(cache=True)
def rows_u8(src, base, h, w, sc, sh, sw, out, forward, t0, t1, t2):
    """Exact uint8 -> uint8 rows; the caller's temporaries are uint8 forward and int32 backward (the
    fastest of uint8 / int32 / float32 each way)."""
    plane = h * w
    for yy in range(h):
        for x0 in range(0, w, CHUNK):
            n = min(CHUNK, w - x0)
            gather_any(src, base + yy * sh + x0 * sw, sc, sw, n, t0, t1, t2, U8)
            o = yy * w + x0
            o0, o1, o2 = out[o:o + n], out[plane + o:plane + o + n], out[2 * plane + o:2 * plane + o + n]
            if forward:
                rgb_to_ycbcr_chunk_u8(t0, t1, t2, n, o0, o1, o2)
            else:
                ycbcr_to_rgb_chunk_u8(t0, t1, t2, n, o0, o1, o2)


@njit(cache=True, inline="always")
def compute(t0, t1, t2, n, forward, delta, scale):
    """In place: the float formulas in color.cpp's order, times scale."""
    if forward:
        for i in range(n):
            r, g, b = t0[i], t1[i], t2[i]
            # `-0.168736f * r - ...` in C++ is (-c) * r: BR is negative.
            t0[i] = (YR * r + YG * g + YB * b) * scale
            t1[i] = (BR * r - BG * g + HALF * b + delta) * scale
            t2[i] = (HALF * r - RG * g - RB * b + delta) * scale
    else:
        for i in range(n):
            y, cb, cr = t0[i], t1[i], t2[i]
            t0[i] = (y + KR * (cr - delta)) * scale
            t1[i] = (y - GB * (cb - delta) - GR * (cr - delta)) * scale
            t2[i] = (y + KB * (cb - delta)) * scale


@njit(cache=True, inline="always")
def store_chunk(t0, t1, t2, n, o0, o1, o2, out_type):
    """Float temporaries to the output type's bits (fp16 / bf16 rounded as color.h does)."""
    if out_type == F16:
        for i in range(n):
            o0[i] = float_to_half_bits(t0[i])
            o1[i] = float_to_half_bits(t1[i])
            o2[i] = float_to_half_bits(t2[i])
    elif out_type == BF16:
        for i in range(n):
            o0[i] = float_to_bf16_bits(t0[i])
            o1[i] = float_to_bf16_bits(t1[i])
            o2[i] = float_to_bf16_bits(t2[i])
    else:
        for i in range(n):
            o0[i] = t0[i]
            o1[i] = t1[i]
            o2[i] = t2[i]


@njit(cache=True)
def rows_float(src, base, h, w, sc, sh, sw, out, in_type, out_type, forward, delta, scale):
    plane = h * w
    t0 = np.empty(CHUNK, np.float32)
    t1 = np.empty(CHUNK, np.float32)
    t2 = np.empty(CHUNK, np.float32)
    for yy in range(h):
        for x0 in range(0, w, CHUNK):
            n = min(CHUNK, w - x0)
            gather_any(src, base + yy * sh + x0 * sw, sc, sw, n, t0, t1, t2, in_type)
            compute(t0, t1, t2, n, forward, delta, scale)
            o = yy * w + x0
            store_chunk(t0, t1, t2, n, out[o:o + n], out[plane + o:plane + o + n],
                        out[2 * plane + o:2 * plane + o + n], out_type)


# Entry points on the tensors' addresses (_storage.py): src spans src_n elements of the input's
# FLAT_DTYPE from pixel (0, 0) of image 0, dst holds the n_img contiguous outputs.
@njit(cache=True)
def convert_u8_at(src, src_n, dst, n_img, sn, h, w, sc, sh, sw, forward):
    s, size = array_at(src, src_n, np.uint8), 3 * h * w
    out = array_at(dst, n_img * size, np.uint8)
    for i in range(n_img):
        o = out[i * size:(i + 1) * size]
        if forward:
            t = np.empty(CHUNK, np.uint8), np.empty(CHUNK, np.uint8), np.empty(CHUNK, np.uint8)
            rows_u8(s, i * sn, h, w, sc, sh, sw, o, True, t[0], t[1], t[2])
        else:
            t = np.empty(CHUNK, np.int32), np.empty(CHUNK, np.int32), np.empty(CHUNK, np.int32)
            rows_u8(s, i * sn, h, w, sc, sh, sw, o, False, t[0], t[1], t[2])


@njit(cache=True)
def convert_float_at(src, src_n, src_dtype, dst, dst_dtype, n_img, sn, h, w, sc, sh, sw, in_type, out_type,
                     forward, delta, scale):
    s, size = array_at(src, src_n, src_dtype), 3 * h * w
    out = array_at(dst, n_img * size, dst_dtype)
    for i in range(n_img):
        rows_float(s, i * sn, h, w, sc, sh, sw, out[i * size:(i + 1) * size], in_type, out_type, forward,
                   np.float32(delta), np.float32(scale))


def _convert(op, img, layout, out_dtype, scale, forward):
    v, odt = check_color(op, img, layout, out_dtype, scale)
    out = checks.new_output(op, img, out_shape(v), odt, checks.shape_source("img", img))
    if out.numel() == 0:
        return out
    in_type, out_type = TYPE_CODE[img.dtype], TYPE_CODE[odt]
    if out_type == U8:  # uint8 in and out: the exact integer formulas
        convert_u8_at(img.data_ptr(), span_count(img), out.data_ptr(), v.n, v.sn, v.h, v.w, v.sc, v.sh, v.sw,
                      forward)
    else:  # delta and scale go in as float64 and become float32 in the entry (faster to type)
        convert_float_at(img.data_ptr(), span_count(img), FLAT_DTYPE[img.dtype], out.data_ptr(), FLAT_DTYPE[odt],
                         v.n, v.sn, v.h, v.w, v.sc, v.sh, v.sw, in_type, out_type, forward,
                         128.0 if in_type == U8 else 0.5, float(scale))
    return out


def rgb_to_ycbcr(img, layout="CHW", out_dtype=None, scale=1.0):
    return _convert("rgb_to_ycbcr", img, layout, out_dtype, scale, True)


def ycbcr_to_rgb(img, layout="CHW", out_dtype=None, scale=1.0):
    return _convert("ycbcr_to_rgb", img, layout, out_dtype, scale, False)
