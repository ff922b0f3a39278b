"""Numba mirror of csrc/kernels/resize.cpp, resize_weights.cpp (kernel) and csrc/ops/resize.cpp
(binding): the same double arithmetic for the weights, the same integer passes on 16-row blocks
(the transposes and the taps' sums as LLVM vector IR, _byte_vectors.py), the same float32 operations
for float outputs."""

from __future__ import annotations

import math

import numpy as np

import fastprep.ops._checks as checks
from fastprep.numba_kernels._byte_vectors import transpose16, weighted_sum16
from fastprep.numba_kernels._cache import njit
from fastprep.numba_kernels._color import BF16, F16, TYPE_CODE, U8
from fastprep.numba_kernels._float_bits import float_to_bf16_bits, float_to_half_bits
from fastprep.numba_kernels._storage import FLAT_DTYPE, UINDEX, array_at, span_count
from fastprep.ops._resize_checks import check_resized_crop, check_resized_crop_batch, out_shape

# Source rows per horizontal block, as resize.cpp's kBlock: one 16-byte vector a tile column.
BLOCK = 16
# Where row i of a 16 x 16 block of the tile (or tile_out) starts: the transposes' rows there.
TILE_ROWS = np.arange(BLOCK, dtype=np.int64) * BLOCK


@njit(cache=True, inline="always")
def triangle(x):
    x = abs(x)
    return 1.0 - x if x < 1.0 else 0.0


@njit(cache=True)
def resample_axis(size, full, antialias, reverse, first, n):
    """resize_weights.cpp's resample_axis: outputs [first, first + n) of size -> full, as
    (start, count, w [n * taps], taps, precision); the precision is the whole table's."""
    start, count = np.empty(n, np.int64), np.empty(n, np.int64)
    if size == full:
        for i in range(n):
            at = n - 1 - i if reverse else i
            start[at], count[at] = first + i, 1
        return start, count, np.full(n, np.int32(1 << 14)), 1, 14
    scale = size / full
    support = scale if antialias and scale >= 1.0 else 1.0
    taps = int(math.ceil(support)) * 2 + 1 if antialias else 2
    w = np.zeros(full * taps)
    xmins, xsizes = np.empty(full, np.int64), np.empty(full, np.int64)
    wt_max = 0.0
    for i in range(full):
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
        xmins[i], xsizes[i] = xmin, xsize
    precision = 0
    while precision < 22 and int(0.5 + wt_max * (1 << (precision + 1))) < (1 << 15):
        precision += 1
    wi = np.zeros(n * taps, np.int32)
    for i in range(n):
        src, at = first + i, n - 1 - i if reverse else i
        start[at], count[at] = xmins[src], xsizes[src]
        for k in range(xsizes[src]):
            v = w[src * taps + k] * (1 << precision)
            wi[at * taps + k] = np.int16(int(-0.5 + v) if v < 0 else int(0.5 + v))
    return start, count, wi, taps, precision


@njit(cache=True)
def narrow_axis(start, count, extent):
    """resize_weights.cpp's narrow_axis: (first input read, inputs read); the starts shifted by the first."""
    lo, hi = extent, 0
    for i in range(start.shape[0]):
        lo, hi = min(lo, start[i]), max(hi, start[i] + count[i])
    if lo >= hi:
        return 0, extent
    for i in range(start.shape[0]):
        start[i] -= lo
    return lo, hi - lo


@njit(cache=True)
def narrowed_axis(size, full, antialias, reverse, first, n):
    """resize.h's NarrowedAxis: resample_axis's table narrowed to the inputs it reads, as (table,
    first input read, inputs read)."""
    table = resample_axis(size, full, antialias, reverse, first, n)
    first_read, extent = narrow_axis(table[0], table[1], size)
    return table, first_read, extent


@njit(cache=True, inline="always")
def saturate(acc, shift):
    """resize_simd.h's saturate: the sum shifted down, clamped to [0, 255]."""
    v = acc >> shift
    return np.uint8(0 if v < 0 else (255 if v > 255 else v))


