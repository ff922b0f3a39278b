"""dilate / dilate_packed: schemas, fake kernels, Python entry points.
Kernels: csrc/kernels/dilate.cpp (native), numba_kernels/_dilate.py (Numba)."""

from __future__ import annotations

import torch

import fastprep.ops._checks as checks
from fastprep.ops._library import define, impl_any_device

__all__ = ["dilate", "dilate_packed"]

define("dilate(Tensor mask, str structure='cross', int iterations=1) -> Tensor")
define("dilate_packed(Tensor packed, int width, str structure='cross', int iterations=1) -> Tensor")


def dilate(mask: torch.Tensor, structure: str = "cross", iterations: int = 1) -> torch.Tensor:
    """Binary dilation of a bool ``[..., H, W]`` mask by a 3x3 "cross" (4-neighbour) or "square"
    (8-neighbour), `iterations` times; pixels outside the image are false. Equal to
    ``scipy.ndimage.binary_dilation(mask, structure, iterations, border_value=0)`` per image,
    ``iterations=0`` included (repeat until nothing changes: every pixel connected to a true one
    becomes true), and to ``convolve2d(mask, kernel, mode="same") > 0`` for one iteration. Runs
    on 64-pixel words.

    Example:
        >>> m = torch.zeros(5, 5, dtype=torch.bool)
        >>> m[2, 2] = True
        >>> dilate(m, "cross").sum().item(), dilate(m, "cross", 0).all().item()
        (5, True)
    """
    return torch.ops.fastprep.dilate.default(mask, structure, checks.op_int("dilate", "iterations", iterations))


def dilate_packed(packed: torch.Tensor, width: int, structure: str = "cross",
                  iterations: int = 1) -> torch.Tensor:
    """:func:`dilate` on rows packed by ``pack_bits(mask, bitorder="little")`` (uint8
    ``[..., H, ceil(width / 8)]``); the result is packed the same way, padding bits zero."""
    width = checks.op_int("dilate_packed", "width", width)
    iterations = checks.op_int("dilate_packed", "iterations", iterations)
    return torch.ops.fastprep.dilate_packed.default(packed, width, structure, iterations)


def check_dilate(mask: torch.Tensor, structure: str, iterations: int) -> bool:
    op = "dilate"
    checks.check_tensor(op, "mask", mask)
    checks.check_dtype(op, "mask", mask, torch.bool)
    checks.check_min_dim(op, "mask", mask, 2)
    square = checks.parse_structure(op, structure)
    checks.check_iterations(op, iterations)
    return square


def check_dilate_packed(packed: torch.Tensor, width: int, structure: str, iterations: int) -> bool:
    op = "dilate_packed"
    checks.check_tensor(op, "packed", packed)
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


def _dilate_bools(m: torch.Tensor, square: bool, iterations: int) -> torch.Tensor:
    """Dilation of bool [..., H, W] by shifted ORs (exact on any device), stopping at the fixed
    point as the kernels do (at most H + W steps change anything; iterations=0: until then)."""
    x = m.reshape(-1, 1, *m.shape[-2:]).to(torch.uint8)
    h, w = m.shape[-2:]
    for _ in range(min(checks.until_unchanged(iterations, h, w), h + w)):
        p = torch.nn.functional.pad(x, (1, 1, 1, 1))
        y = x | p[..., :-2, 1:-1] | p[..., 2:, 1:-1] | p[..., 1:-1, :-2] | p[..., 1:-1, 2:]
        if square:
            y = y | p[..., :-2, :-2] | p[..., :-2, 2:] | p[..., 2:, :-2] | p[..., 2:, 2:]
        if torch.equal(y, x):
            break
        x = y
    return x.to(torch.bool).reshape(m.shape)


def dilate_torch(mask, structure="cross", iterations=1):
    """dilate in plain torch ops: what devices without a kernel run, with the kernels' bits."""
    square = check_dilate(mask, structure, iterations)
    return _dilate_bools(mask, square, iterations)


def dilate_packed_torch(packed, width, structure="cross", iterations=1):
    """dilate_packed in plain torch ops: unpack, dilate, pack, on the device."""
    square = check_dilate_packed(packed, width, structure, iterations)
    ops = torch.ops.fastprep
    bools = ops.unpack_bits(packed, width, -1, "little")
    return ops.pack_bits(_dilate_bools(bools, square, iterations), -1, "little")


impl_any_device("dilate", dilate_torch)
impl_any_device("dilate_packed", dilate_packed_torch)

