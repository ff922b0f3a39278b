"""dilate / dilate_packed / random_dilated_mask against scipy, across backends, opcheck, compile."""

import numpy as np
import pytest
import torch
from scipy import ndimage, signal

import fastprep
import fastprep.numba_kernels._dilate as numba_dilate
import fastprep.numba_kernels._random_mask as numba_rm

from helpers.op_calls import bad_input_tests, call, requires_native

pytestmark = pytest.mark.kernel

STRUCTURES = {"cross": ndimage.generate_binary_structure(2, 1),
              "square": ndimage.generate_binary_structure(2, 2)}
SIZES = [(1, 1), (1, 64), (7, 1), (5, 63), (6, 64), (9, 65), (4, 130), (33, 17), (8, 8), (2, 200)]


def scipy_dilate(x: np.ndarray, structure: str, iterations: int) -> np.ndarray:
    """scipy's binary_dilation per image; iterations=0 repeats until nothing changes, as in scipy."""
    flat = x.reshape(-1, *x.shape[-2:])
    out = [ndimage.binary_dilation(m, STRUCTURES[structure], iterations, border_value=0) for m in flat]
    return np.stack(out).reshape(x.shape)


def _mask(shape, p=0.1, seed=0):
    return torch.from_numpy(np.random.default_rng(seed).random(shape) < p)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("structure", ["cross", "square"])
@pytest.mark.parametrize("iterations", [0, 1, 2, 3])
def test_matches_scipy(size, structure, iterations):
    x = _mask(size, seed=size[0] * 1000 + size[1])
    expected = scipy_dilate(x.numpy(), structure, iterations)
    packed_expected = np.packbits(expected, axis=-1, bitorder="little")
    for dil, dil_packed in ((fastprep.dilate, fastprep.dilate_packed),
                            (numba_dilate.dilate, numba_dilate.dilate_packed)):
        out = dil(x, structure, iterations)
        assert out.dtype == torch.bool and out.is_contiguous()
        np.testing.assert_array_equal(out.numpy(), expected)
        out_p = dil_packed(fastprep.pack_bits(x), size[1], structure, iterations)
        np.testing.assert_array_equal(out_p.numpy(), packed_expected)


@pytest.mark.parametrize("structure", ["cross", "square"])
def test_one_iteration_is_convolution(structure):
    x = _mask((31, 97), p=0.05, seed=4)
    conv = signal.convolve2d(x.numpy().astype(np.int32), STRUCTURES[structure].astype(np.int32), mode="same")
    np.testing.assert_array_equal(fastprep.dilate(x, structure).numpy(), conv > 0)


@pytest.mark.parametrize("shape", [(2, 3, 9, 65), (4, 1, 70), (0, 5, 5), (3, 0, 4), (2, 4, 0)])
def test_batched_leading_dims(shape):
    x = _mask(shape, seed=8)
    expected = scipy_dilate(x.numpy(), "square", 2) if x.numel() else x.numpy()
    np.testing.assert_array_equal(fastprep.dilate(x, "square", 2).numpy(), expected)
    packed = fastprep.dilate_packed(fastprep.pack_bits(x), shape[-1], "square", 2)
    np.testing.assert_array_equal(packed.numpy(), np.packbits(expected, axis=-1, bitorder="little"))


def test_non_contiguous_input():
    base = _mask((40, 150), seed=5)
    for x in (base.t(), base[::2, 3:], base[:, ::3]):
        np.testing.assert_array_equal(fastprep.dilate(x).numpy(), scipy_dilate(x.numpy(), "cross", 1))


def test_packed_padding_bits_are_ignored_and_stay_zero():
    x = _mask((6, 13), p=0.3, seed=2)
    packed = fastprep.pack_bits(x)
    dirty = packed.clone()
    dirty[:, -1] |= 0xE0  # bits 13..15: padding
    for impl in (fastprep.dilate_packed, numba_dilate.dilate_packed):
        assert torch.equal(impl(dirty, 13, "square"), fastprep.pack_bits(fastprep.dilate(x, "square")))


@pytest.mark.parametrize("shape", [(5, 70), (2, 3, 64, 130), (1, 1), (3, 1, 65)])
@pytest.mark.parametrize("structure", ["cross", "square"])
@pytest.mark.parametrize("iterations", [0, 1, 3])
def test_random_dilated_mask_equals_dilate_of_random_mask(shape, structure, iterations):
    expected = fastprep.dilate(fastprep.random_mask(shape, 0.1, 77), structure, iterations)
    for impl in (fastprep.random_dilated_mask, numba_rm.random_dilated_mask):
        assert torch.equal(impl(shape, 0.1, 77, structure, iterations), expected)
        assert torch.equal(impl(shape, 0.1, 77, structure, iterations, True), fastprep.pack_bits(expected))


