"""resized_crop / resized_crop_batch against torch's own resize of the window (the computation
torchvision v2's resized_crop runs on uint8 CPU images) and torchvision's ToDtype + Normalize
arithmetic, on every layout and both backends; the weights' definitions against each other; the
batch against the per-sample op; opcheck, bad input and autograd."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fastprep
import fastprep.numba_kernels._resize as numba_resize
from fastprep.ops._resize import Axis, geometry_table, resample_axis, resized_crop_batch_torch, resized_crop_torch

from helpers.op_calls import bad_input_tests, call, requires_native

pytestmark = pytest.mark.kernel

IMPLS = [fastprep.resized_crop, numba_resize.resized_crop, resized_crop_torch]
BATCH_IMPLS = [fastprep.resized_crop_batch, numba_resize.resized_crop_batch, resized_crop_batch_torch]
MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]  # ImageNet's


def _image(shape, seed=0):
    return torch.from_numpy(np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8))


def _views():
    """(name, image, layout, its CHW view [N, C, H, W]) for every kind of source."""
    chw, hwc, big = _image((3, 37, 41)), _image((37, 41, 3), 1), _image((4, 75, 83), 2)
    return [
        ("chw", chw, "CHW", chw[None]),
        ("hwc", hwc, "HWC", hwc.permute(2, 0, 1)[None]),
        ("hwc_from_permuted_chw", chw.permute(1, 2, 0), "HWC", chw[None]),
        ("stepped_planes", big[:, ::2, ::2], "CHW", big[None, :, ::2, ::2]),
        ("stepped_hwc_rgba", big.permute(1, 2, 0)[::2, 1::2], "HWC", big[None, :, ::2, 1::2]),
        ("one_channel", chw[1:2], "CHW", chw[None, 1:2]),
        ("batch_hwc", _image((2, 37, 41, 3), 3), "HWC", _image((2, 37, 41, 3), 3).permute(0, 3, 1, 2)),
    ]


def reference(nchw, window, size, hflip=False, antialias=True, out_dtype=None, scale=1.0, mean=None, std=None):
    """What torchvision v2 computes: interpolate on the uint8 window (its resized_crop on CPU),
    flip, ToDtype (x.to(dtype).mul_(scale)) and Normalize (x.sub(mean).div_(std))."""
    top, left, height, width = window
    x = F.interpolate(nchw[:, :, top:top + height, left:left + width], size=size, mode="bilinear",
                      align_corners=False, antialias=antialias)
    x = x.flip(-1) if hflip else x
    if out_dtype is None:
        return x
    x = x.to(torch.float32).mul_(scale)
    if mean is not None:
        x = x.sub(torch.tensor(mean).view(-1, 1, 1)).div_(torch.tensor(std).view(-1, 1, 1))
    return x.to(out_dtype)


# Downscales (the antialias filter wider than 2 taps), upscales, one axis the same size (torch
# skips it), a one-pixel window, a one-pixel output.
WINDOWS = [((2, 3, 30, 35), (11, 9)), ((5, 1, 9, 7), (16, 20)), ((0, 0, 37, 20), (37, 13)), ((4, 6, 1, 1), (3, 2)),
           ((1, 2, 20, 25), (1, 1))]


@pytest.mark.parametrize("antialias", [True, False])
@pytest.mark.parametrize("window,size", WINDOWS)
def test_uint8_is_torchs_resize_of_the_window(window, size, antialias):
    for name, img, layout, nchw in _views():
        want = reference(nchw, window, size, False, antialias)
        wflip = want.flip(-1)
        for impl in IMPLS:
            for hflip, expected in ((False, want), (True, wflip)):
                out = impl(img, *window, *size, layout, hflip, antialias)
                expected = expected if img.dim() == 4 else expected[0]
                assert out.is_contiguous() and torch.equal(out, expected), (name, impl.__module__, hflip)


@pytest.mark.parametrize("out_dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_float_output_is_todtype_then_normalize(out_dtype):
    """One rounding to float16 / bfloat16, of torchvision's float32 result."""
    img = _image((37, 41, 3), 5)
    nchw = img.permute(2, 0, 1)[None]
    cases = [(1 / 255, MEAN, STD), (1 / 255, None, None), (1.0, [100.0], [2.5]), (0.5, None, None)]
    for window, size in WINDOWS[:3]:
        for scale, mean, std in cases:
            want = reference(nchw, window, size, True, True, out_dtype, scale, mean, std)[0]
            for impl in IMPLS:
                out = impl(img, *window, *size, "HWC", True, True, out_dtype, scale, mean, std)
                assert out.dtype == out_dtype and torch.equal(out, want), (impl.__module__, window, scale, mean)


