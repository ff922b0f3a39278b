"""Numba mirror of csrc/kernels/crop_mask_ycbcr.cpp (kernel) and csrc/ops/crop_mask_ycbcr.cpp
(binding): the same window, mask and colour arithmetic as the composed ops."""

from __future__ import annotations

import numpy as np
import torch

from fastprep.numba_kernels._cache import njit
from fastprep.numba_kernels.color import CHUNK, TYPE_CODE, U8, compute, rgb_to_ycbcr_chunk_u8, store_chunk
from fastprep.numba_kernels.crop import flipped
from fastprep.numba_kernels.random_mask import random_dilated_mask_kernel
from fastprep.numba_kernels.storage import flat_view, storage_span
from fastprep.ops import checks
from fastprep.ops.crop import crop_window
from fastprep.ops.crop_mask_ycbcr import check_crop_mask_ycbcr, check_crop_mask_ycbcr_batch, mask_seed_of


@njit(cache=True, inline="always")
def gather_masked(src, p, sc, sw, n, mask, m, apply_mask, t0, t1, t2):
    # Slices, so every index is provably non-negative and Numba drops its wraparound checks. A
    # negative sw (a flipped read) walks down from p: its slice starts at the lowest pixel.
    if sw < 0:
        lo = p + (n - 1) * sw
        s = src[lo:p + 2 * sc + 1]
        if apply_mask:
            mm = mask[m:m + n]
            for i in range(n):
                keep = np.uint8(0 if mm[i] else 0xFF)
                q = (n - 1 - i) * -sw
                t0[i] = s[q] & keep
                t1[i] = s[q + sc] & keep
                t2[i] = s[q + 2 * sc] & keep
        else:
            for i in range(n):
                q = (n - 1 - i) * -sw
                t0[i] = s[q]
                t1[i] = s[q + sc]
                t2[i] = s[q + 2 * sc]
        return
    s = src[p:p + (n - 1) * sw + 2 * sc + 1]
    if apply_mask:
        mm = mask[m:m + n]
        for i in range(n):
            # mask_fill's zero, branch-free: keep is 0 on masked pixels and 0xFF elsewhere.
            keep = np.uint8(0 if mm[i] else 0xFF)
            t0[i] = s[i * sw] & keep
            t1[i] = s[i * sw + sc] & keep
            t2[i] = s[i * sw + 2 * sc] & keep
    else:
        for i in range(n):
            t0[i] = s[i * sw]
            t1[i] = s[i * sw + sc]
            t2[i] = s[i * sw + 2 * sc]


@njit(cache=True)
def crop_mask_ycbcr_kernel(src, base, sc, sh, sw, top, left, height, width, mask, apply_mask, out,
                           out_type, scale, t0, t1, t2):
    # base: the index of pixel (0, 0) in src (the C++ kernel's data pointer; the last column's
    # when the read is flipped and sw < 0).
    plane = height * width
    for y in range(height):
        row = base + (top + y) * sh + left * sw
        for x0 in range(0, width, CHUNK):
            n = min(CHUNK, width - x0)
            p = row + x0 * sw
            if sw == 3 and sc == 1:  # literal strides for packed HWC, so LLVM vectorises the reads
                gather_masked(src, p, 1, 3, n, mask, y * width + x0, apply_mask, t0, t1, t2)
            else:
                gather_masked(src, p, sc, sw, n, mask, y * width + x0, apply_mask, t0, t1, t2)
            o = y * width + x0
            o0, o1, o2 = out[o:o + n], out[plane + o:plane + o + n], out[2 * plane + o:2 * plane + o + n]
            if out_type == U8:
                rgb_to_ycbcr_chunk_u8(t0, t1, t2, n, o0, o1, o2)
            else:
                compute(t0, t1, t2, n, True, np.float32(128.0), scale)
                store_chunk(t0, t1, t2, n, o0, o1, o2, out_type)


def _run_sample(img, v, height, width, p, seed, mseed, square, apply_mask, out_flat, out_type, scale, mask_flat,
                scratch, hflip=False):
    """One sample into out_flat ([3 * height * width] of the output's flat view) and, when given,
    its packed mask into mask_flat: as run_sample in csrc/ops/crop_mask_ycbcr.cpp."""
    top, left = crop_window(v.h, v.w, height, width, seed)
    if mask_flat is not None:
        random_dilated_mask_kernel(np.int64(mseed), np.float64(p), 1, height, width, square, 1, True, mask_flat)
    bools = np.empty(height * width if apply_mask else 0, dtype=np.uint8)
    if apply_mask:
        random_dilated_mask_kernel(np.int64(mseed), np.float64(p), 1, height, width, square, 1, False, bools)
    t0, t1, t2 = scratch
    first, sw = flipped(v, hflip)  # the window cut from the image flipped left-right
    crop_mask_ycbcr_kernel(storage_span(img), first, v.sc, v.sh, sw, top, left, height, width, bools, apply_mask,
                           out_flat, out_type, np.float32(scale), t0, t1, t2)


def _scratch():
    # Chunk temporaries: float32, the exact uint8 path included (color_pixel.h's ChunkAcc).
    return tuple(np.empty(CHUNK, np.float32) for _ in range(3))


def crop_mask_ycbcr(img, height, width, p, seed, layout="HWC", structure="cross", out_dtype=None,
                    scale=1.0, apply_mask=True, return_mask=False, mask_seed=None, hflip=False):
    v, odt = check_crop_mask_ycbcr(img, height, width, p, layout, structure, out_dtype, scale)
    # Allocated as in the C++ binding: the image first, then the mask.
    source = lambda: f"height={height}, width={width}"  # noqa: E731
    out = checks.new_output("crop_mask_ycbcr", img, [3, height, width], odt, source)
    mask = checks.new_output("crop_mask_ycbcr", img, [height, (width + 7) // 8] if return_mask else [0],
                             torch.uint8, source)
    _run_sample(img, v, height, width, p, seed, mask_seed_of(seed, mask_seed), structure == "square", apply_mask,
                flat_view(out), TYPE_CODE[odt], scale, mask.numpy().reshape(-1) if return_mask else None,
                _scratch(), hflip)
    return out, mask


def crop_mask_ycbcr_batch(imgs, height, width, p, seeds, out, layout="HWC", structure="cross", scale=1.0,
                          apply_mask=True, mask_seeds=None, masks=None, hflips=None):
    views = check_crop_mask_ycbcr_batch(imgs, height, width, p, seeds, out, layout, structure, scale, mask_seeds,
                                        masks, hflips)
    flat, scratch = flat_view(out), _scratch()
    mask_flat = None if masks is None else masks.numpy().reshape(-1)
    size, mask_size = 3 * height * width, height * ((width + 7) // 8)
    for i, (img, v) in enumerate(zip(imgs, views)):
        mseed = mask_seed_of(seeds[i], None if mask_seeds is None else mask_seeds[i])
        _run_sample(img, v, height, width, p, seeds[i], mseed, structure == "square", apply_mask,
                    flat[i * size:(i + 1) * size], TYPE_CODE[out.dtype], scale,
                    None if mask_flat is None else mask_flat[i * mask_size:(i + 1) * mask_size], scratch,
                    bool(hflips and hflips[i]))
