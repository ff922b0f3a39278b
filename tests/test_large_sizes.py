"""Sizes past 32-bit indexing: absurd sizes fail with a message naming the argument on both
backends, and windows whose offsets lie past 2^31 and 2^32 bytes give what slicing gives."""

import torch

import fastprep

from conftest import bad_input_tests

_U8 = torch.uint8


def _stride0(*shape, dtype=_U8):
    """A `shape` tensor over one element: sizes that could never be allocated, for free."""
    return torch.zeros([1] * len(shape), dtype=dtype).expand(*shape)


BAD_INPUTS = [
    # 8 x 2^62 bytes does not fit int64: the bound is printed exactly on both backends.
    (lambda: fastprep.unpack_bits(_stride0(2**62), -1),
     r"unpack_bits: expected 0 <= count <= 36893488147419103232 \(8 bits x 4611686018427387904 bytes "
     r"along dim -1\), got count=-1"),
    # ceil(width / 8) without the overflow of width + 7.
    (lambda: fastprep.dilate_packed(torch.zeros(2, 3, dtype=_U8), 2**63 - 1),
     r"dilate_packed: width=9223372036854775807 needs 1152921504606846976 bytes per row but packed has 3 "
     r"\(last dim\)"),
    (lambda: fastprep.mask_fill(_stride0(1, 1, 2**63 - 1), torch.zeros(1, 1, dtype=_U8)),
     r"mask_fill: expected mask to have shape \[1, 1152921504606846976\] to match img \(packed\), got \[1, 1\]"),
]

test_bad_input_raises_naming_argument_and_value, test_bad_input_on_meta_device = bad_input_tests(BAD_INPUTS)