@njit(cache=True)
def fill_tile(src, base, c, width, sc, sh, sw, r0, n, tile, src_rows):
    """resize.cpp's tile: tile[(col * pix + ch * chan) * BLOCK + r] holds channel ch of column col of
    row r0 + r (rows past n repeat row n - 1); packed or planar rows by 16 x 16 transposes."""
    packed = sc == 1 and sw == c
    if packed or sw == 1:
        planes, nbytes = (1, width * c) if packed else (c, width)
        for p in range(planes):
            for r in range(BLOCK):
                src_rows[r] = base + (r0 + min(r, n - 1)) * sh + p * sc
            t0, whole = p * nbytes * BLOCK, nbytes - nbytes % BLOCK
            for b in range(0, whole, BLOCK):
                transpose16(src, src_rows, b, tile, TILE_ROWS, t0 + b * BLOCK)
            for b in range(whole, nbytes):
                for r in range(BLOCK):
                    tile[t0 + b * BLOCK + r] = src[src_rows[r] + b]
        return
    for ch in range(c):
        for x in range(width):
            col, p = (ch * width + x) * BLOCK, base + x * sw + ch * sc
            for r in range(BLOCK):
                tile[col + r] = src[p + (r0 + min(r, n - 1)) * sh]


@njit(cache=True)
def horizontal_block(src, base, c, width, sc, sh, sw, r0, n, cols, scratch, ring, cap):
    """resize.cpp's HorizontalBlock: rows [r0, r0 + n) into the ring of H rows (row r at
    (r % cap) * c * out_w; cap a multiple of BLOCK, so a block's rows are consecutive there)."""
    start, count, w, taps, precision = cols
    tile, tile_out, src_rows, ring_rows, col_taps = scratch
    out_w = start.shape[0]
    fill_tile(src, base, c, width, sc, sh, sw, r0, n, tile, src_rows)
    packed = sc == 1 and sw == c
    pix, chan = (c, 1) if packed else (1, width)
    for k in range(taps):
        col_taps[k] = k * pix * BLOCK
    for ch in range(c):
        for x in range(out_w):
            weighted_sum16(tile, col_taps, (start[x] * pix + ch * chan) * BLOCK, w, x * taps, count[x], precision,
                           tile_out, (ch * out_w + x) * BLOCK)
    m_total = c * out_w
    for r in range(BLOCK):
        ring_rows[r] = (r0 % cap + r) * m_total
    whole = m_total - m_total % BLOCK
    for m in range(0, whole, BLOCK):
        transpose16(tile_out, TILE_ROWS, m * BLOCK, ring, ring_rows, m)
    # The transposes write all BLOCK rows. Past n, those are the slots of rows past the window, which
    # held rows cap earlier: no output row reads those any more.
    for m in range(whole, m_total):
        for r in range(n):
            ring[ring_rows[r] + m] = tile_out[m * BLOCK + r]


@njit(cache=True)
def row_taps_plain(ring, row_taps, at, w, w_at, count, precision, dst, d, n):
    """resize_simd.h's row_taps_plain: dst[d + x] for x < n, outputs shorter than a vector."""
    half, shift = np.int32(1 << (precision - 1)), np.int32(precision)
    for x in range(n):
        acc = half
        for k in range(count):
            acc = np.int32(acc + np.int32(w[w_at + k]) * np.int32(ring[row_taps[k] + at + x]))
        dst[d + x] = saturate(acc, shift)


@njit(cache=True, inline="always")
def vertical_row(rows, y, ring, cap, c, out_w, row_taps, sums, fbuf, out, out_type, scale, mean, std, vflip,
                 transpose):
    """resize.cpp's VerticalRow: output row y of every channel (at out_h - 1 - y with vflip; column y
    of a [c, out_w, out_h] output with transpose); the sums into `sums`, which is the output's bytes
    for a uint8 output not transposed, else a row that the output reads. Inlined: a call a row
    costs ~5 us an image in its arrays' reference counts."""
    start, count, w, taps, precision = rows
    out_h, m_total = start.shape[0], c * out_w
    out_y = out_h - 1 - y if vflip else y
    for k in range(count[y]):
        row_taps[k] = ((start[y] + k) % cap) * m_total
    for ch in range(c):
        o = (ch * out_h + out_y) * out_w
        d = o if out_type == U8 and not transpose else 0
        if out_w < BLOCK:
            row_taps_plain(ring, row_taps, ch * out_w, w, y * taps, count[y], precision, sums, d, out_w)
        for x in range(0, out_w if out_w >= BLOCK else 0, BLOCK):
            x = min(x, out_w - BLOCK)  # the last vector ends at out_w (the outputs it repeats are equal)
            weighted_sum16(ring, row_taps, ch * out_w + x, w, y * taps, count[y], precision, sums, d + x)
        if transpose:  # element x of the row is (x, out_y) of the transposed plane: a column
            t = ch * out_h * out_w + out_y
            if out_type == U8:
                for x in range(out_w):
                    out[t + x * out_h] = sums[x]
                continue
            float_row(sums, scale, mean, std, ch, fbuf, 0)
            if out_type == F16:
                for x in range(out_w):
                    out[t + x * out_h] = float_to_half_bits(fbuf[x])
            elif out_type == BF16:
                for x in range(out_w):
                    out[t + x * out_h] = float_to_bf16_bits(fbuf[x])
            else:
                for x in range(out_w):
                    out[t + x * out_h] = fbuf[x]
            continue
        if out_type == U8:
            continue
        if out_type != F16 and out_type != BF16:
            float_row(sums, scale, mean, std, ch, out, o)
            continue
        float_row(sums, scale, mean, std, ch, fbuf, 0)  # the float32 values, then their rounding
        if out_type == F16:
            for x in range(out_w):
                out[UINDEX(o) + UINDEX(x)] = float_to_half_bits(fbuf[x])
        else:
            for x in range(out_w):
                out[UINDEX(o) + UINDEX(x)] = float_to_bf16_bits(fbuf[x])


