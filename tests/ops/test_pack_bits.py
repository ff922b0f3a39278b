"""pack_bits / unpack_bits against numpy, across backends, under opcheck and torch.compile."""

import numpy as np
import pytest
import torch

import fastprep
import fastprep.numba_kernels._pack_bits as numba_pack
from fastprep.ops._pack_bits import pack_bits_torch, unpack_bits_torch

from helpers.op_calls import bad_input_tests, call, requires_native

pytestmark = pytest.mark.kernel

SHAPES = [(0,), (1,), (7,), (8,), (9,), (64,), (65,), (3, 17), (2, 0, 5), (5, 8, 3), (4, 33, 2, 3),
          (1, 1, 1), (9, 3, 130), (3, 5, 136)]
BITORDERS = ["little", "big"]


def _cases():
    for shape in SHAPES:
        for dim in range(-len(shape), len(shape)):
            for bitorder in BITORDERS:
                yield shape, dim, bitorder


def _mask(shape, seed=0):
    return torch.from_numpy(np.random.default_rng(seed).random(shape) < 0.5)


@pytest.mark.parametrize("shape,dim,bitorder", list(_cases()))
def test_pack_matches_numpy(shape, dim, bitorder):
    x = _mask(shape)
    expected = np.packbits(x.numpy(), axis=dim, bitorder=bitorder)
    for impl in (fastprep.pack_bits, pack_bits_torch, numba_pack.pack_bits):
        out = impl(x, dim, bitorder)
        assert out.dtype == torch.uint8 and out.is_contiguous()
        np.testing.assert_array_equal(out.numpy(), expected)


@pytest.mark.parametrize("shape,dim,bitorder", list(_cases()))
def test_unpack_matches_numpy(shape, dim, bitorder):
    packed = np.packbits(_mask(shape).numpy(), axis=dim, bitorder=bitorder)
    m = packed.shape[dim]
    for count in sorted({0, shape[dim], 8 * m, max(8 * m - 3, 0)}):
        expected = np.unpackbits(packed, axis=dim, count=count, bitorder=bitorder).astype(bool)
        for impl in (fastprep.unpack_bits, unpack_bits_torch, numba_pack.unpack_bits):
            out = impl(torch.from_numpy(packed), count, dim, bitorder)
            assert out.dtype == torch.bool
            np.testing.assert_array_equal(out.numpy(), expected)


def test_round_trip_random_bytes():
    packed = torch.randint(0, 256, (6, 11, 5), dtype=torch.uint8)
    for dim in range(3):
        for bitorder in BITORDERS:
            bits = fastprep.unpack_bits(packed, 8 * packed.shape[dim], dim, bitorder)
            assert torch.equal(fastprep.pack_bits(bits, dim, bitorder), packed)


@pytest.mark.parametrize("view", ["transpose", "step", "expand", "offset"])
def test_non_contiguous_views(view):
    base = _mask((12, 40), seed=3)
    x = {"transpose": lambda: base.t(), "step": lambda: base[:, ::3],
         "expand": lambda: base[:1].expand(5, 40), "offset": lambda: base[2:, 5:]}[view]()
    for dim in (0, 1):
        np.testing.assert_array_equal(fastprep.pack_bits(x, dim).numpy(),
                                      np.packbits(x.numpy(), axis=dim, bitorder="little"))
    packed = fastprep.pack_bits(base, 0)[:, ::2]
    np.testing.assert_array_equal(fastprep.unpack_bits(packed, 16, 0).numpy(),
                                  np.unpackbits(packed.numpy(), axis=0, count=16, bitorder="little"))


def test_nonzero_bytes_in_bool_storage_count_as_true():
    raw = torch.tensor([0, 1, 2, 255, 0, 128, 0, 0, 7], dtype=torch.uint8)
    x = raw.view(torch.bool)  # a bool view of arbitrary bytes, as from a reinterpreting reader
    expected = np.packbits(raw.numpy() != 0, bitorder="little")
    for impl in (fastprep.pack_bits, numba_pack.pack_bits):
        np.testing.assert_array_equal(impl(x).numpy(), expected)