def test_the_imagenet_pipeline():
    """RandomResizedCrop(224)'s window, flip, ToDtype(float32, scale=True), Normalize: one op."""
    img = _image((300, 280, 3), 6)
    window = (17, 30, 251, 203)
    want = reference(img.permute(2, 0, 1)[None], window, (224, 224), True, True, torch.float32, 1 / 255, MEAN, STD)
    got = fastprep.resized_crop(img, *window, 224, 224, "HWC", True, out_dtype=torch.float32, scale=1 / 255,
                                mean=MEAN, std=STD)
    assert torch.equal(got, want[0])


def test_batch_is_the_per_sample_op_into_the_slots():
    imgs = [_image((37, 41, 3), 7), _image((50, 30, 3), 8), _image((3, 29, 33), 9).permute(1, 2, 0)]
    tops, lefts, heights, widths = [0, 5, 3], [2, 0, 4], [37, 40, 20], [30, 30, 29]
    hflips = [True, False, True]
    for dtype, scale, mean, std in [(torch.uint8, 1.0, None, None), (torch.bfloat16, 1 / 255, MEAN, STD)]:
        want = torch.stack([fastprep.resized_crop(img, tops[i], lefts[i], heights[i], widths[i], 16, 12, "HWC",
                                                  hflips[i], True, dtype, scale, mean, std)
                            for i, img in enumerate(imgs)])
        for impl in BATCH_IMPLS:
            out = torch.full((3, 3, 16, 12), 7, dtype=dtype)
            table = geometry_table(3, top=tops, left=lefts, height=heights, width=widths, hflip=hflips)
            impl(imgs, table, out, "HWC", True, scale, mean, std)
            assert torch.equal(out, want), impl.__module__


def test_batch_of_none_and_of_no_channels():
    for impl in BATCH_IMPLS:
        impl([], geometry_table(0), torch.empty(0, 3, 4, 4))
        impl([_image((0, 5, 6))], _rows([0], [0], [5], [6]), torch.empty(1, 0, 4, 4))
    assert fastprep.resized_crop(_image((0, 5, 6)), 0, 0, 5, 6, 4, 4).shape == (0, 4, 4)


def test_weights_definitions_agree():
    """The contract's numpy weights (what the torch-ops implementation runs) and the Numba
    kernels' (resize_weights.cpp's mirror), over sizes where the edge cases lie."""
    for size, out in [(1, 5), (5, 1), (7, 7), (375, 224), (224, 375), (1000, 3), (3, 1000), (641, 224), (97, 96)]:
        for antialias in (True, False):
            for reverse in (False, True):
                a = resample_axis(size, out, antialias, reverse)
                start, count, w, taps, precision = numba_resize.resample_axis(size, out, antialias, reverse, 0, out)
                assert (taps, precision) == (a.w.shape[1], a.precision)
                assert np.array_equal(start, a.start) and np.array_equal(count, a.count)
                assert np.array_equal(w.reshape(out, taps), a.w)
                assert a.w.max() < 2**15 and (a.w.sum(1) - 2**precision).max() <= taps  # int16, sums near 1


def _taps(a: Axis) -> list[dict[int, int]]:
    """{input: weight} of each output of an axis table, the zero weights left out."""
    return [{int(a.start[i]) + k: int(a.w[i, k]) for k in range(a.count[i]) if a.w[i, k]} for i in range(len(a.start))]


