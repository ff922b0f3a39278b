"""resized_crop's placement arguments: an output that is a part of the resized window (Resize then
CenterCrop in one pass: the whole resize's weights, only the kept outputs computed) and vflip,
against torch's resize of the window sliced and flipped, on every implementation; the sliced
weight tables; the batch's per-image placements; bad input."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import fastprep
import fastprep.numba_kernels._resize as numba_resize
from fastprep.ops._resize import geometry_table, resample_axis, resized_crop_batch_torch, resized_crop_torch

from helpers.op_calls import bad_input_tests, call

IMPLS = [fastprep.resized_crop, numba_resize.resized_crop, resized_crop_torch]
BATCH_IMPLS = [fastprep.resized_crop_batch, numba_resize.resized_crop_batch, resized_crop_batch_torch]


def _image(shape, seed=0):
    return torch.from_numpy(np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8))


def _reference(img, window, resized, place, out, hflip=False, vflip=False, antialias=True):
    """torch's resize of the HWC image's window to `resized`, its part at `place` of size `out`, flipped."""
    top, left, height, width = window
    x = img.permute(2, 0, 1)[None, :, top:top + height, left:left + width]
    if tuple(resized) != (height, width):
        x = F.interpolate(x, size=resized, mode="bilinear", align_corners=False, antialias=antialias)
    x = x[0, :, place[0]:place[0] + out[0], place[1]:place[1] + out[1]]
    x = x.flip(-1) if hflip else x
    return x.flip(-2) if vflip else x


# (window, resized size, output's place, output size): Resize(256) + CenterCrop(224)'s shape, an
# upscale, one axis not resized (torch skips it), the whole resize, a one-pixel output.
CASES = [((0, 0, 61, 83), (48, 65), (4, 6), (40, 52)), ((3, 5, 20, 30), (50, 45), (49, 0), (1, 45)),
         ((0, 0, 61, 83), (61, 70), (10, 3), (40, 60)), ((2, 1, 40, 50), (30, 31), (0, 0), (30, 31)),
         ((0, 0, 61, 83), (61, 83), (7, 9), (20, 20))]


@pytest.mark.parametrize("window,resized,place,out", CASES)
def test_a_part_of_the_resize_flipped_either_way(window, resized, place, out):
    img = _image((61, 83, 3), 1)
    for antialias in (True, False):
        for hflip, vflip in ((False, False), (True, False), (False, True), (True, True)):
            want = _reference(img, window, resized, place, out, hflip, vflip, antialias)
            for impl in IMPLS:
                got = impl(img, *window, *out, "HWC", hflip, antialias, None, 1.0, None, None, vflip, *resized, *place)
                assert torch.equal(got, want), (impl.__module__, antialias, hflip, vflip)


def test_float_outputs_of_a_part_and_chw_sources():
    img = _image((3, 61, 83), 2)
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    want = _reference(img.permute(1, 2, 0), (0, 0, 61, 83), (48, 65), (4, 6), (40, 52), vflip=True)
    want = want.to(torch.float32).mul_(1 / 255).sub(torch.tensor(mean).view(-1, 1, 1)).div_(torch.tensor(std).view(-1, 1, 1))
    for impl in IMPLS:
        got = impl(img, 0, 0, 61, 83, 40, 52, "CHW", False, True, torch.float32, 1 / 255, mean, std, True, 48, 65, 4, 6)
        assert torch.equal(got, want), impl.__module__


def test_sliced_weight_tables_are_the_whole_tables_rows():
    for size, full, first, n in [(375, 256, 16, 224), (100, 300, 0, 1), (50, 50, 7, 20), (641, 224, 200, 24)]:
        for antialias in (True, False):
            for reverse in (False, True):
                whole = resample_axis(size, full, antialias)
                part = resample_axis(size, full, antialias, reverse, first, n)
                rows = slice(first, first + n)
                expect = [x[rows][::-1] if reverse else x[rows] for x in whole[:3]]
                assert part.precision == whole.precision
                assert all(np.array_equal(a, b) for a, b in zip(part[:3], expect))
                start, count, w, taps, precision = numba_resize.resample_axis(size, full, antialias, reverse, first, n)
                assert (taps, precision) == (part.w.shape[1], part.precision)
                assert np.array_equal(start, part.start) and np.array_equal(count, part.count)
                assert np.array_equal(w.reshape(n, taps), part.w)


def test_batch_places_each_image_as_the_per_sample_op():
    imgs = [_image((61, 83, 3), 3), _image((40, 50, 3), 4)]
    windows = [(0, 0, 61, 83), (5, 2, 30, 40)]
    places = [((48, 65), (4, 6)), ((20, 20), (0, 0))]
    hflips, vflips = [True, False], [False, True]
    want = torch.stack([fastprep.resized_crop(img, *win, 20, 20, "HWC", hf, True, torch.float32, 1 / 255, None, None,
                                              vf, *rs, *pl)
                        for img, win, (rs, pl), hf, vf in zip(imgs, windows, places, hflips, vflips)])
    tops, lefts, heights, widths = (list(v) for v in zip(*windows))
    for impl in BATCH_IMPLS:
        out = torch.full((2, 3, 20, 20), 7.0)
        table = geometry_table(2, top=tops, left=lefts, height=heights, width=widths, hflip=hflips, vflip=vflips,
                               resized_height=[48, 0], resized_width=[65, 0], out_top=[4, 0], out_left=[6, 0])
        impl(imgs, table, out, "HWC", True, 1 / 255, None, None)
        assert torch.equal(out, want), impl.__module__


# A batch's images in order, each changing one thing of what its weight tables depend on (window
# size, resized size, place, hflip) or nothing (a new window position, vflip): the tables kept from
# the previous image serve only when they are its. (window, resized, place, hflip, vflip).
TABLE_REUSE = [((0, 0, 50, 70), (40, 56), (4, 6), False, False), ((0, 0, 50, 70), (40, 56), (4, 6), False, False),
               ((5, 7, 50, 70), (40, 56), (4, 6), False, False), ((5, 7, 50, 70), (40, 56), (4, 6), True, False),
               ((5, 7, 50, 70), (40, 56), (5, 6), True, False), ((2, 3, 45, 70), (40, 56), (5, 6), True, False),
               ((2, 3, 45, 70), (40, 56), (5, 6), True, True), ((2, 3, 45, 70), (41, 56), (5, 6), True, True),
               ((0, 0, 50, 70), (40, 56), (4, 6), False, False)]


def test_batch_tables_follow_each_images_arguments():
    imgs = [_image((61, 83, 3), 10 + i) for i in range(len(TABLE_REUSE))]
    want = torch.stack([_reference(img, win, rs, pl, (20, 20), hf, vf) for img, (win, rs, pl, hf, vf)
                        in zip(imgs, TABLE_REUSE)])
    windows, resized, places, hflips, vflips = (list(v) for v in zip(*TABLE_REUSE))
    tops, lefts, heights, widths = (list(v) for v in zip(*windows))
    for impl in BATCH_IMPLS:
        out = torch.zeros((len(imgs), 3, 20, 20), dtype=torch.uint8)
        table = geometry_table(len(imgs), top=tops, left=lefts, height=heights, width=widths, hflip=hflips,
                               vflip=vflips, resized_height=[r[0] for r in resized], resized_width=[r[1] for r in resized],
                               out_top=[p[0] for p in places], out_left=[p[1] for p in places])
        impl(imgs, table, out, "HWC", True, 1.0, None, None)
        assert torch.equal(out, want), impl.__module__


def test_opcheck_with_placements():
    img = _image((9, 8, 3))
    torch.library.opcheck(torch.ops.fastprep.resized_crop.default,
                          (img, 1, 0, 8, 8, 4, 3, "HWC", True, True, None, 1.0, None, None, True, 6, 5, 2, 1))
    torch.library.opcheck(torch.ops.fastprep.resized_crop_batch.default,
                          ([img, img], geometry_table(2, top=[0, 1], left=[0, 0], height=[9, 8], width=[8, 8],
                                                      vflip=[True, False], resized_height=[6, 0], resized_width=[5, 0],
                                                      out_top=[2, 0], out_left=[1, 0]),
                           torch.empty(2, 3, 4, 4), "HWC", True, 1 / 255, None, None))


def _u8(*shape):
    return torch.zeros(*shape, dtype=torch.uint8)


_OUT = torch.empty(1, 3, 4, 4)
BAD_INPUTS = [
    (call("resized_crop", _u8(3, 8, 8), 0, 0, 8, 8, 4, 4, resized_height=-1),
     r"resized_crop: expected resized_height >= 0 \(0: the output's\), got resized_height=-1"),
    (call("resized_crop", _u8(3, 8, 8), 0, 0, 8, 8, 4, 4, resized_width=2**24 + 1),
     r"resized_crop: expected resized_width <= 16777216 \(the resize's weights are computed for every column\), "
     r"got resized_width=16777217"),
    (call("resized_crop", _u8(3, 8, 8), 0, 0, 8, 8, 4, 4, out_left=-2),
     r"resized_crop: expected out_left >= 0, got out_left=-2"),
    (call("resized_crop", _u8(3, 8, 8), 0, 0, 8, 8, 4, 4, resized_height=6, out_top=3),
     r"resized_crop: expected out_top \+ out_height <= resized_height \(6\), got out_top=3, out_height=4"),
    (call("resized_crop", _u8(3, 8, 8), 0, 0, 8, 8, 4, 4, out_left=1),
     r"resized_crop: expected out_left \+ out_width <= resized_width \(4\), got out_left=1, out_width=4"),
    (call("resized_crop", _u8(3, 8, 8), 0, 0, 8, 8, 4, 4, resized_width=5, out_left=2**63 - 1),
     r"expected out_left \+ out_width <= resized_width \(5\), got out_left=9223372036854775807, out_width=4"),
]

test_bad_input_op, test_bad_input_numba, test_bad_input_fake = bad_input_tests(BAD_INPUTS)


def _row(**columns):
    return geometry_table(1, top=[0], left=[0], height=[4], width=[4], **columns)


# The batch's placements are geometry columns: checked by the op on either backend (a fake kernel
# does not know the table's values).
BAD_ROWS = [
    (call("resized_crop_batch", [_u8(4, 4, 3)], _row(resized_height=[-3]), _OUT, "HWC"),
     r"resized_crop_batch: expected geometry\[0\].resized_height >= 0 \(0: the output's\), got "
     r"geometry\[0\].resized_height=-3"),
    (call("resized_crop_batch", [_u8(4, 4, 3)], _row(resized_width=[5], out_left=[2]), _OUT, "HWC"),
     r"resized_crop_batch: expected geometry\[0\].out_left \+ out's width <= geometry\[0\].resized_width \(5\), got "
     r"geometry\[0\].out_left=2, out's width=4"),
    (call("resized_crop_batch", [_u8(4, 4, 3)], _row(resized_height=[2**24 + 1]), _OUT, "HWC"),
     r"resized_crop_batch: expected geometry\[0\].resized_height <= 16777216 \(the resize's weights are computed for "
     r"every row\), got geometry\[0\].resized_height=16777217"),
    (call("resized_crop_batch", [_u8(4, 4, 3)], _row(out_top=[-1]), _OUT, "HWC"),
     r"resized_crop_batch: expected geometry\[0\].out_top >= 0, got geometry\[0\].out_top=-1"),
]


# Row values: the fake kernel sees only the table's shape and dtype (its checks: BAD_INPUTS).
test_bad_placement_row_op, test_bad_placement_row_numba = bad_input_tests(BAD_ROWS, fake=False)
