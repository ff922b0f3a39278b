"""fastprep.ops._resize_windows: the GPU decode split's batched resize of whole windows (any device)
has the definition's weights (resample_axis) and the kernel's bits (resized_crop_batch), on the CPU
here; tests/loader/test_device_split.py runs it on CUDA against the CPU."""

import numpy as np
import pytest
import torch

from fastprep.ops._resize import geometry_table
from fastprep.ops._resize_weights import resample_axis
from fastprep.ops._resize_windows import axis_tables, resized_crop_windows

pytestmark = pytest.mark.one_backend


# (size, resized, first, count): down and up, by a little and a lot, identity, crops of the resize
AXES = [(700, 224, 0, 224), (300, 224, 0, 224), (224, 224, 0, 224), (91, 256, 16, 224), (1024, 37, 3, 30),
        (5, 3, 0, 3), (1, 7, 2, 4), (4000, 224, 0, 224), (257, 256, 0, 256), (333, 333, 10, 100), (64, 71, 0, 71)]


@pytest.mark.parametrize("antialias", [True, False])
def test_axis_tables_are_resample_axis(antialias):
    for reverse in (False, True):
        count = 24  # every case's tables at once, through the count outputs they share
        cases = [(s, r, f, count) for s, r, f, c in AXES if f + count <= r] + [(9, 30, 1, count)]
        size, out, first = (torch.tensor(column) for column in list(zip(*cases))[:3])
        start, w, precision = axis_tables(size, out, antialias, torch.full((len(cases),), reverse), first, count)
        for i, (size, out, first, n) in enumerate(cases):
            a = resample_axis(size, out, antialias, reverse, first, n)
            taps = a.w.shape[1]
            assert int(precision[i]) == a.precision, (size, out)
            assert np.array_equal(start[i].numpy(), a.start), (size, out, first)
            assert np.array_equal(w[i, :, :taps].numpy(), a.w) and not w[i, :, taps:].any(), (size, out, first)


def _windows(g, sizes):
    return [torch.randint(0, 256, (3, h, w), dtype=torch.uint8, generator=g) for h, w in sizes]


@pytest.mark.parametrize("dtype,scale,norm", [(torch.uint8, 1.0, False), (torch.float32, 1 / 255, True),
                                              (torch.float16, 1 / 255, False), (torch.bfloat16, 1.0, True)])
@pytest.mark.parametrize("antialias", [True, False])
@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA device"))])
def test_the_kernels_bits(dtype, scale, norm, antialias, device):
    g = torch.Generator().manual_seed(int(antialias))
    sizes = [(90, 120), (31, 40), (40, 31), (200, 64), (32, 32), (7, 300)]
    windows = _windows(g, sizes)
    big = [torch.randint(0, 256, (h + 5, 3, w + 4), dtype=torch.uint8, generator=g) for h, w in sizes[:2]]
    windows += [b.permute(1, 0, 2)[:, 2:2 + h, 1:1 + w] for b, (h, w) in zip(big, sizes)]  # strided views, as
    # nvJPEG's images cropped to their windows
    sizes += sizes[:2]
    n = len(windows)
    hflips, vflips = [i % 2 == 0 for i in range(n)], [i % 3 == 0 for i in range(n)]
    place = ([0, 40, 0, 0, 33, 0, 0, 48], [0, 36, 0, 64, 35, 0, 40, 0], [0, 4, 0, 0, 1, 0, 0, 8],
             [0, 2, 0, 30, 0, 0, 5, 0])  # Resize + CenterCrop's placements, and 0s: the output's size
    mean, std = ([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]) if norm else (None, None)
    want = torch.empty(n, 3, 32, 34, dtype=dtype)
    heights, widths = [h for h, _ in sizes], [w for _, w in sizes]
    table = geometry_table(n, height=heights, width=widths, hflip=hflips, vflip=vflips, resized_height=place[0],
                           resized_width=place[1], out_top=place[2], out_left=place[3],
                           transpose=[i % 4 == 1 for i in range(n)])  # two written transposed (out not square)
    torch.ops.fastprep.resized_crop_batch.default(windows, table, want, "CHW", antialias, scale, mean, std)
    got = resized_crop_windows([x.to(device) for x in windows], table, torch.empty_like(want, device=device),
                               antialias, scale, mean, std)
    assert got.device.type == device and got.dtype == dtype
    assert torch.equal(got.cpu().view(torch.uint8), want.view(torch.uint8))


def _whole(wins, **columns):
    """The geometry rows reading each window whole (and any other named columns)."""
    return geometry_table(len(wins), height=[int(w.shape[-2]) for w in wins], width=[int(w.shape[-1]) for w in wins],
                          **columns)


def test_refuses_a_normalize_on_uint8():
    win = torch.zeros(3, 4, 4, dtype=torch.uint8)
    with pytest.raises(RuntimeError, match="mean=None and std=None for a torch.uint8 output"):
        resized_crop_windows([win], _whole([win]), torch.empty(1, 3, 2, 2, dtype=torch.uint8), mean=[0.5], std=[0.5])


def test_refuses_what_does_not_match_out():
    win, out = torch.zeros(3, 4, 4, dtype=torch.uint8), torch.empty(1, 3, 2, 2)
    one = _whole([win])
    for args, match in [(([win, win], one, out), r"expected 1 windows \(out has 1 images\), got 2"),
                        (([win], _whole([win, win]), out), r"expected geometry to be a \[1, 11\] table"),
                        (([win], one.int(), out), r"expected geometry to be a torch.int64 tensor"),
                        (([win.float()], one, out), r"windows\[0\] to be a non-empty uint8"),
                        (([win[:1]], one, out), r"uint8 \[3, h, w\].*\(1, 4, 4\)"),
                        (([win], one, out[0]), r"out to be \[N, 3, H, W\], got \(3, 2, 2\)"),
                        (([win], geometry_table(1, height=[5], width=[4]), out),
                         r"geometry\[0\].top \+ geometry\[0\].height <= 4 \(the height of windows\[0\]\)"),
                        (([win], _whole([win[:, :, 1:]]), out), r"to read its window whole")]:
        with pytest.raises(ValueError, match=match):
            resized_crop_windows(*args)


@pytest.mark.parametrize("place, match", [
    (([0, 0], [0, 0], [0, 1], [0, 0]), r"geometry\[1\].out_top \+ out's height <= geometry\[1\].resized_height \(32\)"),
    (([0, 0], [0, 40], [0, 0], [0, 9]), r"geometry\[1\].out_left \+ out's width <= geometry\[1\].resized_width \(40\)"),
    (([0, 0], [0, 0], [0, -1], [0, 0]), r"geometry\[1\].out_top >= 0, got geometry\[1\].out_top=-1"),
    (([0, 0], [0, -3], [0, 0], [0, 0]), r"geometry\[1\].resized_width >= 0"),
    (([16, 0], [0, 0], [0, 0], [0, 0]), r"geometry\[0\].resized_height \(16\)"),
])
def test_refuses_a_place_outside_the_resized_window(place, match):
    wins = [torch.zeros(3, 5, 6, dtype=torch.uint8)] * 2
    out = torch.full((2, 3, 32, 32), 7, dtype=torch.uint8)
    table = _whole(wins, resized_height=place[0], resized_width=place[1], out_top=place[2], out_left=place[3])
    with pytest.raises(ValueError, match=match):
        resized_crop_windows(wins, table, out)
    assert (out == 7).all()  # nothing written
