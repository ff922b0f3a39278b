"""Numba mirror of csrc/kernels/crop_mask_ycbcr.cpp (kernel) and csrc/ops/crop_mask_ycbcr.cpp
(binding): the same window, mask and colour arithmetic as the composed ops."""

from __future__ import annotations

import numpy as np
import torch

import fastprep.ops._checks as checks
from fastprep.numba_kernels._cache import njit
from fastprep.numba_kernels._color import CHUNK, TYPE_CODE, U8, compute, rgb_to_ycbcr_chunk_u8, store_chunk
from fastprep.numba_kernels._crop import flipped
from fastprep.numba_kernels._random_mask import random_dilated_mask_kernel
from fastprep.numba_kernels._storage import FLAT_DTYPE, UINDEX, array_at, pixel_row, prefetch, span_count
from fastprep.ops._crop import crop_window
from fastprep.ops._crop_mask_ycbcr import check_crop_mask_ycbcr, check_crop_mask_ycbcr_batch, mask_seed_of


@njit(cache=True, inline="always")
def gather_pixels(s, sc, step, n, flip, mm, apply_mask, t0, t1, t2):
    """n pixels of s (pixel i at i * step, channels sc apart; from the end when flip) into the
    temporaries, masked pixels as zero (mask_fill's value, branch-free: keep is 0 on masked pixels
    and 0xFF elsewhere). Planar rows read a slice per plane: indexed from one slice at a runtime
    plane offset, LLVM left the loop scalar (CHW took 5x the time of HWC). The indices are unsigned:
    counting down as signed ones, each read had a wraparound test and nothing vectorised."""
    if step == 1:
        s0, s1, s2 = s[0:n], s[sc:sc + n], s[2 * sc:2 * sc + n]
        for i in range(n):
            q = UINDEX(n - 1 - i if flip else i)
            keep = np.uint8(0 if apply_mask and mm[i] else 0xFF)
            t0[i], t1[i], t2[i] = s0[q] & keep, s1[q] & keep, s2[q] & keep
    else:
        for i in range(n):
            q = UINDEX((n - 1 - i if flip else i) * step)
            keep = np.uint8(0 if apply_mask and mm[i] else 0xFF)
            t0[i], t1[i], t2[i] = s[q] & keep, s[q + UINDEX(sc)] & keep, s[q + UINDEX(2 * sc)] & keep


@njit(cache=True, inline="always")
def gather_masked(src, p, sc, sw, n, mask, m, apply_mask, t0, t1, t2):
    s, step = pixel_row(src, p, sw, sc, 3, n)
    mm = mask[m:m + n] if apply_mask else mask[0:0]
    # Literal strides for packed HWC and planar rows, each way, so LLVM vectorises the reads.
    if step == 3 and sc == 1:
        if sw < 0:
            gather_pixels(s, 1, 3, n, True, mm, apply_mask, t0, t1, t2)
        else:
            gather_pixels(s, 1, 3, n, False, mm, apply_mask, t0, t1, t2)
    elif step == 1:
        if sw < 0:
            gather_pixels(s, sc, 1, n, True, mm, apply_mask, t0, t1, t2)
        else:
            gather_pixels(s, sc, 1, n, False, mm, apply_mask, t0, t1, t2)
    else:
        gather_pixels(s, sc, step, n, sw < 0, mm, apply_mask, t0, t1, t2)


# Touch the window's row this many rows ahead, as crop_mask_ycbcr.cpp's kPrefetchRows: each row
# starts a new stream one source row away, which the hardware prefetcher picks up late (a pool of
# cold 1024^2 sources: 145 -> 60 us a sample).
PREFETCH_ROWS = 4