@njit(cache=True, inline="always")
def float_row(row, scale, mean, std, ch, dst, d):
    """dst[d + x] = float32(row[x]) * scale, then (that - mean[ch]) / std[ch] when mean is given
    (resize.cpp). Indices, not a slice a row (a slice is an atomic reference-count pair: ~9 us an
    image), unsigned so that LLVM vectorises; mean and std read once, as a store might change them."""
    at = UINDEX(d)
    if mean.shape[0] == 0:
        for x in range(row.shape[0]):
            dst[at + UINDEX(x)] = np.float32(row[x]) * scale
        return
    m, sd = mean[ch], std[ch]
    for x in range(row.shape[0]):
        dst[at + UINDEX(x)] = (np.float32(row[x]) * scale - m) / sd


@njit(cache=True)
def resized_crop_at(src, src_n, dst, dst_n, dst_dtype, base, obase, c, height, width, sc, sh, sw, rows, cols,
                    out_type, scale, mean, std, vflip, transpose):
    """One image on tensors' addresses (_storage.py): the height x width inputs its narrowed tables
    read (element (0, 0, 0) at `base` of the src_n bytes) into the [c, out_h, out_w] output at
    element `obase` of dst (out_h, out_w: the tables' lengths). As resize.cpp's resized_crop."""
    out_h, out_w = rows[0].shape[0], cols[0].shape[0]
    s, out = array_at(src, src_n, np.uint8), array_at(dst, dst_n, dst_dtype)[obase:obase + c * out_h * out_w]
    max_count = rows[1].max()
    cap = (max_count + 2 * BLOCK - 1) // BLOCK * BLOCK  # the rows an output row reads, and a block
    scratch = (np.empty(c * width * BLOCK, np.uint8), np.empty(c * out_w * BLOCK, np.uint8), np.empty(BLOCK, np.int64),
               np.empty(BLOCK, np.int64), np.empty(cols[3], np.int64))
    ring, row_taps = np.empty(cap * c * out_w, np.uint8), np.empty(max_count, np.int64)
    # The vertical sums: a uint8 output's own bytes (not transposed), else a row.
    sums = array_at(dst, dst_n, np.uint8)[obase:] if out_type == U8 and not transpose else np.empty(out_w, np.uint8)
    fbuf = np.empty(out_w, np.float32)
    done = 0
    for y in range(out_h):
        need = rows[0][y] + rows[1][y]
        while done < need:
            horizontal_block(s, base, c, width, sc, sh, sw, done, min(BLOCK, height - done), cols, scratch, ring, cap)
            done += BLOCK
        vertical_row(rows, y, ring, cap, c, out_w, row_taps, sums, fbuf, out, out_type, np.float32(scale), mean, std,
                     vflip, transpose)


# The columns of resized_images' rows: one image each.
(ADDRESS, SPAN, BASE, HEIGHT, WIDTH, SC, SH, SW, HFLIP, FULL_H, FULL_W, OUT_TOP, OUT_LEFT, VFLIP, OBASE,
 TRANSPOSE) = range(16)


