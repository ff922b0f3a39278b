"""dilate / dilate_packed: schemas, fake kernels, Python entry points.
Kernels: csrc/kernels/dilate.cpp (native), numba_kernels/dilate.py (Numba)."""

from __future__ import annotations

import torch

from fastprep.ops import checks
from fastprep.ops._library import define

__all__ = ["dilate", "dilate_packed"]

define("dilate(Tensor mask, str structure='cross', int iterations=1) -> Tensor")
define("dilate_packed(Tensor packed, int width, str structure='cross', int iterations=1) -> Tensor")


def dilate(mask: torch.Tensor, structure: str = "cross", iterations: int = 1) -> torch.Tensor:
    """Binary dilation of a bool ``[..., H, W]`` mask by a 3x3 "cross" (4-neighbour) or "square"
    (8-neighbour), `iterations` times; pixels outside the image are false. Equal to
    ``scipy.ndimage.binary_dilation(mask, structure, iterations, border_value=0)`` per image, and
    to ``convolve2d(mask, kernel, mode="same") > 0`` for one iteration. Runs on 64-pixel words.
    """
    return torch.ops.fastprep.dilate(mask, structure, iterations)


def dilate_packed(packed: torch.Tensor, width: int, structure: str = "cross",
                  iterations: int = 1) -> torch.Tensor:
    """:func:`dilate` on rows packed by ``pack_bits(mask, bitorder="little")`` (uint8
    ``[..., H, ceil(width / 8)]``); the result is packed the same way, padding bits zero."""
    return torch.ops.fastprep.dilate_packed(packed, width, structure, iterations)


def check_dilate(mask: torch.Tensor, structure: str, iterations: int) -> bool:
    op = "dilate"
    checks.check_dtype(op, "mask", mask, torch.bool)
    checks.check_min_dim(op, "mask", mask, 2)
    square = checks.parse_structure(op, structure)
    checks.check_iterations(op, iterations)
    return square


def check_dilate_packed(packed: torch.Tensor, width: int, structure: str, iterations: int) -> bool:
    op = "dilate_packed"
    checks.check_dtype(op, "packed", packed, torch.uint8)
    checks.check_min_dim(op, "packed", packed, 2)
    nb = packed.shape[-1]
    need = (width + 7) // 8 if width >= 0 else 0
    if width < 0 or need != nb:
        checks.fail(op, ": width=", width, " needs ", need, " bytes per row but packed has ", nb,
                     " (last dim)")
    square = checks.parse_structure(op, structure)
    checks.check_iterations(op, iterations)
    return square


@torch.library.register_fake("fastprep::dilate")
def _dilate_fake(mask, structure="cross", iterations=1):
    check_dilate(mask, structure, iterations)
    return torch.empty_like(mask, memory_format=torch.contiguous_format)


@torch.library.register_fake("fastprep::dilate_packed")
def _dilate_packed_fake(packed, width, structure="cross", iterations=1):
    check_dilate_packed(packed, width, structure, iterations)
    return torch.empty_like(packed, memory_format=torch.contiguous_format)
