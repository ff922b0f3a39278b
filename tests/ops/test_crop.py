"""crop / random_crop against numpy slicing, across dtypes, layouts, strides and backends."""

import numpy as np
import pytest
import torch
from scipy import stats

import fastprep
import fastprep.numba_kernels._crop as numba_crop
import fastprep.ops._checks as checks
from fastprep.numba_kernels._counter_rng import derive_seed, random_word, uniform_below
from fastprep.ops._crop import crop_torch, random_crop_torch

from helpers.op_calls import bad_input_tests, call, requires_native

pytestmark = pytest.mark.kernel

DTYPES = [torch.uint8, torch.float32, torch.float16, torch.bfloat16]
IMPLS = [fastprep.crop, numba_crop.crop, crop_torch]
RANDOM_IMPLS = [fastprep.random_crop, numba_crop.random_crop, random_crop_torch]


def _image(shape, dtype, seed=0):
    x = torch.from_numpy(np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8))
    return x if dtype == torch.uint8 else x.to(dtype) / 7  # non-integer floats


def _views(dtype):
    """(name, tensor, layout, its CHW [N, C, H, W] equivalent) for every kind of source."""
    chw = _image((3, 20, 17), dtype)
    hwc = _image((20, 17, 3), dtype, 1)
    batch = _image((2, 4, 20, 17), dtype, 2)
    big = _image((3, 41, 35), dtype, 3)
    return [
        ("chw", chw, "CHW", chw[None]),
        ("hwc", hwc, "HWC", hwc.permute(2, 0, 1)[None]),
        ("hwc_from_permuted_chw", chw.permute(1, 2, 0), "HWC", chw[None]),
        ("chw_from_permuted_hwc", hwc.permute(2, 0, 1), "CHW", hwc.permute(2, 0, 1)[None]),
        ("batch_chw", batch, "CHW", batch),
        ("batch_hwc", batch.permute(0, 2, 3, 1), "HWC", batch),
        ("stepped", big[:, ::2, ::2], "CHW", big[None, :, ::2, ::2]),
        ("stepped_hwc", big.permute(1, 2, 0)[1::2, ::2], "HWC", big[None, :, 1::2, ::2]),
        ("one_channel", chw[1:2], "CHW", chw[None, 1:2]),
        ("channel_step", batch[:, ::3], "CHW", batch[:, ::3]),
    ]


def _ref_crop(nchw, top, left, height, width, fill=0.0):
    """numpy reference with a source-coordinate window that may leave the image (fill)."""
    a = nchw.float().numpy()
    n, c, h, w = a.shape
    out = np.full((n, c, height, width), fill, dtype=np.float32)
    for y in range(height):
        for x in range(width):
            if 0 <= top + y < h and 0 <= left + x < w:
                out[:, :, y, x] = a[:, :, top + y, left + x]
    return out


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("window", [(0, 0, 1, 1), (3, 2, 10, 9), (0, 0, 10, 8), (9, 7, 1, 1)])
def test_crop_matches_slicing(dtype, window):
    for name, x, layout, nchw in _views(dtype):
        top, left, height, width = window
        expected = _ref_crop(nchw, top, left, height, width)
        if x.dim() == 3:
            expected = expected[0]
        for impl in IMPLS:
            out = impl(x, top, left, height, width, layout)
            assert out.dtype == dtype and out.is_contiguous(), (name, impl)
            np.testing.assert_array_equal(out.float().numpy(), expected, err_msg=f"{name} {impl}")


def test_crop_whole_image_is_a_chw_copy():
    x = _image((6, 5, 3), torch.uint8)
    out = fastprep.crop(x, 0, 0, 6, 5, "HWC")
    assert torch.equal(out, x.permute(2, 0, 1)) and out.data_ptr() != x.data_ptr()


def _params(H, W, height, width, seed, pad=False):
    """The offset definition, restated from the spec: padded sizes, then shifted back."""
    ph = height - H if pad and H < height else 0
    pw = width - W if pad and W < width else 0
    top = int(uniform_below(np.uint64(random_word(np.int64(seed), np.uint64(0))), np.uint64(H + 2 * ph - height + 1)))
    left = int(uniform_below(np.uint64(random_word(np.int64(seed), np.uint64(1))), np.uint64(W + 2 * pw - width + 1)))
    return top - ph, left - pw


@pytest.mark.parametrize("seed", [0, 1, -5, 2**63 - 1, -(2**63), 123456789])
@pytest.mark.parametrize("size", [(10, 8), (20, 17), (1, 1), (25, 30)])
def test_random_crop_params_definition(seed, size):
    height, width = size
    pad = height > 20 or width > 17
    top, left = fastprep.random_crop_params(20, 17, height, width, seed, pad)
    assert (top, left) == _params(20, 17, height, width, seed, pad)
    assert min(0, 20 - height) <= top <= max(0, 20 - height)
    assert min(0, 17 - width) <= left <= max(0, 17 - width)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("pad,size,fill", [(False, (7, 5), 0.0), (False, (20, 17), 0.0),
                                           (True, (25, 30), 3.0), (True, (8, 30), 0.0),
                                           (True, (24, 4), 255.0)])
