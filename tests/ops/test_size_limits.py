"""Sizes no machine holds: arguments and outputs whose counts overflow int64 fail with a message
naming the argument and value on both backends, before anything is allocated; huge iteration
counts stop at dilation's fixed point; random offsets reach positions past 2^32."""

import numpy as np
import pytest
import torch

import fastprep
import fastprep.numba_kernels._counter_rng as counter_rng

from helpers.op_calls import bad_input_tests, call, native_available

pytestmark = pytest.mark.op_layer

_U8 = torch.uint8


def _stride0(*shape, dtype=_U8):
    """A `shape` tensor over one element: sizes that could never be allocated, for free."""
    return torch.zeros([1] * len(shape), dtype=dtype).expand(*shape)


BAD_INPUTS = [
    # 8 x 2^62 bytes does not fit int64: the bound is printed exactly on both backends.
    (call("unpack_bits", _stride0(2**62), -1),
     r"unpack_bits: expected 0 <= count <= 36893488147419103232 \(8 bits x 4611686018427387904 bytes "
     r"along dim -1\), got count=-1"),
    # ceil(width / 8) without the overflow of width + 7.
    (call("dilate_packed", torch.zeros(2, 3, dtype=_U8), 2**63 - 1),
     r"dilate_packed: width=9223372036854775807 needs 1152921504606846976 bytes per row but packed has 3 "
     r"\(last dim\)"),
    (call("mask_fill", _stride0(1, 1, 2**63 - 1), torch.zeros(1, 1, dtype=_U8)),
     r"mask_fill: expected mask to have shape \[1, 1152921504606846976\] to match img \(packed\), got \[1, 1\]"),
]

# Outputs whose byte count overflows int64: rejected before any allocation, naming the arguments
# they come from (torch's own error names neither; native used to pass it on as "API call failed").
_TOO_BIG = r"expected an output of at most 2\^63 - 1 bytes, got "
BAD_INPUTS += [
    (call("random_mask", [2**40, 2**40], 0.5, 0),
     r"random_mask: " + _TOO_BIG + r"\[1099511627776, 1099511627776\] of torch.bool from shape=\[1099511627776, "
     r"1099511627776\]"),
    (call("random_mask", [2**62, 16], 0.5, 0, packed=True),
     r"random_mask: " + _TOO_BIG + r"\[4611686018427387904, 2\] of torch.uint8 from shape=\[4611686018427387904, 16\]"),
    (call("random_dilated_mask", [3, 2**62, 1], 0.5, 0),
     r"random_dilated_mask: " + _TOO_BIG + r"\[3, 4611686018427387904, 1\] of torch.bool from shape=\[3, "
     r"4611686018427387904, 1\]"),
    (call("crop", _stride0(3, 2**60, 2, dtype=torch.float32), 0, 0, 2**60, 2),
     r"crop: " + _TOO_BIG + r"\[3, 1152921504606846976, 2\] of torch.float32 from height=1152921504606846976, "
     r"width=2"),
    (call("random_crop", torch.zeros(3, 4, 5, dtype=_U8), 2**62, 4, 0, "CHW", True),
     r"random_crop: " + _TOO_BIG + r"\[3, 4611686018427387904, 4\] of torch.uint8 from height=4611686018427387904, "
     r"width=4"),
    (call("random_crop", torch.zeros(2, 4, 5, 3, dtype=_U8), 2**61, 2, 0, "HWC", True),
     r"random_crop: " + _TOO_BIG + r"\[2, 3, 2305843009213693952, 2\] of torch.uint8 from "
     r"height=2305843009213693952, width=2"),
    (call("rgb_to_ycbcr", _stride0(2**30, 2**30, 3), "HWC", torch.float32),
     r"rgb_to_ycbcr: " + _TOO_BIG + r"\[3, 1073741824, 1073741824\] of torch.float32 from img of shape "
     r"\[1073741824, 1073741824, 3\]"),
    (call("ycbcr_to_rgb", _stride0(3, 2**30, 2**30, dtype=torch.float16), "CHW", torch.float32),
     r"ycbcr_to_rgb: " + _TOO_BIG + r"\[3, 1073741824, 1073741824\] of torch.float32 from img of shape "
     r"\[3, 1073741824, 1073741824\]"),
    (call("crop_mask_ycbcr", _stride0(2**30, 2**30, 3), 2**30, 2**30, 0.5, 0, out_dtype=torch.float32),
     r"crop_mask_ycbcr: " + _TOO_BIG + r"\[3, 1073741824, 1073741824\] of torch.float32 from height=1073741824, "
     r"width=1073741824"),
    (call("mask_fill", _stride0(3, 2**30, 2**31, dtype=torch.float32),
                                _stride0(2**30, 2**31, dtype=torch.bool)),
     r"mask_fill: " + _TOO_BIG + r"\[3, 1073741824, 2147483648\] of torch.float32 from img of shape "
     r"\[3, 1073741824, 2147483648\]"),
    (call("unpack_bits", _stride0(3, 2**61), 2**63 - 1),
     r"unpack_bits: " + _TOO_BIG + r"\[3, 9223372036854775807\] of torch.bool from count=9223372036854775807"),
]

