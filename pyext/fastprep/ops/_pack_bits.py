"""pack_bits / unpack_bits: schema, fake kernel and the torch-ops implementation for non-CPU
devices. Kernels: csrc/kernels/pack_bits.cpp (native), numba_kernels/_pack_bits.py (Numba)."""

from __future__ import annotations

import torch

import fastprep.ops._checks as checks
from fastprep.ops._library import define, impl_any_device

__all__ = ["pack_bits", "unpack_bits"]

define("pack_bits(Tensor x, int dim=-1, str bitorder='little') -> Tensor")
define("unpack_bits(Tensor packed, int count, int dim=-1, str bitorder='little') -> Tensor")


def pack_bits(x: torch.Tensor, dim: int = -1, bitorder: str = "little") -> torch.Tensor:
    """Pack a bool tensor into uint8 along `dim`: 8 elements per byte, the last byte zero-padded.

    Equal to ``numpy.packbits(x, axis=dim, bitorder=bitorder)``. Note fastprep's default is
    ``"little"`` (element 8j + k in bit k), the order word-level kernels use; numpy's is "big".
    Packing along a leading dim turns 8 binary maps into one uint8 plane.
    """
    return torch.ops.fastprep.pack_bits.default(x, checks.op_int("pack_bits", "dim", dim), bitorder)


def unpack_bits(packed: torch.Tensor, count: int, dim: int = -1,
                bitorder: str = "little") -> torch.Tensor:
    """Inverse of :func:`pack_bits`: a bool tensor with `count` elements along `dim`.

    Equal to ``numpy.unpackbits(packed, axis=dim, count=count, bitorder=bitorder)``. Runs on any
    device (CUDA uses a torch-ops implementation), so packed masks can be decoded on the GPU.
    """
    count, dim = checks.op_int("unpack_bits", "count", count), checks.op_int("unpack_bits", "dim", dim)
    return torch.ops.fastprep.unpack_bits.default(packed, count, dim, bitorder)


def check_pack(x: torch.Tensor, dim: int, bitorder: str) -> tuple[int, bool]:
    checks.check_tensor("pack_bits", "x", x)
    checks.check_dtype("pack_bits", "x", x, torch.bool)
    checks.check_min_dim("pack_bits", "x", x, 1)
    d = checks.wrap_dim("pack_bits", dim, x.dim())
    little = checks.parse_bitorder("pack_bits", bitorder)
    shape = list(x.shape)
    shape[d] = (shape[d] + 7) // 8
    checks.check_output_bytes("pack_bits", shape, torch.uint8, checks.shape_source("x", x))
    return d, little


def check_unpack(packed: torch.Tensor, count: int, dim: int, bitorder: str) -> tuple[int, bool]:
    checks.check_tensor("unpack_bits", "packed", packed)
    checks.check_dtype("unpack_bits", "packed", packed, torch.uint8)
    checks.check_min_dim("unpack_bits", "packed", packed, 1)
    d = checks.wrap_dim("unpack_bits", dim, packed.dim())
    little = checks.parse_bitorder("unpack_bits", bitorder)
    checks.check_unpack_count("unpack_bits", count, packed.shape[d], dim)
    shape = list(packed.shape)
    shape[d] = count
    checks.check_output_bytes("unpack_bits", shape, torch.bool, lambda: f"count={count}")
    return d, little


def _bit_shifts(little: bool, d: int, ndim: int, device: torch.device) -> torch.Tensor:
    shifts = torch.arange(8, device=device, dtype=torch.uint8)
    if not little:
        shifts = 7 - shifts
    # Shaped to broadcast against a tensor whose axis d is the 8 bits of a byte.
    return shifts.view([8] + [1] * (ndim - d - 1))


@torch.library.register_fake("fastprep::pack_bits")
def _pack_bits_fake(x, dim=-1, bitorder="little"):
    d, _ = check_pack(x, dim, bitorder)
    shape = list(x.shape)
    shape[d] = (shape[d] + 7) // 8
    return x.new_empty(shape, dtype=torch.uint8)


@torch.library.register_fake("fastprep::unpack_bits")
def _unpack_bits_fake(packed, count, dim=-1, bitorder="little"):
    d, _ = check_unpack(packed, count, dim, bitorder)
    shape = list(packed.shape)
    shape[d] = count
    return packed.new_empty(shape, dtype=torch.bool)


def pack_bits_torch(x: torch.Tensor, dim: int = -1, bitorder: str = "little") -> torch.Tensor:
    """pack_bits in plain torch ops, for devices without a fastprep kernel."""
    d, little = check_pack(x, dim, bitorder)
    n = x.shape[d]
    nb = (n + 7) // 8
    padded = torch.nn.functional.pad(x.to(torch.uint8).movedim(d, -1), (0, 8 * nb - n)).movedim(-1, d)
    groups = padded.unflatten(d, (nb, 8))
    bits = groups << _bit_shifts(little, d + 1, groups.dim(), x.device)
    return bits.sum(dim=d + 1, dtype=torch.uint8)


def unpack_bits_torch(packed: torch.Tensor, count: int, dim: int = -1,
                      bitorder: str = "little") -> torch.Tensor:
    """unpack_bits in plain torch ops: what a GPU runs to decode packed masks."""
    d, little = check_unpack(packed, count, dim, bitorder)
    bits = (packed.unsqueeze(d + 1) >> _bit_shifts(little, d + 1, packed.dim() + 1, packed.device)) & 1
    return bits.flatten(d, d + 1).narrow(d, 0, count).to(torch.bool)


impl_any_device("pack_bits", pack_bits_torch)
impl_any_device("unpack_bits", unpack_bits_torch)