def test_random_crop_matches_reference_and_aligns_across_views(dtype, pad, size, fill):
    height, width = size
    seed = 42
    for name, x, layout, nchw in _views(dtype):
        n, _, h, w = nchw.shape
        batched = x.dim() == 4
        expected = []
        for i in range(n):
            s = int(derive_seed(np.int64(seed), np.int64(i))) if batched else seed
            top, left = _params(h, w, height, width, s, pad)
            expected.append(_ref_crop(nchw[i:i + 1], top, left, height, width,
                                      float(torch.tensor(fill).to(dtype)))[0])
        expected = np.stack(expected) if batched else expected[0]
        for impl in RANDOM_IMPLS:
            out = impl(x, height, width, seed, layout, pad, fill)
            assert out.dtype == dtype and out.is_contiguous()
            np.testing.assert_array_equal(out.float().numpy(), expected, err_msg=f"{name} {impl}")


def test_random_crop_same_window_for_every_dtype_and_layout():
    base = torch.arange(30 * 40, dtype=torch.float32).reshape(1, 30, 40).expand(3, 30, 40)
    results = []
    for dtype in DTYPES:
        x = base.to(dtype) if dtype != torch.uint8 else (base % 251).to(torch.uint8)
        for layout, t in (("CHW", x), ("HWC", x.permute(1, 2, 0))):
            out = fastprep.random_crop(t, 11, 13, 2024, layout)
            results.append(out.float() if dtype != torch.uint8 else out.float())
    top, left = fastprep.random_crop_params(30, 40, 11, 13, 2024)
    idx = base[0, top:top + 11, left:left + 13]
    for r, dtype in zip(results, [d for d in DTYPES for _ in range(2)]):
        ref = (idx % 251) if dtype == torch.uint8 else idx.to(dtype).float()
        assert torch.equal(r[0], ref)


def test_random_crop_offsets_are_uniform():
    H, W, height, width = 20, 30, 11, 25  # 10 x 6 positions
    counts = np.zeros((10, 6))
    for seed in range(6000):
        top, left = fastprep.random_crop_params(H, W, height, width, seed)
        counts[top, left] += 1
    assert stats.chisquare(counts.ravel()).pvalue > 1e-4
    assert stats.chisquare(counts.sum(1)).pvalue > 1e-4 and stats.chisquare(counts.sum(0)).pvalue > 1e-4


def test_batch_samples_get_derived_seeds():
    x = _image((5, 3, 30, 30), torch.uint8)
    out = fastprep.random_crop(x, 9, 9, 7)
    for i in range(5):
        assert torch.equal(out[i], fastprep.random_crop(x[i], 9, 9, fastprep.derive_seed(7, i)))


@requires_native
@pytest.mark.parametrize("dtype", DTYPES)
def test_native_and_numba_give_the_same_bits(dtype):
    for _, x, layout, _ in _views(dtype):
        for seed in range(5):
            for pad, size in ((False, (9, 7)), (True, (23, 19))):
                native = torch.ops.fastprep.random_crop(x, *size, seed, layout, pad, 2.5 if dtype != torch.uint8 else 9)
                numba = numba_crop.random_crop(x, *size, seed, layout, pad, 2.5 if dtype != torch.uint8 else 9)
                assert torch.equal(native.view(torch.uint8), numba.view(torch.uint8))
        assert torch.equal(torch.ops.fastprep.crop(x, 1, 2, 5, 6, layout), numba_crop.crop(x, 1, 2, 5, 6, layout))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_rounds_to_inf_is_torchs_conversion(dtype):
    """The fill check's plain-number rule (no tensors, so fake kernels can run it) says inf exactly
    when torch's float64 -> float32 -> dtype conversion gives inf, around each dtype's edge."""
    edge = checks.FLOAT_MAX[dtype]
    ulp = float(torch.finfo(dtype).eps) * edge
    values = [edge, edge + ulp / 2, edge + ulp / 2 * (1 - 1e-6), edge + ulp / 2 * (1 + 1e-6), edge + ulp,
              3.4028235677973366e38, 3.4028235677973362e38, 1e39, 0.0, 1.0, 65519.99]
    for v in values + [-v for v in values]:
        want = torch.tensor(v, dtype=torch.float64).to(torch.float32).to(dtype).isinf().item()
        assert checks.rounds_to_inf(v, dtype) == want, (v, dtype)


def test_fill_rounds_like_torch():
    x = torch.zeros(3, 2, 2, dtype=torch.bfloat16)
    for fill in (1.00390625, 0.1, 65519.0, 1e-8):
        out = fastprep.random_crop(x, 4, 4, 0, "CHW", True, fill)
        assert out[0].flatten().max().item() == torch.tensor(fill).to(torch.bfloat16).item()
        out = fastprep.random_crop(x.half(), 4, 4, 0, "CHW", True, fill)
        assert out[0].flatten().max().item() == torch.tensor(fill).to(torch.float16).item()


