"""Numba mirror of csrc/kernels/crop_mask_ycbcr.cpp (kernel) and csrc/ops/crop_mask_ycbcr.cpp
(binding): the same window, mask and per-pixel formulas as the composed ops."""

from __future__ import annotations

import numpy as np
import torch
from numba import njit

from fastprep.numba_kernels.color import (U8, _FLAT, _TYPE_CODE, rgb_to_ycbcr_f, rgb_to_ycbcr_u8,
                                          store)
from fastprep.numba_kernels.crop import storage_span
from fastprep.numba_kernels.dilate import random_dilated_mask_kernel
from fastprep.ops.crop import random_crop_params
from fastprep.ops.fused import check_crop_mask_ycbcr, mask_seed_of


@njit(cache=True)
def crop_mask_ycbcr_kernel(src, sc, sh, sw, top, left, height, width, mask, apply_mask, out,
                           out_type, scale):
    plane = height * width
    mask_row = (width + 7) // 8
    for y in range(height):
        row = (top + y) * sh + left * sw
        m = y * mask_row
        o = y * width
        for x in range(width):
            p = row + x * sw
            keep = ((((mask[m + (x >> 3)] >> (x & 7)) & 1) - 1) & 0xFF) if apply_mask else 0xFF
            r = np.int64(src[p]) & keep
            g = np.int64(src[p + sc]) & keep
            b = np.int64(src[p + 2 * sc]) & keep
            if out_type == U8:
                v0, v1, v2 = rgb_to_ycbcr_u8(r, g, b)
                out[o + x] = v0
                out[plane + o + x] = v1
                out[2 * plane + o + x] = v2
            else:
                v0, v1, v2 = rgb_to_ycbcr_f(np.float32(r), np.float32(g), np.float32(b), np.float32(128.0))
                store(out, o + x, v0 * scale, out_type)
                store(out, plane + o + x, v1 * scale, out_type)
                store(out, 2 * plane + o + x, v2 * scale, out_type)


def crop_mask_ycbcr(img, height, width, p, seed, layout="HWC", structure="cross", out_dtype=None,
                    scale=1.0, return_mask=False, mask_seed=None):
    v, odt = check_crop_mask_ycbcr(img, height, width, p, layout, structure, out_dtype, scale)
    top, left = random_crop_params(v.h, v.w, height, width, seed)
    bits = np.empty(height * ((width + 7) // 8), dtype=np.uint8)
    random_dilated_mask_kernel(np.int64(mask_seed_of(seed, mask_seed)), np.float64(p), 1, height,
                               width, structure == "square", 1, True, bits)
    out = img.new_empty([3, height, width], dtype=odt)
    out_type = _TYPE_CODE[odt]
    flat = out.view(_FLAT[odt]).numpy().reshape(-1)
    # Numba specialises on the store's element type: uint8 / float32 / int16 (fp16, bf16 bits).
    crop_mask_ycbcr_kernel(storage_span(img), v.sc, v.sh, v.sw, top, left, height, width, bits,
                           not return_mask, flat, out_type, np.float32(scale))
    mask = torch.from_numpy(bits).view(height, (width + 7) // 8) if return_mask else \
        img.new_empty([0], dtype=torch.uint8)
    return out, mask