def test_a_flip_before_the_resize_is_the_flip_after_it():
    """Each axis table is its own mirror image (checked on random sizes, 40,000 pairs once; not
    proven for all), so resizing a flipped window is flipping the resized one: a flip before
    RandomResizedCrop is this op on the mirrored window with hflip."""
    rng = np.random.default_rng(12)
    for size, out in zip(rng.integers(1, 700, 60).tolist(), rng.integers(1, 300, 60).tolist()):
        for antialias in (True, False):
            taps = _taps(resample_axis(size, out, antialias))
            assert taps == [{size - 1 - j: w for j, w in t.items()} for t in taps[::-1]], (size, out, antialias)
    img = _image((40, 50, 3), 13)
    got = fastprep.resized_crop(img.flip(1), 3, 7, 30, 33, 17, 19, "HWC")
    assert torch.equal(got, fastprep.resized_crop(img, 3, 50 - 7 - 33, 30, 33, 17, 19, "HWC", hflip=True))


@st.composite
def _cases(draw):
    h, w, c = draw(st.integers(1, 40)), draw(st.integers(1, 40)), draw(st.sampled_from([1, 3, 4]))
    top, left = draw(st.integers(0, h - 1)), draw(st.integers(0, w - 1))
    window = (top, left, draw(st.integers(1, h - top)), draw(st.integers(1, w - left)))
    hwc = draw(st.booleans())
    img = _image((h, w, c) if hwc else (c, h, w), draw(st.integers(0, 2**32 - 1)))
    size = (draw(st.integers(1, 40)), draw(st.integers(1, 40)))
    return img, "HWC" if hwc else "CHW", window, size, draw(st.booleans()), draw(st.booleans())


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_cases())
def test_property_native_numba_and_torch_agree(case):
    img, layout, window, size, hflip, antialias = case
    nchw = img.permute(2, 0, 1)[None] if layout == "HWC" else img[None]
    want = reference(nchw, window, size, hflip, antialias)[0]
    for impl in IMPLS:
        assert torch.equal(impl(img, *window, *size, layout, hflip, antialias), want)


@requires_native
def test_native_and_numba_give_the_same_float_bits():
    img = _image((64, 70, 3), 10)
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        args = (img, 3, 5, 60, 61, 23, 29, "HWC", True, True, dtype, 1 / 255, MEAN, STD)
        native, numba = torch.ops.fastprep.resized_crop(*args), numba_resize.resized_crop(*args)
        assert torch.equal(native.view(torch.int16 if dtype != torch.float32 else torch.int32),
                           numba.view(torch.int16 if dtype != torch.float32 else torch.int32))


@pytest.mark.parametrize("args", [(_image((9, 8, 3)), 1, 2, 6, 5, 4, 3, "HWC", True, True, None, 1.0, None, None),
                                  (_image((2, 3, 9, 8)), 0, 0, 9, 8, 12, 5, "CHW", False, False, torch.bfloat16,
                                   1 / 255, MEAN, STD)])
def test_opcheck_resized_crop(args):
    torch.library.opcheck(torch.ops.fastprep.resized_crop.default, args)


def test_opcheck_resized_crop_batch():
    table = geometry_table(2, top=[0, 1], left=[1, 0], height=[9, 5], width=[6, 10], hflip=[True, False])
    args = ([_image((9, 8, 3)), _image((7, 10, 3))], table, torch.empty(2, 3, 4, 4), "HWC", True, 1 / 255, MEAN, STD)
    torch.library.opcheck(torch.ops.fastprep.resized_crop_batch.default, args)


def test_batch_refuses_an_out_that_requires_grad():
    out = torch.zeros(1, 3, 4, 4, requires_grad=True)
    with pytest.raises(RuntimeError, match="resized_crop_batch: out requires grad, but the op is not differentiable"):
        fastprep.resized_crop_batch([_image((9, 8, 3))], _rows([0], [0], [9], [8]), out, "HWC")
    with torch.no_grad():
        fastprep.resized_crop_batch([_image((9, 8, 3))], _rows([0], [0], [9], [8]), out, "HWC")
    assert torch._C._dispatch_has_kernel_for_dispatch_key("fastprep::resized_crop_batch", "Autograd")


def _u8(*shape):
    return torch.zeros(*shape, dtype=torch.uint8)


