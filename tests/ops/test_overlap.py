"""Ops that write in place refuse memory overlap as torch's in-place ops do: an image whose
elements share memory (expand(), crossing as_strided strides: torch's internal overlap) or an input
that shares bytes with what is written (partial overlap). Either would make the result depend on
the order the kernel writes elements. On the op, its Numba kernel, the torch composition and the
fake kernel (torch.compile), with one text."""

import numpy as np
import pytest
import torch

import fastprep
from fastprep.ops._checks import has_internal_overlap, memory_overlaps
from fastprep.ops._crop_mask_ycbcr import crop_mask_ycbcr_batch_torch
from fastprep.ops._mask_fill import mask_fill__torch

from helpers.op_calls import bad_input_tests, call

pytestmark = pytest.mark.op_layer

_INTERNAL = r"mask_fill_: img has elements that share memory \(sizes \[{}\], strides \[{}\], e.g. from " \
            r"expand\(\)\), so writing it in place would depend on the order of the writes; pass img.clone\(\)"
_MASK_IN_IMG = r"mask_fill_: mask overlaps img in memory, so writing img would change mask while it is read; " \
               r"pass mask.clone\(\)"


def _u8(*shape):
    return torch.zeros(shape, dtype=torch.uint8)


def _aliased_bool_mask():
    img = _u8(3, 8, 8)
    return img, img[1].view(torch.bool)  # the mask is the image's second plane


def _aliased_packed_mask():
    img = _u8(3, 8, 8)
    return img, img[0, :, :1]  # uint8 [8, 1]: a packed mask inside the image


def _same_memory_two_storages():
    a = np.zeros(3 * 8 * 8, dtype=np.uint8)
    img = torch.from_numpy(a).view(3, 8, 8)
    mask = torch.from_numpy(a[64:128]).view(8, 8).view(torch.bool)  # another storage, the same bytes
    return img, mask


BAD_INPUTS = [
    (call("mask_fill_", _u8(1, 8, 8).expand(3, 8, 8), torch.zeros(8, 8, dtype=torch.bool)),
     _INTERNAL.format("3, 8, 8", "0, 8, 1")),
    (call("mask_fill_", _u8(8, 8, 1).expand(8, 8, 3), torch.zeros(8, 8, dtype=torch.bool), 0, "HWC"),
     _INTERNAL.format("8, 8, 3", "8, 1, 0")),  # a grey HWC image expanded to 3 channels
    (call("mask_fill_", torch.as_strided(_u8(200), (3, 8, 8), (1, 8, 1)), torch.zeros(8, 8, dtype=torch.bool)),
     _INTERNAL.format("3, 8, 8", "1, 8, 1")),
    (call("mask_fill_", *_aliased_bool_mask()), _MASK_IN_IMG),
    (call("mask_fill_", *_aliased_packed_mask()), _MASK_IN_IMG),
]
test_bad_input_op, test_bad_input_numba, test_bad_input_fake = bad_input_tests(BAD_INPUTS)


def test_memory_shared_through_another_storage_is_found():
    img, mask = _same_memory_two_storages()
    for fill_ in (fastprep.mask_fill_, mask_fill__torch):
        with pytest.raises(RuntimeError, match=_MASK_IN_IMG):
            fill_(img, mask, 1, "CHW")
    assert not img.any()  # refused before anything was written


def test_torch_refuses_the_same_aliasing():
    """The behaviour copied: torch's masked_fill_ with a mask aliasing the image."""
    img, mask = _aliased_bool_mask()
    with pytest.raises(RuntimeError, match="refer to a single memory location"):
        img.masked_fill_(mask, 1)


def test_disjoint_views_of_one_storage_are_fine():
    base = _u8(4 * 64)
    img, mask = base[:192].view(3, 8, 8), base[192:].view(8, 8)
    mask.view(torch.bool)[2, 3] = True
    assert not memory_overlaps(img, mask)
    for fill_ in (fastprep.mask_fill_, mask_fill__torch):
        img.zero_()
        fill_(img, mask.view(torch.bool), 7, "CHW")
        assert img[:, 2, 3].tolist() == [7, 7, 7] and img.sum() == 21
    # a strided image over every other byte, the mask in the bytes after it
    wide = _u8(2 * 192 + 64)
    img = wide[:384].view(3, 8, 16)[:, :, ::2]
    fastprep.mask_fill_(img, wide[384:].view(8, 8).view(torch.bool), 1, "CHW")


@pytest.mark.parametrize("shape,strides,overlap", [
    ((3, 8, 8), (64, 8, 1), False), ((3, 8, 8), (0, 8, 1), True), ((3, 1, 8), (8, 0, 1), False),
    ((2, 3), (3, 1), False), ((2, 3), (2, 1), True), ((4,), (0,), True), ((0, 5), (0, 0), False),
    ((3, 8, 8), (1, 24, 3), False), ((3, 8, 8), (1, 8, 1), True)])
def test_internal_overlap_rule(shape, strides, overlap):
    t = torch.as_strided(_u8(400), shape, strides)
    assert has_internal_overlap(t) == overlap


def _batch_args(imgs, out, masks):
    return (imgs, [0] * len(imgs), [0] * len(imgs), 4, 4, 0.5, [1] * len(imgs), out, "HWC", "cross", 1.0, True, masks)


def _batch_calls():
    """(name, args) of crop_mask_ycbcr_batch calls whose buffers overlap, and the message."""
    big = _u8(2, 12, 12, 3)
    out_in_img = big.view(-1)[: 2 * 3 * 4 * 4].view(2, 3, 4, 4)
    yield _batch_args([big[0], big[1]], out_in_img, None), r"imgs\[0\] overlaps out in memory"
    store = _u8(2 * 3 * 4 * 4 + 8)
    out, masks = store[:96].view(2, 3, 4, 4), store[90:98].view(2, 4, 1)
    yield _batch_args([_u8(8, 8, 3), _u8(8, 8, 3)], out, masks), "out and masks overlap in memory; pass separate"
    img = _u8(8, 8, 3)
    yield _batch_args([_u8(8, 8, 3), img], _u8(2, 3, 4, 4), img.view(-1)[:8].view(2, 4, 1)), \
        r"imgs\[1\] overlaps masks in memory"


@pytest.mark.parametrize("args,match", list(_batch_calls()))
def test_batch_buffers_must_not_overlap(args, match):
    from fastprep import numba_kernels
    for run in (torch.ops.fastprep.crop_mask_ycbcr_batch, numba_kernels.kernel("crop_mask_ycbcr_batch"),
                crop_mask_ycbcr_batch_torch):
        with pytest.raises(RuntimeError, match=match):
            run(*args)
