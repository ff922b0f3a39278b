"""Numba mirror of csrc/kernels/color.cpp (kernels, fp16/bf16 bit conversions) and
csrc/ops/color.cpp (binding). Same integer formulas, same float32 operations in the same order."""

from __future__ import annotations

import numpy as np
import torch
from numba import njit

from fastprep.ops.color import check_color

U8, F32, F16, BF16 = 0, 1, 2, 3
_TYPE_CODE = {torch.uint8: U8, torch.float32: F32, torch.float16: F16, torch.bfloat16: BF16}
_FLAT = {torch.uint8: torch.uint8, torch.float32: torch.float32, torch.float16: torch.int16,
         torch.bfloat16: torch.int16}


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
        payload = (a >> np.uint32(13)) & np.uint32(0x3FF)
        return np.uint16(sign | np.uint32(0x7C00) | (payload if payload != 0 else np.uint32(1)))
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


@njit(cache=True, inline="always")
def div_clamped(n, d, s, m):
    """floor(n / d) for n clamped to [0, 256 d), as (n m) >> s (see color.cpp for why exact)."""
    c = min(max(n, 0), 256 * d - 1)
    return np.uint8((np.uint64(c) * np.uint64(m)) >> np.uint64(s))


@njit(cache=True, inline="always")
def rgb_to_ycbcr_u8(r, g, b):
    return (div_clamped(299 * r + 587 * g + 114 * b + 500, 1000, 26, 67109),
            div_clamped(-5273 * r - 10352 * g + 15625 * b + 4015625, 31250, 37, 4398047),
            div_clamped(15625 * r - 13084 * g - 2541 * b + 4015625, 31250, 37, 4398047))


@njit(cache=True, inline="always")
def ycbcr_to_rgb_u8(y, cb, cr):
    cb -= 128
    cr -= 128
    return (div_clamped(500 * y + 250 + 701 * cr, 500, 25, 67109),
            div_clamped(125000 * y + 62500 - 43017 * cb - 89267 * cr, 125000, 42, 35184373),
            div_clamped(250 * y + 125 + 443 * cb, 250, 24, 67109))


@njit(cache=True)
def rows_u8(src, base, h, w, sc, sh, sw, out, forward):
    plane = h * w
    for yy in range(h):
        s = base + yy * sh
        o = yy * w
        for x in range(w):
            p = s + x * sw
            a = np.int64(src[p])
            b = np.int64(src[p + sc])
            c = np.int64(src[p + 2 * sc])
            if forward:
                v0, v1, v2 = rgb_to_ycbcr_u8(a, b, c)
            else:
                v0, v1, v2 = ycbcr_to_rgb_u8(a, b, c)
            out[o + x] = v0
            out[plane + o + x] = v1
            out[2 * plane + o + x] = v2


_C = {k: np.float32(v) for k, v in dict(
    yr=0.299, yg=0.587, yb=0.114, br=-0.168736, bg=0.331264, half=0.5, rg=0.418688, rb=0.081312,
    kr=1.402, gb=0.344136, gr=0.714136, kb=1.772).items()}
YR, YG, YB, BR, BG, HALF, RG, RB = (_C[k] for k in ("yr", "yg", "yb", "br", "bg", "half", "rg", "rb"))
KR, GB, GR, KB = (_C[k] for k in ("kr", "gb", "gr", "kb"))


@njit(cache=True, inline="always")
def load(src, i, in_type):
    if in_type == F16:
        return half_bits_to_float(src[i])
    if in_type == BF16:
        return bf16_bits_to_float(src[i])
    return np.float32(src[i])


@njit(cache=True, inline="always")
def store(out, i, v, out_type):
    if out_type == F16:
        out[i] = float_to_half_bits(v)
    elif out_type == BF16:
        out[i] = float_to_bf16_bits(v)
    else:
        out[i] = v


# The operations of color.cpp, in its order: `-0.168736f * r - ...` is (-c) * r.
@njit(cache=True, inline="always")
def rgb_to_ycbcr_f(r, g, b, delta):
    return (YR * r + YG * g + YB * b,
            BR * r - BG * g + HALF * b + delta,
            HALF * r - RG * g - RB * b + delta)


@njit(cache=True, inline="always")
def ycbcr_to_rgb_f(y, cb, cr, delta):
    return (y + KR * (cr - delta),
            y - GB * (cb - delta) - GR * (cr - delta),
            y + KB * (cb - delta))


@njit(cache=True)
def rows_float(src, base, h, w, sc, sh, sw, out, in_type, out_type, forward, delta, scale):
    plane = h * w
    for yy in range(h):
        s = base + yy * sh
        o = yy * w
        for x in range(w):
            p = s + x * sw
            r = load(src, p, in_type)
            g = load(src, p + sc, in_type)
            b = load(src, p + 2 * sc, in_type)
            if forward:
                v0, v1, v2 = rgb_to_ycbcr_f(r, g, b, delta)
            else:
                v0, v1, v2 = ycbcr_to_rgb_f(r, g, b, delta)
            store(out, o + x, v0 * scale, out_type)
            store(out, plane + o + x, v1 * scale, out_type)
            store(out, 2 * plane + o + x, v2 * scale, out_type)


def _flat(t: torch.Tensor) -> np.ndarray:
    return t.view(_FLAT[t.dtype]).numpy().reshape(-1)


def _convert(op, img, layout, out_dtype, scale, forward):
    from fastprep.numba_kernels.crop import storage_span  # noqa: PLC0415 (avoids an import cycle)

    v, odt = check_color(op, img, layout, out_dtype, scale)
    out = img.new_empty(([v.n] if v.batched else []) + [3, v.h, v.w], dtype=odt)
    if out.numel() == 0:
        return out
    src = storage_span(img).view(_flat(img[:0]).dtype)
    flat = _flat(out)
    in_type, out_type = _TYPE_CODE[img.dtype], _TYPE_CODE[odt]
    delta = np.float32(128.0 if in_type == U8 else 0.5)
    for i in range(v.n):
        o = flat[i * 3 * v.h * v.w:(i + 1) * 3 * v.h * v.w]
        if out_type == U8:
            rows_u8(src, i * v.sn, v.h, v.w, v.sc, v.sh, v.sw, o, forward)
        else:
            rows_float(src, i * v.sn, v.h, v.w, v.sc, v.sh, v.sw, o, in_type, out_type, forward,
                       delta, np.float32(scale))
    return out


def rgb_to_ycbcr(img, layout="CHW", out_dtype=None, scale=1.0):
    return _convert("rgb_to_ycbcr", img, layout, out_dtype, scale, True)


def ycbcr_to_rgb(img, layout="CHW", out_dtype=None, scale=1.0):
    return _convert("ycbcr_to_rgb", img, layout, out_dtype, scale, False)