@njit(cache=True, inline="always")
def prefetch_row(src, row, width, sw, sc):
    """prefetch_row of crop_mask_ycbcr.cpp: the `width` pixels at `row` (right to left when
    sw < 0), each channel's row when the channels are planes."""
    span = width * (-sw if sw < 0 else sw)
    planar = (-sc if sc < 0 else sc) >= span
    for ch in range(3 if planar else 1):
        lo = row + ch * sc + (width * sw if sw < 0 else 0)
        for i in range(0, span + 63, 64):
            prefetch(src, lo + i)


@njit(cache=True)
def crop_mask_ycbcr_kernel(src, base, sc, sh, sw, top, left, height, width, mask, apply_mask, out,
                           out_type, scale, t0, t1, t2, trow):
    # base: the index of pixel (0, 0) in src (the C++ kernel's data pointer; the last column's
    # (row's) when the read is flipped and sw (sh) < 0). trow: empty, or 3 * width elements: a
    # transposed write (out is [3, width, height]) makes each row there, then copies it into out's
    # column y, as the C++ kernel's trow.
    plane = height * width
    transpose = trow.size > 0
    for y in range(height):
        row = base + (top + y) * sh + left * sw
        if y + PREFETCH_ROWS < height:
            prefetch_row(src, row + PREFETCH_ROWS * sh, width, sw, sc)
        for x0 in range(0, width, CHUNK):
            n = min(CHUNK, width - x0)
            p = row + x0 * sw
            gather_masked(src, p, sc, sw, n, mask, y * width + x0, apply_mask, t0, t1, t2)
            if transpose:
                o0, o1, o2 = trow[x0:x0 + n], trow[width + x0:width + x0 + n], trow[2 * width + x0:2 * width + x0 + n]
            else:
                o = y * width + x0
                o0, o1, o2 = out[o:o + n], out[plane + o:plane + o + n], out[2 * plane + o:2 * plane + o + n]
            if out_type == U8:
                rgb_to_ycbcr_chunk_u8(t0, t1, t2, n, o0, o1, o2)
            else:
                compute(t0, t1, t2, n, True, np.float32(128.0), scale)
                store_chunk(t0, t1, t2, n, o0, o1, o2, out_type)
        if transpose:
            for ch in range(3):
                for x in range(width):
                    out[ch * plane + x * height + y] = trow[ch * width + x]


