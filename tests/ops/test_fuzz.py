"""Property-based tests: random shapes (1-pixel and odd sizes included), strides, dtypes, layouts
and seeds; each op equal to a plain reference and the two backends equal to each other.

FASTPREP_FUZZ_EXAMPLES sets the examples per property (default 25, modest for CI)."""

import os

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fastprep
import fastprep.numba_kernels._crop as numba_crop
import fastprep.numba_kernels._dilate as numba_dilate
import fastprep.numba_kernels._pack_bits as numba_pack

scipy_ndimage = pytest.importorskip("scipy.ndimage")

EXAMPLES = int(os.environ.get("FASTPREP_FUZZ_EXAMPLES", 25))
fuzz = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
seeds = st.integers(-2**63, 2**63 - 1)


def _array(draw, shape, dtype=np.uint8):
    seed = draw(st.integers(0, 2**32 - 1))
    return np.random.default_rng(seed).integers(0, 256, shape).astype(dtype)


@st.composite
def bool_tensors(draw):
    shape = draw(st.lists(st.integers(0, 19), min_size=1, max_size=4))
    x = torch.from_numpy(_array(draw, shape) < 128)
    if x.dim() >= 2 and draw(st.booleans()):
        x = x.transpose(0, -1)  # a non-contiguous view
    return x


@fuzz
@given(bool_tensors(), st.data(), st.sampled_from(["little", "big"]))
def test_pack_unpack_match_numpy(x, data, bitorder):
    dim = data.draw(st.integers(-x.dim(), x.dim() - 1))
    expected = np.packbits(x.numpy(), axis=dim, bitorder=bitorder)
    packed = fastprep.pack_bits(x, dim, bitorder)
    assert np.array_equal(packed.numpy(), expected)
    assert torch.equal(numba_pack.pack_bits(x, dim, bitorder), packed)
    back = fastprep.unpack_bits(packed, x.shape[dim], dim, bitorder)
    assert torch.equal(back, x) and torch.equal(numba_pack.unpack_bits(packed, x.shape[dim], dim, bitorder), back)


DTYPES = [torch.uint8, torch.float32, torch.float16, torch.bfloat16]


@st.composite
def images(draw):
    h, w, c = draw(st.integers(1, 23)), draw(st.integers(1, 23)), draw(st.integers(1, 4))
    dtype = draw(st.sampled_from(DTYPES))
    chw = torch.from_numpy(_array(draw, (c, h, w))).to(dtype)
    layout = draw(st.sampled_from(["CHW", "HWC", "HWC-view"]))
    if layout == "CHW":
        return chw, "CHW", chw
    hwc = chw.permute(1, 2, 0)
    return (hwc.contiguous() if layout == "HWC" else hwc), "HWC", chw


@fuzz
@given(images(), st.data())
def test_crop_matches_slicing(image, data):
    img, layout, chw = image
    h, w = chw.shape[1:]
    height, width = data.draw(st.integers(1, h)), data.draw(st.integers(1, w))
    top, left = data.draw(st.integers(0, h - height)), data.draw(st.integers(0, w - width))
    out = fastprep.crop(img, top, left, height, width, layout)
    assert torch.equal(out, chw[:, top:top + height, left:left + width])
    assert torch.equal(numba_crop.crop(img, top, left, height, width, layout), out)


@fuzz
@given(images(), st.data(), seeds)
def test_random_crop_window_is_random_crop_params(image, data, seed):
    img, layout, chw = image
    h, w = chw.shape[1:]
    height, width = data.draw(st.integers(1, h)), data.draw(st.integers(1, w))
    top, left = fastprep.random_crop_params(h, w, height, width, seed)
    out = fastprep.random_crop(img, height, width, seed, layout)
    assert torch.equal(out, chw[:, top:top + height, left:left + width])


def _ycbcr_exact(rgb):
    r, g, b = (rgb[..., k].astype(np.int64) for k in range(3))
    ys = [(299 * r + 587 * g + 114 * b + 500) // 1000,
          (-5273 * r - 10352 * g + 15625 * b + 4015625) // 31250,
          (15625 * r - 13084 * g - 2541 * b + 4015625) // 31250]
    return np.stack([np.clip(y, 0, 255) for y in ys]).astype(np.uint8)


@fuzz
@given(st.integers(1, 17), st.integers(1, 17), st.integers(0, 2**32 - 1))
def test_rgb_to_ycbcr_uint8_exact(h, w, seed):
    rgb = np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)
    out = fastprep.rgb_to_ycbcr(torch.from_numpy(rgb), "HWC")
    assert np.array_equal(out.numpy(), _ycbcr_exact(rgb))


@fuzz
@given(st.integers(1, 40), st.integers(1, 140), st.sampled_from(["cross", "square"]),
       st.integers(0, 3), st.integers(0, 2**32 - 1), st.sampled_from([0.0, 0.001, 0.1]))
def test_dilate_matches_scipy(h, w, structure, iterations, seed, p):
    mask = np.random.default_rng(seed).random((h, w)) < p
    struct = scipy_ndimage.generate_binary_structure(2, 1 if structure == "cross" else 2)
    # iterations=0: until nothing changes, in scipy as in fastprep.
    expected = scipy_ndimage.binary_dilation(mask, struct, iterations=iterations, border_value=0)
    out = fastprep.dilate(torch.from_numpy(mask), structure, iterations)
    assert np.array_equal(out.numpy(), expected)
    assert torch.equal(numba_dilate.dilate(torch.from_numpy(mask), structure, iterations), out)


@fuzz
@given(st.integers(1, 30), st.integers(1, 30), st.floats(0, 1), seeds, st.sampled_from(["HWC", "CHW"]),
       st.sampled_from([None, torch.float32, torch.bfloat16]))
def test_fused_equals_composed(h, w, p, seed, layout, out_dtype):
    rgb = torch.from_numpy(np.random.default_rng(abs(seed) % 2**32).integers(0, 256, (31, 33, 3), dtype=np.uint8))
    img = rgb if layout == "HWC" else rgb.permute(2, 0, 1)
    scale = 1.0 if out_dtype is None else 1 / 255
    fused = fastprep.crop_mask_ycbcr(img, h, w, p, seed, layout, "cross", out_dtype, scale)
    c = fastprep.random_crop(img, h, w, seed, layout)
    m = fastprep.random_dilated_mask([h, w], p, fastprep.derive_seed(seed, 1), packed=True)
    assert torch.equal(fused, fastprep.rgb_to_ycbcr(fastprep.mask_fill(c, m, 0), "CHW", out_dtype, scale))
