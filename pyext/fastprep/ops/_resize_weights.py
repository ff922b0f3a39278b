"""The resampler's per-axis weights, torch's, in its double arithmetic (csrc/kernels/resize_weights.cpp
says where): the contract's definition, which the torch-ops implementation runs and the tests hold
the kernels' tables to."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np


class Axis(NamedTuple):
    """Output i reads inputs start[i] .. start[i] + count[i] - 1 with int16 weights w[i] (zero
    past count), in units of 2^-precision."""
    start: np.ndarray
    count: np.ndarray
    w: np.ndarray
    precision: int


def _triangle(x: np.ndarray) -> np.ndarray:
    x = np.abs(x)
    return np.where(x < 1.0, 1.0 - x, 0.0)


def resample_axis(size: int, out: int, antialias: bool, reverse: bool = False, first: int = 0,
                  count: int | None = None) -> Axis:
    """The weights of one axis, ``size`` inputs -> ``out`` outputs; of outputs [first, first + count)
    only (a crop of the resize: the precision stays the whole table's); reversed: a flipped result."""
    count = out - first if count is None else count
    i = np.arange(out, dtype=np.float64)
    if size == out:  # torch skips the axis; one tap of 2^14 is the identity
        a = Axis(np.arange(out, dtype=np.int64), np.ones(out, np.int64), np.full((out, 1), 1 << 14, np.int64), 14)
    else:
        scale = size / out
        if antialias:
            support = scale if scale >= 1.0 else 1.0
            taps, invscale = math.ceil(support) * 2 + 1, 1.0 / scale if scale >= 1.0 else 1.0
            center = scale * (i + 0.5)
            start = np.maximum(np.trunc(center - support + 0.5).astype(np.int64), 0)
            n = np.clip(np.minimum(np.trunc(center + support + 0.5).astype(np.int64), size) - start, 0, taps)
            w, total = np.zeros((out, taps)), np.zeros(out)
            for j in range(taps):
                x = ((j + start).astype(np.float64) - center + 0.5) * invscale
                w[:, j] = np.where(j < n, _triangle(x), 0.0)
                total = total + w[:, j]  # in tap order, as torch sums
            w = np.where((total != 0.0)[:, None], w / np.where(total != 0.0, total, 1.0)[:, None], w)
        else:  # two taps at the source position (its float32 floor); an edge tap's weight moves inward
            real = np.maximum(scale * (i + 0.5) - 0.5, 0.0)
            start = np.minimum(np.floor(real.astype(np.float32)).astype(np.int64), size - 1)
            lam = np.minimum(np.maximum(real - start, 0.0), 1.0)
            n = np.clip(np.minimum(start + 2, size) - start, 0, 2)
            w0, w1 = _triangle(0.0 - lam), _triangle(1.0 - lam)
            w = np.stack([np.where(n == 2, w0, w0 + w1), np.where(n == 2, w1, 0.0)], axis=1)
        wt_max = float(w.max())
        precision = 0
        while precision < 22 and int(0.5 + wt_max * (1 << (precision + 1))) < (1 << 15):
            precision += 1
        v = w * (1 << precision)
        a = Axis(start, n, np.where(v < 0, np.trunc(-0.5 + v), np.trunc(0.5 + v)).astype(np.int64), precision)
    a = Axis(*(x[first:first + count] for x in a[:3]), a.precision)
    return Axis(*(x[::-1].copy() for x in a[:3]), a.precision) if reverse else a
