"""random_mask: the counter definition, bit statistics, packing, backends, opcheck, compile."""

import math

import numpy as np
import pytest
import torch

import fastprep
import fastprep.numba_kernels._random_mask as numba_rm

from helpers.op_calls import bad_input_tests, call, requires_native

pytestmark = pytest.mark.kernel

P_VALUES = [0.0, 1.0, 0.25, 0.1, 0.9, 1 / 3, 0.5, 2**-16, 1 - 2**-16]


def reference_mask(shape, p, seed):
    """The documented definition (csrc/kernels/random_mask.h), word by word in Python."""
    q = math.floor(p * 65536 + 0.5)
    w = shape[-1]
    rows = math.prod(shape[:-1])
    wpr = (w + 63) // 64
    out = np.zeros((rows, wpr * 64), dtype=bool)
    for r in range(rows):
        for j in range(wpr):
            if q in (0, 65536):
                acc = 0 if q == 0 else 2**64 - 1
            else:
                lowest = (q & -q).bit_length() - 1
                base = (r * wpr + j) * 16
                acc = fastprep.random_word(seed, base)
                for t, k in enumerate(range(lowest + 1, 16), start=1):
                    word = fastprep.random_word(seed, base + t)
                    acc = acc | word if (q >> k) & 1 else acc & word
            out[r, 64 * j:64 * j + 64] = [(acc >> b) & 1 for b in range(64)]
    return out[:, :w].reshape(shape)


@pytest.mark.parametrize("p", [0.25, 0.1, 1 / 3, 0.0, 1.0, 0.75])
@pytest.mark.parametrize("shape", [(2, 70), (3, 64), (1, 1), (2, 2, 130)])
def test_matches_documented_counters(shape, p):
    expected = reference_mask(shape, p, seed=-12345)
    for impl in (fastprep.random_mask, numba_rm.random_mask):
        np.testing.assert_array_equal(impl(shape, p, -12345).numpy(), expected)


@pytest.mark.parametrize("p", P_VALUES)
def test_frequency_within_statistical_bounds(p):
    shape = (512, 1000)
    m = fastprep.random_mask(shape, p, seed=2024)
    assert m.dtype == torch.bool and m.shape == shape
    q = math.floor(p * 65536 + 0.5) / 65536
    assert abs(q - p) <= 2**-17  # the documented rounding
    n = m.numel()
    freq = m.double().mean().item()
    if q in (0.0, 1.0):
        assert freq == q
    else:
        assert abs(freq - q) < 6 * math.sqrt(q * (1 - q) / n)


def test_same_seed_same_bits_different_seeds_differ():
    a = fastprep.random_mask((64, 100), 0.5, 1)
    assert torch.equal(a, fastprep.random_mask((64, 100), 0.5, 1))
    b = fastprep.random_mask((64, 100), 0.5, 2)
    assert (a != b).double().mean().item() > 0.4


@pytest.mark.parametrize("p", [0.25, 0.5, 0.1])
def test_rows_and_neighbours_uncorrelated(p):
    m = fastprep.random_mask((2000, 256), p, seed=99).numpy().astype(np.float64)
    bound = 5 / math.sqrt(m.size)
    rows = np.corrcoef(m[:-1].ravel(), m[1:].ravel())[0, 1]
    cols = np.corrcoef(m[:, :-1].ravel(), m[:, 1:].ravel())[0, 1]
    words = np.corrcoef(m[:, :64].ravel(), m[:, 64:128].ravel())[0, 1]
    assert abs(rows) < bound and abs(cols) < bound and abs(words) < bound


@pytest.mark.parametrize("shape", [(5, 1), (3, 63), (4, 64), (2, 65), (7, 130), (130,), (2, 3, 9), (0, 5),
                                   (4, 0)])
def test_packed_equals_pack_bits(shape):
    m = fastprep.random_mask(shape, 0.3, 5)
    packed = fastprep.random_mask(shape, 0.3, 5, packed=True)
    assert packed.dtype == torch.uint8 and packed.shape == (*shape[:-1], (shape[-1] + 7) // 8)
    assert torch.equal(packed, fastprep.pack_bits(m, -1, "little"))
    assert torch.equal(numba_rm.random_mask(shape, 0.3, 5, True), packed)


@requires_native
@pytest.mark.parametrize("p", [0.25, 0.1, 0.9, 0.0, 1.0])
def test_native_and_numba_give_the_same_bits(p):
    for packed in (False, True):
        native = torch.ops.fastprep.random_mask([3, 17, 200], p, 2**62 + 3, packed)
        assert torch.equal(native, numba_rm.random_mask([3, 17, 200], p, 2**62 + 3, packed))


def test_opcheck():
    torch.library.opcheck(torch.ops.fastprep.random_mask.default, ([4, 70], 0.25, 3, False))
    torch.library.opcheck(torch.ops.fastprep.random_mask.default, ([2, 4, 70], 0.1, -3, True))


def test_torch_compile_fullgraph():
    def f(x):
        return x & torch.ops.fastprep.random_mask([6, 70], 0.25, 11, False)

    x = torch.ones(6, 70, dtype=torch.bool)
    compiled = torch.compile(f, fullgraph=True, backend="inductor")
    assert torch.equal(compiled(x), fastprep.random_mask((6, 70), 0.25, 11))


BAD_INPUTS = [
    (call("random_mask", (4, 4), 1.5, 0), r"random_mask: expected 0 <= p <= 1, got p=1\.5"),
    (call("random_mask", (4, 4), -0.5, 0), r"random_mask: expected 0 <= p <= 1, got p=-0\.5"),
    (call("random_mask", (4, 4), float("nan"), 0), r"random_mask: expected 0 <= p <= 1, got p=nan"),
    (call("random_mask", (4, -2), 0.5, 0), r"random_mask: expected non-negative sizes in shape, got -2"),
    (call("random_mask", (), 0.5, 0), r"random_mask: expected shape to have at least 1 dimension"),
]
test_bad_input_op, test_bad_input_numba, test_bad_input_fake = bad_input_tests(BAD_INPUTS)