test_bad_input_op, test_bad_input_numba, test_bad_input_fake = bad_input_tests(BAD_INPUTS)

# Outputs that fit int64 but no machine can allocate: the same message on both backends (native's
# stable ABI used to pass the failure on without torch's text). Not on meta, where nothing is allocated.
UNALLOCATABLE = [
    (call("random_crop", torch.zeros(1, 4, 5, dtype=_U8), 2**62, 1, 0, "CHW", True),
     r"random_crop: could not allocate the output, \[1, 4611686018427387904, 1\] of torch.uint8 "
     r"\(4611686018427387904 bytes\) from height=4611686018427387904, width=1"),
    (call("random_mask", [2**63 - 1], 0.5, 0, packed=True),
     r"random_mask: could not allocate the output, \[1152921504606846976\] of torch.uint8 "
     r"\(1152921504606846976 bytes\) from shape=\[9223372036854775807\]"),
    (call("crop_mask_ycbcr", _stride0(2**30, 2**30, 3), 2**30, 2**30, 0.5, 0),
     r"crop_mask_ycbcr: could not allocate the output, \[3, 1073741824, 1073741824\] of torch.uint8 "
     r"\(3458764513820540928 bytes\) from height=1073741824, width=1073741824"),
    (call("dilate", _stride0(2**31, 2**31, dtype=torch.bool)),
     r"dilate: could not allocate a contiguous copy of mask, \[2147483648, 2147483648\] of torch.bool "
     r"\(4611686018427387904 bytes\)$"),
    (call("pack_bits", _stride0(2**62, dtype=torch.bool)),
     r"pack_bits: could not allocate a contiguous copy of x, \[4611686018427387904\] of torch.bool "
     r"\(4611686018427387904 bytes\)$"),
    (call("mask_fill", _stride0(1, 2**31, 2**31), _stride0(2**31, 2**31, dtype=torch.bool)),
     r"mask_fill: could not allocate a contiguous copy of mask, \[2147483648, 2147483648\] of torch.bool "
     r"\(4611686018427387904 bytes\)$"),
]


@pytest.mark.parametrize("case,match", UNALLOCATABLE)
def test_bad_input_unallocatable_output_names_its_size(case, match):
    for run in (case, case.numba):
        with pytest.raises(RuntimeError, match=match):
            run()


@pytest.mark.parametrize("structure", ["cross", "square"])
@pytest.mark.parametrize("width", [70, 128])  # 128: packed rows of whole words take the direct path
def test_huge_iteration_counts_stop_at_the_fixed_point(structure, width):
    h = 37
    m = torch.zeros(2, h, width, dtype=torch.bool)
    m[0, 0, 0] = True  # image 1 stays empty
    # The far corner is h + width - 2 cross steps away: every count from there on gives the same.
    steps = h + width - 2 if structure == "cross" else max(h, width) - 1
    assert not fastprep.dilate(m, structure, steps - 1)[0, -1, -1]
    full = fastprep.dilate(m, structure, steps)
    assert full[0].all() and not full[1].any()
    packed = fastprep.pack_bits(m)
    for iterations in (h + width, 2**40, 2**63 - 1):  # 2**40 steps used to run for ever
        assert torch.equal(fastprep.dilate(m, structure, iterations), full)
        assert torch.equal(fastprep.dilate_packed(packed, width, structure, iterations), fastprep.pack_bits(full))
    for iterations in (1, 2**62):
        expected = fastprep.dilate(fastprep.random_mask([2, h, width], 0.01, 3), structure, iterations)
        assert torch.equal(fastprep.random_dilated_mask([2, h, width], 0.01, 3, structure, iterations), expected)


def test_uniform_below_covers_ranges_past_2_32():
    rs = np.random.default_rng(0)
    ns = [int(n) for n in rs.integers(2**32 + 1, 2**63, 3000, dtype=np.int64)] + [2**32 + 1, 2**33, 2**64 - 1]
    words = [int(w) for w in rs.integers(0, 2**64, len(ns), dtype=np.uint64)]
    for w, n in zip(words, ns):
        got = int(counter_rng.uniform_below(np.uint64(w), np.uint64(n)))
        assert got == (w * n) >> 64 < n  # the 128-bit product's high word
        if native_available():
            from fastprep import _C
            assert _C.uniform_below(w, n) == got
    # n <= 2^32 keeps the 32-bit definition, so every saved seed gives the same windows.
    assert int(counter_rng.uniform_below(np.uint64(2**64 - 1), np.uint64(2**32))) == 2**32 - 1
