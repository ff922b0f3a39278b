"""Numba mirror of csrc/kernels/resize.cpp, resize_weights.cpp (kernel) and csrc/ops/resize.cpp
(binding): the same double arithmetic for the weights, the same integer passes on 16-row blocks,
the same float32 operations for float outputs."""

from __future__ import annotations

import math

import numpy as np

from fastprep.numba_kernels._cache import njit
from fastprep.numba_kernels.color import BF16, F16, TYPE_CODE, U8
from fastprep.numba_kernels.float_bits import float_to_bf16_bits, float_to_half_bits
from fastprep.numba_kernels.storage import FLAT_DTYPE, array_at, span_count
from fastprep.ops import checks
from fastprep.ops.resize import check_resized_crop, check_resized_crop_batch, out_shape

# Source rows per horizontal block. resize.cpp takes 16 (a vector of a column's rows); LLVM vectorises
# the taps' loop over a block's rows only when it is longer, and the tile's column-by-column fill
# (strided reads) slows down past 32 rows. Zen 4, 600x700 -> 224^2: 16 rows 1275 us, 32 1034, 48 1385.
BLOCK = 32
UINDEX = np.uint64  # storage.UINDEX: an index LLVM knows is non-negative


@njit(cache=True, inline="always")
def triangle(x):
    x = abs(x)
    return 1.0 - x if x < 1.0 else 0.0


@njit(cache=True)
def resample_axis(size, out, antialias, reverse):
    """resize_weights.cpp's resample_axis: (start, count, w [out * taps], taps, precision)."""
    start, count = np.empty(out, np.int64), np.empty(out, np.int64)
    if size == out:
        for i in range(out):
            start[out - 1 - i if reverse else i], count[i] = i, 1
        return start, count, np.full(out, np.int32(1 << 14)), 1, 14
    scale = size / out
    support = scale if antialias and scale >= 1.0 else 1.0
    taps = int(math.ceil(support)) * 2 + 1 if antialias else 2
    w = np.zeros(out * taps)
    wt_max = 0.0
    for i in range(out):
        o = i * taps
        if antialias:
            center = scale * (i + 0.5)
            invscale = 1.0 / scale if scale >= 1.0 else 1.0
            xmin = max(int(center - support + 0.5), 0)
            xsize = min(max(min(int(center + support + 0.5), size) - xmin, 0), taps)
            total = 0.0
            for j in range(xsize):
                w[o + j] = triangle((float(j + xmin) - center + 0.5) * invscale)
                total += w[o + j]
            if total != 0.0:
                for j in range(xsize):
                    w[o + j] /= total
                    wt_max = max(wt_max, w[o + j])
        else:
            real = max(scale * (i + 0.5) - 0.5, 0.0)
            xmin = min(int(math.floor(np.float32(real))), size - 1)
            lam = min(max(real - xmin, 0.0), 1.0)
            xsize = min(max(min(xmin + 2, size) - xmin, 0), 2)
            k = 0
            for j in range(2):
                w[o + j] = 0.0
                v = triangle(float(j) - lam)
                if xmin + j <= 0:
                    k = 0
                elif xmin + j >= size - 1:
                    k = xsize - 1
                w[o + k] += v
                wt_max = max(wt_max, w[o + k])
                k += 1
        at = out - 1 - i if reverse else i
        start[at], count[at] = xmin, xsize
    precision = 0
    while precision < 22 and int(0.5 + wt_max * (1 << (precision + 1))) < (1 << 15):
        precision += 1
    wi = np.zeros(out * taps, np.int32)
    for i in range(out):
        at = out - 1 - i if reverse else i
        for k in range(count[at]):
            v = w[i * taps + k] * (1 << precision)
            wi[at * taps + k] = np.int16(int(-0.5 + v) if v < 0 else int(0.5 + v))
    return start, count, wi, taps, precision


@njit(cache=True, inline="always")
def saturate(acc, shift):
    """resize_simd.h's saturate: the sum shifted down, clamped to [0, 255]."""
    v = acc >> shift
    return np.uint8(0 if v < 0 else (255 if v > 255 else v))


@njit(cache=True)
def horizontal_block(src, base, c, width, sc, sh, sw, r0, n, cols, tile, tile_out, ring, cap):
    """resize.cpp's HorizontalBlock: rows [r0, r0 + n) into the ring of H rows, on a tile of
    BLOCK rows a column (tile[(col * pix + ch * chan) * BLOCK + r])."""
    start, count, w, taps, precision = cols
    out_w = start.shape[0]
    packed = sc == 1 and sw == c
    pix, chan = (c, 1) if packed else (1, width)
    for ch in range(c):  # a column's rows at a time: contiguous writes, the reads a row apart
        for x in range(width):
            col = (x * pix + ch * chan) * BLOCK
            t, p = tile[col:col + n], UINDEX(base + r0 * sh + x * sw + ch * sc)
            for r in range(n):
                t[r] = src[p + UINDEX(r) * UINDEX(sh)]
    half, shift = np.int32(1 << (precision - 1)), np.int32(precision)
    acc = np.empty(n, np.int32)
    for ch in range(c):
        for x in range(out_w):
            for r in range(n):
                acc[r] = half
            t = UINDEX((start[x] * pix + ch * chan) * BLOCK)
            for k in range(count[x]):
                wk, col = np.int32(w[x * taps + k]), t + UINDEX(k * pix * BLOCK)
                for r in range(n):
                    acc[r] = np.int32(acc[r] + wk * np.int32(tile[col + UINDEX(r)]))
            o = UINDEX((ch * out_w + x) * BLOCK)
            for r in range(n):
                tile_out[o + UINDEX(r)] = saturate(acc[r], shift)
    m_total = c * out_w
    rows = np.empty(n, np.uint64)
    for r in range(n):
        rows[r] = ((r0 + r) % cap) * m_total
    for m in range(m_total):
        t = tile_out[m * BLOCK:m * BLOCK + n]
        for r in range(n):
            ring[rows[r] + UINDEX(m)] = t[r]