def _rows(tops, lefts, heights, widths, **columns):
    """The batch op's geometry table of these reads (and any other named columns)."""
    return geometry_table(len(tops), top=tops, left=lefts, height=heights, width=widths, **columns)


_OUT = torch.empty(1, 3, 4, 4)
BAD_INPUTS = [
    (call("resized_crop", torch.zeros(3, 4, 4), 0, 0, 1, 1, 2, 2),
     r"resized_crop: expected img to be a torch.uint8 tensor, got torch.float32"),
    (call("resized_crop", _u8(4, 4), 0, 0, 1, 1, 2, 2),
     r"resized_crop: expected img to be a 3-D \[C, H, W\] image or a 4-D batch of them, got a 2-D tensor"),
    (call("resized_crop", _u8(3, 4, 4), 0, 0, 1, 1, 2, 2, "HCW"), r"expected layout to be 'CHW' or 'HWC', got 'HCW'"),
    (call("resized_crop", _u8(3, 4, 4), 0, 0, 0, 1, 2, 2), r"resized_crop: expected height > 0, got height=0"),
    (call("resized_crop", _u8(3, 4, 4), -1, 0, 1, 1, 2, 2), r"resized_crop: expected top >= 0, got top=-1"),
    (call("resized_crop", _u8(3, 4, 5), 2, 0, 3, 1, 2, 2),
     r"resized_crop: expected top \+ height <= 4 \(the height of the image\), got top=2, height=3"),
    (call("resized_crop", _u8(4, 5, 3), 0, 1, 1, 2**63 - 1, 2, 2, "HWC"),
     r"expected left \+ width <= 5 \(the width of the image\), got left=1, width=9223372036854775807"),
    (call("resized_crop", _u8(3, 4, 4), 0, 0, 2, 2, 0, 2), r"resized_crop: expected out_height > 0, got out_height=0"),
    (call("resized_crop", _u8(3, 4, 4), 0, 0, 2, 2, 2, 2**62, "CHW", False, True, torch.float32),
     r"resized_crop: expected an output of at most 2\^63 - 1 bytes, got \[3, 2, 4611686018427387904\] of "
     r"torch.float32 from out_height=2, out_width=4611686018427387904"),
    (call("resized_crop", _u8(3, 4, 4), 0, 0, 2, 2, 2, 2, "CHW", False, True, torch.int32),
     r"expected out_dtype to be torch.uint8, torch.float32, torch.float16 or torch.bfloat16, got torch.int32"),
    (call("resized_crop", _u8(3, 4, 4), 0, 0, 2, 2, 2, 2, "CHW", False, True, None, 0.5),
     r"resized_crop: expected scale=1 for a torch.uint8 output, got scale=0.5"),
    (call("resized_crop", _u8(3, 4, 4), 0, 0, 2, 2, 2, 2, "CHW", False, True, None, 1.0, [0.5], [0.5]),
     r"expected mean=None and std=None for a torch.uint8 output \(Normalize needs a float output\)"),
    (call("resized_crop", _u8(3, 4, 4), 0, 0, 2, 2, 2, 2, "CHW", False, True, torch.float32, math.inf),
     r"resized_crop: expected scale to be a finite float32 value, got scale=inf"),
    (call("resized_crop", _u8(3, 4, 4), 0, 0, 2, 2, 2, 2, "CHW", False, True, torch.float32, 1.0, [0.5]),
     r"resized_crop: expected mean and std together, got only mean"),
    (call("resized_crop", _u8(3, 4, 4), 0, 0, 2, 2, 2, 2, "CHW", False, True, torch.float32, 1.0, [0.5, 0.5], [1.0]),
     r"resized_crop: expected mean to have 1 or 3 values \(one per channel\), got 2"),
    (call("resized_crop", _u8(3, 4, 4), 0, 0, 2, 2, 2, 2, "CHW", False, True, torch.half, 1.0, [0.5], [1.0, 0.0, 2.0]),
     r"resized_crop: expected std\[1\] to be nonzero in float32 \(Normalize divides by it\), got std\[1\]=0"),
    (call("resized_crop", _u8(3, 4, 4), 0, 0, 2, 2, 2, 2, "CHW", False, True, torch.half, 1.0, [0.5], [1e-50]),
     r"expected std\[0\] to be nonzero in float32 \(Normalize divides by it\), got std\[0\]=1e-50"),
    (call("resized_crop", _u8(3, 4, 4), 0, 0, 2, 2, 2, 2, "CHW", False, True, torch.half, 1.0, [1, math.nan, 1], [1]),
     r"resized_crop: expected mean\[1\] to be a finite float32 value, got mean\[1\]=nan"),
    (call("resized_crop_batch", [_u8(4, 4, 3)], _rows([0], [0], [4], [4]),
          torch.empty(1, 3, 4, 4, dtype=torch.int16)),
     r"resized_crop_batch: expected out to be a torch.uint8, torch.float32, torch.float16 or torch.bfloat16 tensor, "
     r"got torch.int16"),
    (call("resized_crop_batch", [_u8(4, 4, 3)], _rows([0], [0], [4], [4]), torch.empty(2, 3, 4, 4)),
     r"resized_crop_batch: expected out to be a contiguous \[1, C, out_height, out_width\] tensor \(one image per "
     r"input\), got \[2, 3, 4, 4\]"),
    (call("resized_crop_batch", [_u8(4, 4, 3)], _rows([0], [0], [4], [4]), torch.empty(1, 3, 4, 8)[..., ::2], "HWC"),
     r"got \[1, 3, 4, 4\] \(not contiguous\)"),
    (call("resized_crop_batch", [_u8(4, 4, 3)], _rows([0], [0], [4], [4]), torch.empty(1, 3, 0, 4), "HWC"),
     r"resized_crop_batch: expected out's height and width > 0, got out of shape \[1, 3, 0, 4\]"),
    (call("resized_crop_batch", [_u8(4, 4, 3)], _rows([0, 1], [0, 0], [4, 4], [4, 4]), _OUT, "HWC"),
     r"resized_crop_batch: expected geometry to be a \[1, 11\] table \(one row per image; columns top, left, height, "
     r"width, hflip, vflip, resized_height, resized_width, out_top, out_left, transpose\), got \[2, 11\]"),
    (call("resized_crop_batch", [_u8(4, 4, 3)], _rows([0], [0], [4], [4])[:, :10], _OUT, "HWC"),
     r"resized_crop_batch: expected geometry to be a \[1, 11\] table .*, got \[1, 10\]"),
    (call("resized_crop_batch", [_u8(4, 4, 3)], _rows([0], [0], [4], [4])[0], _OUT, "HWC"),
     r"resized_crop_batch: expected geometry to be a \[1, 11\] table .*, got \[11\]"),
    (call("resized_crop_batch", [_u8(4, 4, 3)], _rows([0], [0], [4], [4]).int(), _OUT, "HWC"),
     r"resized_crop_batch: expected geometry to be a torch.int64 tensor, got torch.int32"),
    (call("resized_crop_batch", [_u8(4, 4, 3)], _rows([0], [0], [4], [4]), torch.empty(1, 3, 4, 4, dtype=torch.uint8),
          "HWC", True, 1 / 255),
     r"resized_crop_batch: expected scale=1 for a torch.uint8 output, got scale=0.00392157"),
    (call("resized_crop_batch", [_u8(4, 4, 3), torch.zeros(4, 4, 3)], _rows([0, 0], [0, 0], [4, 4], [4, 4]),
          torch.empty(2, 3, 4, 4), "HWC"),
     r"resized_crop_batch: expected imgs\[1\] to be a torch.uint8 tensor, got torch.float32"),
    (call("resized_crop_batch", [_u8(3, 4, 4)], _rows([0], [0], [4], [4]), _OUT, "HWC"),
     r"resized_crop_batch: expected imgs\[0\] to have 3 channels \(as out\), got 4"),
    (call("resized_crop_batch", [_u8(4, 4, 3), _u8(2, 4, 4, 3)], _rows([0, 0], [0, 0], [4, 4], [4, 4]),
          torch.empty(2, 3, 4, 4), "HWC"),
     r"resized_crop_batch: expected imgs\[1\] to be a 3-D \[H, W, C\] image, got a 4-D tensor"),
    (call("resized_crop_batch", [_OUT[0].view(torch.uint8)[:3, :4, :4]], _rows([0], [0], [4], [4]), _OUT),
     r"resized_crop_batch: imgs\[0\] overlaps out in memory, so writing out would change imgs\[0\] while it is read"),
    (call("resized_crop_batch", [_u8(4, 4, 3).to("meta")], _rows([0], [0], [4], [4]), torch.empty(1, 3, 4, 4), "HWC"),
     r"resized_crop_batch: expected imgs\[0\] on out's device \(cpu\), got meta"),
]