@njit(cache=True)
def resized_images(images, dst, dst_n, dst_dtype, c, out_h, out_w, antialias, out_type, scale, mean, std):
    """resize.cpp's loop of run_image: one image a row of `images` (its source's address and
    elements, its window's first element, size and strides, hflip, placement, output's first
    element, transpose: written as out_w x out_h, its rows as columns; the columns above). Each
    axis's narrowed table is kept while the next image asks for the same one, as resize.h's
    AxisCache (a batch of equal windows and placements builds it once)."""
    rows, cols = narrowed_axis(1, 1, antialias, False, 0, 1), narrowed_axis(1, 1, antialias, False, 0, 1)
    rows_key, cols_key = (-1, -1, -1, -1), (-1, -1, -1, -1)
    for i in range(images.shape[0]):
        im = images[i]
        turned = im[TRANSPOSE] != 0
        n_rows, n_cols = (out_w, out_h) if turned else (out_h, out_w)
        key = (im[HEIGHT], im[FULL_H], n_rows, im[OUT_TOP])
        if key != rows_key:
            rows, rows_key = narrowed_axis(im[HEIGHT], im[FULL_H], antialias, False, im[OUT_TOP], n_rows), key
        key = (im[WIDTH], im[FULL_W], im[HFLIP] * (1 << 32) + n_cols, im[OUT_LEFT])
        if key != cols_key:
            cols, cols_key = narrowed_axis(im[WIDTH], im[FULL_W], antialias, im[HFLIP] != 0, im[OUT_LEFT], n_cols), key
        # Only the rows and columns the outputs read.
        table_rows, first_row, height = rows
        table_cols, first_col, width = cols
        base = im[BASE] + first_row * im[SH] + first_col * im[SW]
        resized_crop_at(im[ADDRESS], im[SPAN], dst, dst_n, dst_dtype, base, im[OBASE], c, height, width, im[SC], im[SH],
                        im[SW], table_rows, table_cols, out_type, scale, mean, std, im[VFLIP] != 0, turned)


def _stats(a) -> tuple[np.ndarray, np.ndarray]:
    empty = np.empty(0, np.float32)
    return (empty, empty) if a.mean is None else (np.array(a.mean, np.float32), np.array(a.std, np.float32))


def _image(img, v, i, window, hflip, p, obase, transpose=False) -> list[int]:
    """Image i of img (its view v), its window placed at p, as a row of resized_images' images."""
    top, left, height, width = window
    return [img.data_ptr(), span_count(img), i * v.sn + top * v.sh + left * v.sw, height, width, v.sc, v.sh, v.sw,
            int(bool(hflip)), p.height, p.width, p.top, p.left, int(bool(p.vflip)), obase, int(bool(transpose))]


def _run(images, out, c, out_h, out_w, antialias, scale, a) -> None:
    resized_images(np.array(images, np.int64).reshape(-1, 16), out.data_ptr(), out.numel(), FLAT_DTYPE[out.dtype], c,
                   out_h, out_w, bool(antialias), TYPE_CODE[out.dtype], np.float32(scale), *_stats(a))


def resized_crop(img, top, left, height, width, out_height, out_width, layout="CHW", hflip=False, antialias=True,
                 out_dtype=None, scale=1.0, mean=None, std=None, vflip=False, resized_height=0, resized_width=0,
                 out_top=0, out_left=0):
    v, a, p = check_resized_crop(img, top, left, height, width, out_height, out_width, layout, out_dtype, scale, mean,
                                 std, vflip, resized_height, resized_width, out_top, out_left)
    out = checks.new_output("resized_crop", img, out_shape(v, out_height, out_width), a.dtype,
                            lambda: f"out_height={out_height}, out_width={out_width}")
    if out.numel() == 0:
        return out
    images = [_image(img, v, i, (top, left, height, width), hflip, p, i * v.c * out_height * out_width)
              for i in range(v.n)]
    _run(images, out, v.c, out_height, out_width, antialias, scale, a)
    return out


def resized_crop_batch(imgs, geometry, out, layout="CHW", antialias=True, scale=1.0, mean=None, std=None):
    views, a, rows = check_resized_crop_batch(imgs, geometry, out, layout, scale, mean, std)
    _, c, out_h, out_w = out.shape
    if c == 0:
        return
    images = [_image(img, v, 0, r[:4], r.hflip, r.place, i * c * out_h * out_w, r.transpose)
              for i, (img, v, r) in enumerate(zip(imgs, views, rows))]
    _run(images, out, c, out_h, out_w, antialias, scale, a)