@njit(cache=True)
def sample_at(src, src_n, dst, dst_dtype, mask_dst, mseed, p, first, sc, sh, sw, top, left, height, width, square,
              apply_mask, out_type, scale, transpose):
    """One sample on tensors' addresses (_storage.py): src spans src_n bytes from the image's first
    element, dst holds its [3, height, width] of dst_dtype (the output's FLAT_DTYPE) and mask_dst,
    when not 0, its packed mask. transpose: the window read is width x height, its rows written
    as the output's columns; the mask, drawn on the output, transposed with it. As run_sample in
    csrc/ops/crop_mask_ycbcr.cpp."""
    if mask_dst != 0:
        random_dilated_mask_kernel(mseed, p, 1, height, width, square, 1, True,
                                   array_at(mask_dst, height * ((width + 7) // 8), np.uint8))
    bools = np.empty(height * width if apply_mask else 0, dtype=np.uint8)
    if apply_mask:
        random_dilated_mask_kernel(mseed, p, 1, height, width, square, 1, False, bools)
        if transpose:  # row y of the read is column y of the output
            bools = np.ascontiguousarray(bools.reshape(height, width).T).reshape(-1)
    rh, rw = (width, height) if transpose else (height, width)
    # Chunk temporaries: uint8 for the exact uint8 output (as rgb_to_ycbcr's), float32 otherwise.
    s, out = array_at(src, src_n, np.uint8), array_at(dst, 3 * height * width, dst_dtype)
    trow = np.empty_like(out[:3 * rw if transpose else 0])  # a transposed write's row, of out's type
    if out_type == U8:
        t0, t1, t2 = np.empty(CHUNK, np.uint8), np.empty(CHUNK, np.uint8), np.empty(CHUNK, np.uint8)
        crop_mask_ycbcr_kernel(s, first, sc, sh, sw, top, left, rh, rw, bools, apply_mask, out, out_type,
                               np.float32(scale), t0, t1, t2, trow)
    else:
        f0, f1, f2 = np.empty(CHUNK, np.float32), np.empty(CHUNK, np.float32), np.empty(CHUNK, np.float32)
        crop_mask_ycbcr_kernel(s, first, sc, sh, sw, top, left, rh, rw, bools, apply_mask, out, out_type,
                               np.float32(scale), f0, f1, f2, trow)


def _run_sample(img, v, height, width, p, top, left, mseed, square, apply_mask, out, odt, scale, mask_dst, hflip,
                vflip=False, transpose=False):
    """One sample, the window at (top, left) of the image (its columns right to left when hflip,
    its rows bottom-up when vflip, width x height and written transposed when transpose), into the
    3 * height * width elements at address `out` and, when mask_dst is not 0, its packed mask
    there. As run_sample in csrc/ops/crop_mask_ycbcr.cpp."""
    rh, rw = (width, height) if transpose else (height, width)
    first, sw = flipped(v, hflip)  # in a flipped read the columns (rows) count from the right (bottom) edge
    first, sh = (first + (v.h - 1) * v.sh, -v.sh) if vflip else (first, v.sh)
    sample_at(img.data_ptr(), span_count(img), out, FLAT_DTYPE[odt], mask_dst, int(mseed), float(p), first,
              v.sc, sh, sw, v.h - top - rh if vflip else top, v.w - left - rw if hflip else left, height, width,
              square, apply_mask, TYPE_CODE[odt], float(scale), bool(transpose))


def crop_mask_ycbcr(img, height, width, p, seed, layout="HWC", structure="cross", out_dtype=None,
                    scale=1.0, apply_mask=True, return_mask=False, mask_seed=None, hflip=False):
    v, odt = check_crop_mask_ycbcr(img, height, width, p, layout, structure, out_dtype, scale)
    # Allocated as in the C++ binding: the image first, then the mask.
    source = lambda: f"height={height}, width={width}"  # noqa: E731
    out = checks.new_output("crop_mask_ycbcr", img, [3, height, width], odt, source)
    mask = checks.new_output("crop_mask_ycbcr", img, [height, (width + 7) // 8] if return_mask else [0],
                             torch.uint8, source)
    # The seed's window over the image as the crop sees it: at the mirrored columns when flipped.
    top, left = crop_window(v.h, v.w, height, width, seed)
    _run_sample(img, v, height, width, p, top, v.w - left - width if hflip else left, mask_seed_of(seed, mask_seed),
                structure == "square", apply_mask, out.data_ptr(), odt, scale,
                mask.data_ptr() if return_mask else 0, hflip)
    return out, mask


def crop_mask_ycbcr_batch(imgs, tops, lefts, height, width, p, mask_seeds, out, layout="HWC", structure="cross",
                          scale=1.0, apply_mask=True, masks=None, hflips=None, vflips=None, transposes=None):
    views = check_crop_mask_ycbcr_batch(imgs, tops, lefts, height, width, p, mask_seeds, out, layout, structure,
                                        scale, masks, hflips, vflips, transposes)
    # out (and masks) are contiguous [n, 3, height, width] (and [n, height, ceil(width / 8)]).
    size, mask_size = 3 * height * width * out.element_size(), height * ((width + 7) // 8)
    dst, mask_dst = out.data_ptr(), 0 if masks is None else masks.data_ptr()
    for i, (img, v) in enumerate(zip(imgs, views)):
        _run_sample(img, v, height, width, p, tops[i], lefts[i], mask_seeds[i], structure == "square", apply_mask,
                    dst + i * size, out.dtype, scale, 0 if masks is None else mask_dst + i * mask_size,
                    bool(hflips and hflips[i]), bool(vflips and vflips[i]), bool(transposes and transposes[i]))