# The table's values: checked by the op (either backend) before anything is written; a fake kernel
# sees the table's shape and dtype only (its values are not known while tracing).
BAD_ROWS = [
    (call("resized_crop_batch", [_u8(4, 4, 3), _u8(4, 5, 3)], _rows([0, 1], [0, 0], [4, 3], [4, 6]),
          torch.empty(2, 3, 4, 4), "HWC"),
     r"resized_crop_batch: expected geometry\[1\].left \+ geometry\[1\].width <= 5 \(the width of imgs\[1\]\), got "
     r"geometry\[1\].left=0, geometry\[1\].width=6"),
    (call("resized_crop_batch", [_u8(4, 4, 3)], _rows([-2], [0], [4], [4]), _OUT, "HWC"),
     r"resized_crop_batch: expected geometry\[0\].top >= 0, got geometry\[0\].top=-2"),
    (call("resized_crop_batch", [_u8(4, 4, 3)], _rows([0], [0], [4], [0]), _OUT, "HWC"),
     r"resized_crop_batch: expected geometry\[0\].width > 0, got geometry\[0\].width=0"),
    (call("resized_crop_batch", [_u8(4, 4, 3)], _rows([0], [2**62], [4], [2**62]), _OUT, "HWC"),
     r"expected geometry\[0\].left \+ geometry\[0\].width <= 4 \(the width of imgs\[0\]\), got "
     r"geometry\[0\].left=4611686018427387904, geometry\[0\].width=4611686018427387904"),
    (call("resized_crop_batch", [_u8(4, 4, 3)], _rows([0], [0], [4], [4], hflip=[2]), _OUT, "HWC"),
     r"resized_crop_batch: expected geometry\[0\].hflip to be 0 or 1, got geometry\[0\].hflip=2"),
    (call("resized_crop_batch", [_u8(4, 4, 3)] * 2, _rows([0, 0], [0, 0], [4, 4], [4, 4], vflip=[0, -1]),
          torch.empty(2, 3, 4, 4), "HWC"),
     r"resized_crop_batch: expected geometry\[1\].vflip to be 0 or 1, got geometry\[1\].vflip=-1"),
]