@requires_native
@pytest.mark.parametrize("shape,dim,bitorder", [((3, 1000), -1, "little"), ((16, 7, 9), 0, "big"),
                                                ((2, 13, 77), 1, "little")])
def test_native_and_numba_give_the_same_bytes(shape, dim, bitorder):
    x = _mask(shape, seed=11)
    native = torch.ops.fastprep.pack_bits(x, dim, bitorder)
    assert torch.equal(native, numba_pack.pack_bits(x, dim, bitorder))
    n = shape[dim]
    assert torch.equal(torch.ops.fastprep.unpack_bits(native, n, dim, bitorder),
                       numba_pack.unpack_bits(native, n, dim, bitorder))


@pytest.mark.parametrize("shape,dim,bitorder", [((3, 17), -1, "little"), ((9, 4, 5), 0, "big"),
                                                ((0, 4), 1, "little")])
def test_opcheck(shape, dim, bitorder):
    x = _mask(shape)
    torch.library.opcheck(torch.ops.fastprep.pack_bits.default, (x, dim, bitorder))
    packed = fastprep.pack_bits(x, dim, bitorder)
    torch.library.opcheck(torch.ops.fastprep.unpack_bits.default, (packed, shape[dim], dim, bitorder))


def test_torch_compile_fullgraph():
    def roundtrip(x):
        packed = torch.ops.fastprep.pack_bits(x, 0, "big")
        return torch.ops.fastprep.unpack_bits(packed, x.shape[0], 0, "big") & x

    x = _mask((10, 6))
    compiled = torch.compile(roundtrip, fullgraph=True, backend="inductor")
    assert torch.equal(compiled(x), x)


def test_meta_tensors_give_shapes():
    x = torch.empty(5, 13, dtype=torch.bool, device="meta")
    assert fastprep.pack_bits(x, 1).shape == (5, 2)
    assert fastprep.unpack_bits(torch.empty(5, 2, dtype=torch.uint8, device="meta"), 11).shape == (5, 11)


BAD_INPUTS = [
    (call("pack_bits", torch.zeros(4, dtype=torch.uint8)),
     r"pack_bits: expected x to be a torch.bool tensor, got torch.uint8"),
    (call("pack_bits", torch.tensor(True)),
     r"pack_bits: expected x to have at least 1 dimension\(s\), got a 0-D tensor"),
    (call("pack_bits", torch.zeros(2, 3, dtype=torch.bool), 2),
     r"pack_bits: dim 2 is out of range for a 2-D tensor"),
    (call("pack_bits", torch.zeros(2, 3, dtype=torch.bool), -3),
     r"pack_bits: dim -3 is out of range"),
    (call("pack_bits", torch.zeros(3, dtype=torch.bool), -1, "middle"),
     r"pack_bits: expected bitorder to be 'little' or 'big', got 'middle'"),
    (call("unpack_bits", torch.zeros(2, dtype=torch.bool), 3),
     r"unpack_bits: expected packed to be a torch.uint8 tensor, got torch.bool"),
    (call("unpack_bits", torch.tensor(3, dtype=torch.uint8), 3),
     r"unpack_bits: expected packed to have at least 1 dimension\(s\), got a 0-D tensor"),
    (call("unpack_bits", torch.zeros(2, dtype=torch.uint8), 17),
     r"unpack_bits: expected 0 <= count <= 16 .*got count=17"),
    (call("unpack_bits", torch.zeros(2, dtype=torch.uint8), -1),
     r"unpack_bits: expected 0 <= count <= 16 .*got count=-1"),
    (call("unpack_bits", torch.zeros(2, dtype=torch.uint8), 3, 0, "BIG"),
     r"unpack_bits: expected bitorder to be 'little' or 'big', got 'BIG'"),
    (call("unpack_bits", torch.zeros(2, 2, dtype=torch.uint8), 3, 5),
     r"unpack_bits: dim 5 is out of range for a 2-D tensor"),
]


test_bad_input_op, test_bad_input_numba, test_bad_input_fake = bad_input_tests(BAD_INPUTS)
