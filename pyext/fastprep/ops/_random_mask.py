"""random_mask / random_dilated_mask: schemas, fake kernels, Python entry points.
Kernels: csrc/kernels/random_mask.cpp, dilate.cpp (native), numba_kernels/_random_mask.py (Numba).

These ops take no tensor, so the dispatcher sees no backend key and runs the kernel registered for
CompositeExplicitAutograd (a CPU-key kernel would never be reached). Each backend registers its
kernel under that key; the output is a CPU tensor.
"""

from __future__ import annotations

import math

import torch

import fastprep.ops._checks as checks
from fastprep.ops._library import define

__all__ = ["random_mask", "random_dilated_mask"]

define("random_mask(int[] shape, float p, int seed, bool packed=False) -> Tensor")
define("random_dilated_mask(int[] shape, float p, int seed, str structure='cross', "
       "int iterations=1, bool packed=False) -> Tensor")


def random_mask(shape, p: float, seed: int, packed: bool = False) -> torch.Tensor:
    """A bool mask of `shape`, each element true with probability p (p rounded to a multiple of
    2^-16: exact for dyadic p such as 0.25), from the counter generator: same seed, same bits, on
    either backend. Rows are the last dim; 64 pixels cost one random word per binary digit of p
    from its lowest set one (p = 0.25: two words), see csrc/kernels/random_mask.h for the
    counters. `packed=True` returns ``pack_bits(mask, bitorder="little")`` directly (uint8
    ``[..., ceil(W / 8)]``), with the same bits.
    """
    seed = checks.op_seed("random_mask", "seed", seed)
    shape = [checks.op_int("random_mask", "shape", s) for s in shape]
    return torch.ops.fastprep.random_mask.default(shape, float(p), seed, packed)


def random_dilated_mask(shape, p: float, seed: int, structure: str = "cross", iterations: int = 1,
                        packed: bool = False) -> torch.Tensor:
    """``dilate(random_mask(shape, p, seed), structure, iterations)`` (packed if asked) in one
    pass that keeps the bits as 64-pixel words from generation to output. As in :func:`dilate`,
    ``iterations=0`` repeats the dilation until nothing changes."""
    op = "random_dilated_mask"
    seed = checks.op_seed(op, "seed", seed)
    shape, iterations = [checks.op_int(op, "shape", s) for s in shape], checks.op_int(op, "iterations", iterations)
    return torch.ops.fastprep.random_dilated_mask.default(shape, float(p), seed, structure, iterations, packed)


def check_mask_args(op: str, shape, p: float, packed: bool) -> list[int]:
    """Mirror of mask_out_shape in csrc/ops/random_mask.cpp: the output shape."""
    if len(shape) == 0:
        checks.fail(op, ": expected shape to have at least 1 dimension, got []")
    for s in shape:
        if s < 0:
            checks.fail(op, ": expected non-negative sizes in shape, got ", s)
    if math.isnan(p) or not 0.0 <= p <= 1.0:
        checks.fail(op, ": expected 0 <= p <= 1, got p=", checks.fmt_float(p))
    out = list(shape)
    if packed:
        out[-1] = (out[-1] + 7) // 8
    checks.check_output_bytes(op, out, torch.uint8 if packed else torch.bool, lambda: f"shape={list(shape)}")
    return out


def check_dilated_args(shape, p, structure, iterations, packed) -> tuple[list[int], bool]:
    op = "random_dilated_mask"
    if len(shape) < 2:
        checks.fail(op, ": expected shape to have at least 2 dimensions, got ", len(shape))
    out = check_mask_args(op, shape, p, packed)
    square = checks.parse_structure(op, structure)
    checks.check_iterations(op, iterations)
    return out, square


@torch.library.register_fake("fastprep::random_mask")
def _random_mask_fake(shape, p, seed, packed=False):
    out = check_mask_args("random_mask", shape, p, packed)
    return torch.empty(out, dtype=torch.uint8 if packed else torch.bool)


@torch.library.register_fake("fastprep::random_dilated_mask")
def _random_dilated_mask_fake(shape, p, seed, structure="cross", iterations=1, packed=False):
    out, _ = check_dilated_args(shape, p, structure, iterations, packed)
    return torch.empty(out, dtype=torch.uint8 if packed else torch.bool)