# Row values: the fake kernel sees only the table's shape and dtype (its checks: BAD_INPUTS).
test_bad_row_op, test_bad_row_numba = bad_input_tests(BAD_ROWS, fake=False)


@pytest.mark.parametrize("case,match", BAD_ROWS[:1], ids=["0"])
def test_fake_kernel_takes_any_rows(case, match):
    """Fake mode checks the table's shape and dtype: the rows' values are the op's to check when it runs."""
    case.fake()


test_bad_input_op, test_bad_input_numba, test_bad_input_fake = bad_input_tests(BAD_INPUTS)


def test_torchvision_v2_gives_these_bits():
    """torchvision v2's own kernels (bash .ci/torchvision's venv; skipped where it does not import)."""
    TF = pytest.importorskip("torchvision.transforms.v2.functional")
    img = _image((300, 280, 3), 11)
    for window, hflip, antialias in [((17, 30, 251, 203), True, True), ((0, 5, 120, 99), False, False)]:
        x = TF.resized_crop(img.permute(2, 0, 1), *window, [224, 224], antialias=antialias)
        x = TF.normalize(TF.to_dtype(TF.horizontal_flip(x) if hflip else x, torch.float32, scale=True), MEAN, STD)
        got = fastprep.resized_crop(img, *window, 224, 224, "HWC", hflip, antialias, torch.float32, 1 / 255, MEAN, STD)
        assert torch.equal(got, x)
