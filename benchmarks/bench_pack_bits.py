"""pack_bits / unpack_bits: 8 binary maps of 256x256, packed along each dim."""

import numpy as np
import pytest
import torch

import fastprep
import fastprep.numba_kernels._pack_bits as numba_pack
from fastprep.ops._pack_bits import pack_bits_torch, unpack_bits_torch

from conftest import bench_warm, requires_native, run_floor

SHAPE = (8, 256, 256)
DIMS = [0, 1, 2]


def _mask():
    return torch.from_numpy(np.random.default_rng(0).random(SHAPE) < 0.5)


@requires_native
@pytest.mark.parametrize("dim", DIMS)
def test_pack_fastprep_native(benchmark, dim):
    benchmark.group = f"pack_bits dim={dim}"
    x = _mask()
    benchmark(fastprep.pack_bits, x, dim, "little")


@pytest.mark.parametrize("dim", DIMS)
def test_pack_fastprep_numba(benchmark, dim):
    benchmark.group = f"pack_bits dim={dim}"
    x = _mask()
    bench_warm(benchmark, numba_pack.pack_bits, x, dim, "little")


@pytest.mark.parametrize("dim", DIMS)
def test_pack_numpy(benchmark, dim):
    benchmark.group = f"pack_bits dim={dim}"
    x = _mask().numpy()
    benchmark(np.packbits, x, axis=dim, bitorder="little")


@pytest.mark.parametrize("dim", DIMS)
def test_pack_torch_ops(benchmark, dim):
    benchmark.group = f"pack_bits dim={dim}"
    benchmark(pack_bits_torch, _mask(), dim, "little")


@pytest.mark.parametrize("dim", DIMS)
def test_pack_memcpy(benchmark, dim):
    benchmark.group = f"pack_bits dim={dim}"
    run_floor(benchmark, int(np.prod(SHAPE)), int(np.prod(SHAPE)) // 8)


def _packed(dim):
    return fastprep.pack_bits(_mask(), dim, "little")


@requires_native
@pytest.mark.parametrize("dim", DIMS)
def test_unpack_fastprep_native(benchmark, dim):
    benchmark.group = f"unpack_bits dim={dim}"
    benchmark(fastprep.unpack_bits, _packed(dim), SHAPE[dim], dim, "little")


@pytest.mark.parametrize("dim", DIMS)
def test_unpack_fastprep_numba(benchmark, dim):
    benchmark.group = f"unpack_bits dim={dim}"
    packed = _packed(dim)
    bench_warm(benchmark, numba_pack.unpack_bits, packed, SHAPE[dim], dim, "little")


@pytest.mark.parametrize("dim", DIMS)
def test_unpack_numpy(benchmark, dim):
    benchmark.group = f"unpack_bits dim={dim}"
    benchmark(np.unpackbits, _packed(dim).numpy(), axis=dim, count=SHAPE[dim], bitorder="little")


@pytest.mark.parametrize("dim", DIMS)
def test_unpack_torch_ops(benchmark, dim):
    benchmark.group = f"unpack_bits dim={dim}"
    benchmark(unpack_bits_torch, _packed(dim), SHAPE[dim], dim, "little")


@pytest.mark.parametrize("dim", DIMS)
def test_unpack_memcpy(benchmark, dim):
    benchmark.group = f"unpack_bits dim={dim}"
    run_floor(benchmark, int(np.prod(SHAPE)) // 8, int(np.prod(SHAPE)))