@requires_native
@pytest.mark.parametrize("structure", ["cross", "square"])
def test_native_and_numba_give_the_same_bits(structure):
    x = _mask((3, 50, 333), p=0.02, seed=1)
    native = torch.ops.fastprep.dilate(x, structure, 2)
    assert torch.equal(native, numba_dilate.dilate(x, structure, 2))
    p = fastprep.pack_bits(x)
    assert torch.equal(torch.ops.fastprep.dilate_packed(p, 333, structure, 2),
                       numba_dilate.dilate_packed(p, 333, structure, 2))
    assert torch.equal(torch.ops.fastprep.random_dilated_mask([2, 40, 99], 0.1, 5, structure, 2, False),
                       numba_rm.random_dilated_mask([2, 40, 99], 0.1, 5, structure, 2, False))


def test_opcheck():
    x = _mask((2, 9, 70))
    torch.library.opcheck(torch.ops.fastprep.dilate.default, (x, "square", 2))
    torch.library.opcheck(torch.ops.fastprep.dilate_packed.default, (fastprep.pack_bits(x), 70, "cross", 1))
    torch.library.opcheck(torch.ops.fastprep.random_dilated_mask.default, ([9, 70], 0.2, 1, "cross", 1, True))


def test_torch_compile_fullgraph():
    def f(x):
        a = torch.ops.fastprep.dilate(x, "cross", 1)
        b = torch.ops.fastprep.dilate_packed(torch.ops.fastprep.pack_bits(x, -1, "little"), 70, "square", 2)
        c = torch.ops.fastprep.random_dilated_mask([9, 70], 0.1, 3, "cross", 1, False)
        return a, b, c

    x = _mask((9, 70))
    a, b, c = torch.compile(f, fullgraph=True, backend="inductor")(x)
    assert torch.equal(a, fastprep.dilate(x))
    assert torch.equal(b, fastprep.pack_bits(fastprep.dilate(x, "square", 2)))
    assert torch.equal(c, fastprep.dilate(fastprep.random_mask((9, 70), 0.1, 3)))


_M = torch.zeros(4, 9, dtype=torch.bool)
_P = torch.zeros(4, 2, dtype=torch.uint8)
BAD_INPUTS = [
    (call("dilate", _M.to(torch.uint8)), r"dilate: expected mask to be a torch.bool tensor, got torch.uint8"),
    (call("dilate", torch.zeros(9, dtype=torch.bool)),
     r"dilate: expected mask to have at least 2 dimension\(s\), got a 1-D tensor"),
    (call("dilate", _M, "diamond"), r"dilate: expected structure to be 'cross' or 'square', got 'diamond'"),
    (call("dilate", _M, "cross", -1), r"dilate: expected iterations >= 0, got iterations=-1"),
    (call("dilate_packed", _P, 17), r"dilate_packed: width=17 needs 3 bytes per row but packed has 2"),
    (call("dilate_packed", _P, -3), r"dilate_packed: width=-3 needs 0 bytes per row but packed has 2"),
    (call("dilate_packed", _M, 9), r"dilate_packed: expected packed to be a torch.uint8 tensor, got torch.bool"),
    (call("dilate_packed", torch.zeros(2, dtype=torch.uint8), 9),
     r"dilate_packed: expected packed to have at least 2 dimension\(s\), got a 1-D tensor"),
    (call("dilate_packed", _P, 9, "x"), r"dilate_packed: expected structure to be 'cross' or 'square', got 'x'"),
    (call("dilate_packed", _P, 9, "cross", -2), r"dilate_packed: expected iterations >= 0, got iterations=-2"),
    (call("random_dilated_mask", [9], 0.5, 0), r"random_dilated_mask: expected shape to have at least 2 dimensions, got 1"),
    (call("random_dilated_mask", [3, 9], 2.0, 0), r"random_dilated_mask: expected 0 <= p <= 1, got p=2"),
    (call("random_dilated_mask", [3, 9], float("nan"), 0), r"random_dilated_mask: expected 0 <= p <= 1, got p=nan"),
    (call("random_dilated_mask", [3, -9], 0.5, 0), r"random_dilated_mask: expected non-negative sizes in shape, got -9"),
    (call("random_dilated_mask", [3, 9], 0.5, 0, "ring"),
     r"random_dilated_mask: expected structure to be 'cross' or 'square', got 'ring'"),
    (call("random_dilated_mask", [3, 9], 0.5, 0, "cross", -1),
     r"random_dilated_mask: expected iterations >= 0, got iterations=-1"),
]
test_bad_input_op, test_bad_input_numba, test_bad_input_fake = bad_input_tests(BAD_INPUTS)


@pytest.mark.parametrize("offset", [0, 3, 8])
@pytest.mark.parametrize("iterations", [0, 1, 2])
def test_packed_whole_words_at_any_alignment(offset, iterations):
    # Rows of whole 64-bit words are dilated in place of the input bytes when 8-byte aligned;
    # an unaligned start takes the copying path. Both must agree.
    x = _mask((2, 11, 128), p=0.05, seed=offset)
    packed = fastprep.pack_bits(x)
    buf = torch.zeros(packed.numel() + offset, dtype=torch.uint8)
    shifted = buf[offset:].view(packed.shape)
    shifted.copy_(packed)
    expected = fastprep.pack_bits(torch.from_numpy(scipy_dilate(x.numpy(), "cross", iterations)))
    for impl in (fastprep.dilate_packed, numba_dilate.dilate_packed):
        assert torch.equal(impl(shifted, 128, "cross", iterations), expected)