@pytest.mark.parametrize("args", [(_image((3, 9, 8), torch.uint8), 1, 2, 5, 6, "CHW"),
                                  (_image((2, 9, 8, 3), torch.float16), 0, 0, 9, 8, "HWC")])
def test_opcheck_crop(args):
    torch.library.opcheck(torch.ops.fastprep.crop.default, args)


@pytest.mark.parametrize("args", [(_image((3, 9, 8), torch.float32), 5, 6, 3, "CHW", False, 0.0),
                                  (_image((2, 9, 8, 3), torch.uint8), 12, 6, 3, "HWC", True, 4.0)])
def test_opcheck_random_crop(args):
    torch.library.opcheck(torch.ops.fastprep.random_crop.default, args)


def test_torch_compile_fullgraph():
    def f(x):
        a = torch.ops.fastprep.crop(x, 2, 3, 8, 8, "HWC")
        b = torch.ops.fastprep.random_crop(x, 8, 8, 11, "HWC", False, 0.0)
        return a.float() + b.float()

    x = _image((16, 16, 3), torch.uint8)
    compiled = torch.compile(f, fullgraph=True, backend="inductor")
    assert torch.equal(compiled(x), f(x))


def _u8(*shape):
    return torch.zeros(*shape, dtype=torch.uint8)


BAD_INPUTS = [
    (call("crop", torch.zeros(3, 4, 4, dtype=torch.int32), 0, 0, 1, 1),
     r"crop: expected img to be a torch.uint8, torch.float32, torch.float16 or torch.bfloat16 tensor, got torch.int32"),
    (call("crop", _u8(4, 4), 0, 0, 1, 1),
     r"crop: expected img to be a 3-D \[C, H, W\] image or a 4-D batch of them, got a 2-D tensor"),
    (call("crop", _u8(3, 4, 4), 0, 0, 1, 1, "WHC"),
     r"crop: expected layout to be 'CHW' or 'HWC', got 'WHC'"),
    (call("crop", _u8(3, 4, 4), 0, 0, 0, 1), r"crop: expected height > 0, got height=0"),
    (call("crop", _u8(3, 4, 4), 0, 0, 1, -2), r"crop: expected width > 0, got width=-2"),
    (call("crop", _u8(3, 4, 4), -1, 0, 1, 1), r"crop: expected top >= 0, got top=-1"),
    (call("crop", _u8(3, 4, 4), 0, -3, 1, 1), r"crop: expected left >= 0, got left=-3"),
    (call("crop", _u8(3, 4, 5), 2, 0, 3, 1),
     r"crop: expected top \+ height <= 4 \(the image height\), got top=2, height=3"),
    (call("crop", _u8(4, 5, 3), 0, 1, 1, 5, "HWC"),
     r"crop: expected left \+ width <= 5 \(the image width\), got left=1, width=5"),
    (call("random_crop", _u8(3, 4, 5), 6, 2, 0),
     r"random_crop: crop height 6 is larger than the image height 4"),
    (call("random_crop", _u8(2, 4, 5, 3), 2, 9, 0, "HWC"),
     r"random_crop: crop width 9 is larger than the image width 5"),
    (call("random_crop", _u8(3, 4, 5), 0, 2, 0), r"random_crop: expected height > 0, got height=0"),
    (call("random_crop", _u8(3, 4, 5), 2, 2, 0, "CHW", True, 1.5),
     r"random_crop: expected fill to be an integer in \[0, 255\] for a torch.uint8 image, got fill=1.5"),
    (call("random_crop", _u8(3, 4, 5), 2, 2, 0, "CHW", True, 300),
     r"random_crop: expected fill to be an integer in \[0, 255\] for a torch.uint8 image, got fill=300"),
    (call("random_crop", torch.zeros(3, 4, 5, dtype=torch.float64), 2, 2, 0),
     r"random_crop: expected img to be a torch.uint8, .* got torch.float64"),
    (call("random_crop", torch.zeros(3, 4, 5, dtype=torch.float16), 2, 2, 0, "CHW", True, 65520.0),
     r"random_crop: fill=65520(\.0)? rounds to inf in torch.float16 \(largest finite value 65504"),
    (call("random_crop", torch.zeros(3, 4, 5, dtype=torch.bfloat16), 2, 2, 0, "CHW", True, 3.4e38),
     r"random_crop: fill=3.4e\+38 rounds to inf in torch.bfloat16"),
    (call("random_crop", torch.zeros(3, 4, 5), 2, 2, 0, "CHW", True, -1e39),
     r"random_crop: fill=-1e\+39 rounds to inf in torch.float32"),
]


test_bad_input_op, test_bad_input_numba, test_bad_input_fake = bad_input_tests(BAD_INPUTS)


def test_random_crop_params_errors():
    with pytest.raises(RuntimeError, match=r"random_crop_params: crop width 9 is larger than the image width 5"):
        fastprep.random_crop_params(4, 5, 2, 9, 0)
    with pytest.raises(RuntimeError, match=r"random_crop_params: expected height > 0, got height=-1"):
        fastprep.random_crop_params(4, 5, -1, 2, 0)