@njit(cache=True)
def vertical_row(rows, y, ring, cap, c, out_w, acc, fbuf, out, out_type, scale, mean, std):
    """resize.cpp's VerticalRow: output row y of every channel."""
    start, count, w, taps, precision = rows
    out_h, m_total = start.shape[0], c * out_w
    half, shift = np.int32(1 << (precision - 1)), np.int32(precision)
    for ch in range(c):
        for x in range(out_w):
            acc[x] = half
        for k in range(count[y]):
            wk, h = np.int32(w[y * taps + k]), ((start[y] + k) % cap) * m_total + ch * out_w
            hrow = ring[h:h + out_w]
            for x in range(out_w):
                acc[x] = np.int32(acc[x] + wk * np.int32(hrow[x]))
        o = out[(ch * out_h + y) * out_w:(ch * out_h + y + 1) * out_w]
        if out_type == U8:
            for x in range(out_w):
                o[x] = saturate(acc[x], shift)
            continue
        for x in range(out_w):  # the float32 values first, in a loop LLVM vectorises
            f = np.float32(saturate(acc[x], shift)) * scale
            fbuf[x] = (f - mean[ch]) / std[ch] if mean.shape[0] > 0 else f
        if out_type == F16:
            for x in range(out_w):
                o[x] = float_to_half_bits(fbuf[x])
        elif out_type == BF16:
            for x in range(out_w):
                o[x] = float_to_bf16_bits(fbuf[x])
        else:
            for x in range(out_w):
                o[x] = fbuf[x]


@njit(cache=True)
def resized_crop_at(src, src_n, dst, dst_n, dst_dtype, base, obase, c, height, width, sc, sh, sw, out_h, out_w,
                    antialias, hflip, out_type, scale, mean, std):
    """One image on tensors' addresses (storage.py): its window (element (0, 0, 0) at `base` of the
    src_n bytes) into the [c, out_h, out_w] output at element `obase` of dst. As run_image."""
    s, out = array_at(src, src_n, np.uint8), array_at(dst, dst_n, dst_dtype)[obase:obase + c * out_h * out_w]
    rows = resample_axis(height, out_h, antialias, False)
    cols = resample_axis(width, out_w, antialias, hflip)
    cap = rows[1].max() + BLOCK
    tile, tile_out = np.empty(c * width * BLOCK, np.uint8), np.empty(c * out_w * BLOCK, np.uint8)
    ring, acc, fbuf = np.empty(cap * c * out_w, np.uint8), np.empty(out_w, np.int32), np.empty(out_w, np.float32)
    done = 0
    for y in range(out_h):
        need = rows[0][y] + rows[1][y]
        while done < need:
            horizontal_block(s, base, c, width, sc, sh, sw, done, min(BLOCK, height - done), cols, tile, tile_out,
                             ring, cap)
            done += BLOCK
        vertical_row(rows, y, ring, cap, c, out_w, acc, fbuf, out, out_type, np.float32(scale), mean, std)


def _stats(a) -> tuple[np.ndarray, np.ndarray]:
    empty = np.empty(0, np.float32)
    return (empty, empty) if a.mean is None else (np.array(a.mean, np.float32), np.array(a.std, np.float32))


def _run(img, v, i, window, out, obase, out_h, out_w, hflip, antialias, scale, stats) -> None:
    top, left, height, width = window
    resized_crop_at(img.data_ptr(), span_count(img), out.data_ptr(), out.numel(), FLAT_DTYPE[out.dtype],
                    i * v.sn + top * v.sh + left * v.sw, obase, v.c, height, width, v.sc, v.sh, v.sw, out_h, out_w,
                    antialias, hflip, TYPE_CODE[out.dtype], scale, *stats)


def resized_crop(img, top, left, height, width, out_height, out_width, layout="CHW", hflip=False, antialias=True,
                 out_dtype=None, scale=1.0, mean=None, std=None):
    v, a = check_resized_crop(img, top, left, height, width, out_height, out_width, layout, out_dtype, scale, mean,
                              std)
    out = checks.new_output("resized_crop", img, out_shape(v, out_height, out_width), a.dtype,
                            lambda: f"out_height={out_height}, out_width={out_width}")
    if out.numel() == 0:
        return out
    for i in range(v.n):
        _run(img, v, i, (top, left, height, width), out, i * v.c * out_height * out_width, out_height, out_width,
             bool(hflip), bool(antialias), scale, _stats(a))
    return out


def resized_crop_batch(imgs, tops, lefts, heights, widths, out, layout="CHW", hflips=None, antialias=True, scale=1.0,
                       mean=None, std=None):
    views, a = check_resized_crop_batch(imgs, tops, lefts, heights, widths, out, layout, hflips, scale, mean, std)
    _, c, out_h, out_w = out.shape
    if c == 0:
        return
    stats = _stats(a)
    for i, (img, v) in enumerate(zip(imgs, views)):
        _run(img, v, 0, (tops[i], lefts[i], heights[i], widths[i]), out, i * c * out_h * out_w, out_h, out_w,
             bool(hflips and hflips[i]), bool(antialias), scale, stats)

