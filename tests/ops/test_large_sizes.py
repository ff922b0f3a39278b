"""Windows whose offsets lie past 2^31 and 2^32 bytes give what slicing gives, on both backends
(argument and output-size limits are in test_size_limits.py).

Large images live in untouched memory (torch.empty commits only the pages written), so each test
costs the pages of its windows; only the whole-output kernels (random masks, pack_bits) pay for
gigabytes. torch has no negative strides, so there are none here."""

import numpy as np
import pytest
import torch

import fastprep
import fastprep.numba_kernels._counter_rng as counter_rng
from fastprep.ops._crop import random_crop_torch

# slow: gigabyte buffers and rows past 2^31 bits (seconds each); .ci/slow and .ci/sanitize run them.
pytestmark = pytest.mark.slow

_U8 = torch.uint8


def _virtual(nbytes):
    """Untouched memory: only the pages a test writes cost RSS."""
    try:
        return torch.empty(nbytes, dtype=_U8)
    except RuntimeError:
        pytest.skip(f"cannot reserve {nbytes} bytes of address space")


def test_random_crop_reaches_rows_past_2_32():
    H = 2**33  # rows overlap (row y is bytes y .. y + 7), so H rows take H + 7 bytes, all virtual
    tops = {seed: fastprep.random_crop_params(H, 8, 1, 8, seed)[0] for seed in range(64)}
    assert any(t % 2 for t in tops.values())  # the 32-bit product gave only even rows below 2^32
    far = [seed for seed, top in tops.items() if top >= 2**32][:3]
    assert len(far) == 3
    buf = _virtual(H + 8)
    chw = torch.as_strided(buf, (1, H, 8), (0, 1, 1))
    hwc = torch.as_strided(buf, (H, 8, 3), (1, 1, 0))  # grey pixels
    gen = torch.Generator().manual_seed(0)
    for seed in far:
        top = tops[seed]
        buf[top:top + 8] = torch.randint(0, 256, (8,), dtype=_U8, generator=gen)
        assert torch.equal(fastprep.random_crop(chw, 1, 8, seed), chw[:, top:top + 1])
        expected = fastprep.rgb_to_ycbcr(hwc[top:top + 1].contiguous(), "HWC")
        assert torch.equal(fastprep.crop_mask_ycbcr(hwc, 1, 8, 0.0, seed), expected)


# Images in 4.6 GB of untouched memory, so a test pays only for the pages it writes: windows at the
# far corner sit past 2^32 bytes (and, for uint8, past 2^31 elements), where a 32-bit product or
# counter in a kernel would wrap. (layout, dtype) -> (shape, element strides).
_BYTES = 4_600_000_000
_VIEWS = {
    ("HWC", torch.uint8): ((40000, 38000, 3), (114000, 3, 1)),
    ("CHW", torch.uint8): ((3, 30000, 40000), (1_550_000_000, 40000, 1)),  # plane 2 starts past 2^31
    ("HWC", torch.float32): ((20000, 19000, 3), (57000, 3, 1)),
    ("CHW", torch.float16): ((3, 15000, 40000), (775_000_000, 40000, 1)),
}


@pytest.fixture
def buf():
    return _virtual(_BYTES)


def _image(buf, layout, dtype):
    shape, stride = _VIEWS[layout, dtype]
    last = sum((s - 1) * st for s, st in zip(shape, stride)) * dtype.itemsize
    assert 2**32 < last < _BYTES
    return torch.as_strided(buf.view(dtype), shape, stride)


def _hw(img, layout):
    return (img.shape[-3], img.shape[-2]) if layout == "HWC" else (img.shape[-2], img.shape[-1])


def _window(img, layout, top, left, h, w):
    """img's [top, top + h) x [left, left + w) window as a (strided) view, CHW."""
    chw = img.movedim(-1, -3) if layout == "HWC" else img
    return chw[..., top:top + h, left:left + w]


def _fill(view, seed=0):
    gen = torch.Generator().manual_seed(seed)
    if view.dtype == _U8:
        view.copy_(torch.randint(0, 256, view.shape, dtype=_U8, generator=gen))
    else:
        view.copy_(torch.rand(view.shape, generator=gen).to(view.dtype))


def _far_seed(H, W, h, w, pad=False):
    """A seed whose random_crop window lies in the last tenth of both axes."""
    for seed in range(100_000):
        top, left = fastprep.random_crop_params(H, W, h, w, seed, pad)
        if top >= 0.9 * (H - h) and left >= 0.9 * (W - w):
            return seed, top, left
    raise AssertionError("no seed found")


@pytest.mark.parametrize("layout,dtype", list(_VIEWS))
def test_crop_at_the_far_corner(buf, layout, dtype):
    img = _image(buf, layout, dtype)
    H, W = _hw(img, layout)
    win = _window(img, layout, H - 24, W - 200, 24, 200)
    _fill(win)
    assert torch.equal(fastprep.crop(img, H - 24, W - 200, 24, 200, layout), win)


@pytest.mark.parametrize("layout,dtype", list(_VIEWS))
def test_random_crop_far_from_the_start(buf, layout, dtype):
    img = _image(buf, layout, dtype)
    seed, top, left = _far_seed(*_hw(img, layout), 40, 64)
    win = _window(img, layout, top, left, 40, 64)
    _fill(win)
    assert torch.equal(fastprep.random_crop(img, 40, 64, seed, layout), win)


def test_batched_crops_past_2_31(buf):
    # Sample 1 starts 2.28e9 bytes in and ends past 2^32.
    img = torch.as_strided(buf, (2, 20000, 38000, 3), (2_280_000_000, 114000, 3, 1))
    _fill(img[:, -16:, -100:])
    assert torch.equal(fastprep.crop(img, 20000 - 16, 38000 - 100, 16, 100, "HWC"),
                       img[:, -16:, -100:].permute(0, 3, 1, 2))
    seed = 5
    for i in range(2):
        top, left = fastprep.random_crop_params(20000, 38000, 30, 70, fastprep.derive_seed(seed, i))
        _fill(img[i, top:top + 30, left:left + 70], i)
    expected = random_crop_torch(img, 30, 70, seed, "HWC")  # torch slicing
    assert torch.equal(fastprep.random_crop(img, 30, 70, seed, "HWC"), expected)


def test_padded_random_crop_of_a_tall_strip(buf):
    strip = _image(buf, "HWC", _U8)[:, -50:]  # 40000 x 50, rows 114000 bytes apart
    seed, top, _ = _far_seed(40000, 50, 32, 64, pad=True)
    _fill(strip[top:top + 32])
    expected = random_crop_torch(strip, 32, 64, seed, "HWC", True, 7)
    assert torch.equal(fastprep.random_crop(strip, 32, 64, seed, "HWC", True, 7), expected)


@pytest.mark.parametrize("layout", ["HWC", "CHW"])
@pytest.mark.parametrize("out_dtype,scale,return_mask", [(None, 1.0, False), (torch.float32, 1 / 255, True)])
def test_crop_mask_ycbcr_far_from_the_start(buf, layout, out_dtype, scale, return_mask):
    img = _image(buf, layout, _U8)
    h, w, p = 48, 80, 0.25
    seed, top, left = _far_seed(*_hw(img, layout), h, w)
    win = _window(img, layout, top, left, h, w)
    _fill(win)
    mask = fastprep.random_dilated_mask([h, w], p, fastprep.derive_seed(seed, 1), packed=True)
    crop = win if return_mask else fastprep.mask_fill(win, mask, 0)
    expected = fastprep.rgb_to_ycbcr(crop.contiguous(), "CHW", out_dtype, scale)
    got = fastprep.crop_mask_ycbcr(img, h, w, p, seed, layout, out_dtype=out_dtype, scale=scale,
                                   apply_mask=not return_mask, return_mask=return_mask)
    if return_mask:
        got, got_mask = got
        assert torch.equal(got_mask, mask)
    assert torch.equal(got, expected)


# Strided views whose rows (planes) are spread over the whole buffer: the kernels' own row and
# plane offsets go past 2^32 bytes. Compared with the same op on a contiguous copy of the view.
_SPREAD = [("HWC", _U8, (slice(None, None, 400), slice(None, None, 400))),
           ("CHW", _U8, (slice(None), slice(None, None, 299), slice(None, None, 400))),
           ("HWC", torch.float32, (slice(None, None, 200), slice(None, None, 200)))]


@pytest.mark.parametrize("layout,dtype,index", _SPREAD)
def test_colour_conversions_of_views_spread_over_4gb(buf, layout, dtype, index):
    view = _image(buf, layout, dtype)[index]
    _fill(view)
    copy = view.contiguous()
    for op in (fastprep.rgb_to_ycbcr, fastprep.ycbcr_to_rgb):
        assert torch.equal(op(view, layout), op(copy, layout))
    assert torch.equal(fastprep.rgb_to_ycbcr(view, layout, torch.bfloat16, 0.5),
                       fastprep.rgb_to_ycbcr(copy, layout, torch.bfloat16, 0.5))


@pytest.mark.parametrize("layout,dtype,index", _SPREAD)
def test_mask_fill_of_views_spread_over_4gb(buf, layout, dtype, index):
    view = _image(buf, layout, dtype)[index]
    _fill(view)
    h, w = _hw(view, layout)
    mask = torch.rand(h, w, generator=torch.Generator().manual_seed(1)) < 0.3
    expected = view.clone()  # contiguous, in the view's layout, as mask_fill's output
    _window(expected, layout, 0, 0, h, w)[:, mask] = 3
    assert torch.equal(fastprep.mask_fill(view, mask, 3, layout), expected)
    assert torch.equal(fastprep.mask_fill(view, fastprep.pack_bits(mask), 3, layout), expected)


@pytest.mark.parametrize("layout,index", [("HWC", (slice(None), slice(-64, None))),  # 40000 x 64 strip
                                          ("CHW", (slice(None), slice(None, None, 10), slice(-64, None)))])
def test_in_place_mask_fill_of_a_tall_strip(buf, layout, index):
    view = _image(buf, layout, _U8)[index]
    h, w = _hw(view, layout)
    _fill(_window(view, layout, h - 40, 0, 40, w))
    before = _window(view, layout, 0, 0, h, w).clone()  # mostly untouched pages: cheap to read
    mask = torch.zeros(h, w, dtype=torch.bool)
    mask[-40:] = torch.rand(40, w, generator=torch.Generator().manual_seed(2)) < 0.5
    fastprep.mask_fill_(view, fastprep.pack_bits(mask), 9, layout)
    before[:, mask] = 9
    assert torch.equal(_window(view, layout, 0, 0, h, w), before)


def test_in_place_mask_fill_of_a_batch_past_2_31(buf):
    img = torch.as_strided(buf, (2, 20000, 38000, 3), (2_280_000_000, 114000, 3, 1))[:, :, -64:]
    _fill(img[:, -20:])
    before = img.clone()
    mask = torch.zeros(2, 20000, 64, dtype=torch.bool)
    mask[:, -20:] = torch.rand(2, 20, 64, generator=torch.Generator().manual_seed(3)) < 0.5
    fastprep.mask_fill_(img, fastprep.pack_bits(mask), 4, "HWC")
    before[mask] = 4
    assert torch.equal(img, before)


# Whole-output kernels: the random masks write every byte, so these are the costly tests (1-2 GB
# each); counters and offsets are checked against the definitions, computed here in numpy.
def _random_words(seed: int, counters: np.ndarray) -> np.ndarray:
    """counter_rng.h's random_word(seed, c) for an array of uint64 counters (wrapping uint64)."""
    z = np.full(counters.shape, seed % 2**64, dtype=np.uint64) + (counters + np.uint64(1)) * counter_rng.GOLDEN
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _mask_words(seed: int, p: float, row: int, wpr: int) -> np.ndarray:
    """Row `row`'s mask words as random_mask.h defines them (0 < p < 1, width a multiple of 64)."""
    q = int(p * 65536 + 0.5)
    lowest = (q & -q).bit_length() - 1
    base = (np.arange(wpr, dtype=np.uint64) + np.uint64(row * wpr)) * np.uint64(16)
    words = _random_words(seed, base)
    for t, k in enumerate(range(lowest + 1, 16), start=1):
        r = _random_words(seed, base + np.uint64(t))
        words = words | r if (q >> k) & 1 else words & r
    return words


def test_random_mask_counters_past_2_32():
    rows, width = 2**18 + 1, 2**16  # the last row's counters start at 2^18 * 1024 * 16 = 2^32
    out = fastprep.random_mask([rows, width], 0.25, 11, packed=True)  # 2 GB
    for r in (0, 2**17, rows - 1):
        assert np.array_equal(out[r].numpy(), _mask_words(11, 0.25, r, width // 64).view(np.uint8))


def test_random_dilated_mask_counters_past_2_31():
    # The last image's counters start at 2^31 (a signed 32-bit wrap); its rows come from the
    # random_mask_row the test above takes past 2^32, which would cost another 2 GB here.
    images, h, width = 2**9 + 1, 256, 2**16
    out = fastprep.random_dilated_mask([images, h, width], 0.25, 12, "cross", 1, packed=True)  # 1 GB
    for i in (0, images - 1):
        words = np.stack([_mask_words(12, 0.25, i * h + r, width // 64) for r in range(h)])
        expected = fastprep.dilate_packed(torch.from_numpy(words.view(np.uint8)), width, "cross", 1)
        assert torch.equal(out[i], expected)


def _packed_at(positions: np.ndarray, n: int) -> torch.Tensor:
    """pack_bits (little) of n bits that are set exactly at `positions`."""
    out = np.zeros((n + 7) // 8, dtype=np.uint8)
    np.bitwise_or.at(out, positions // 8, (1 << (positions % 8)).astype(np.uint8))
    return torch.from_numpy(out)


def test_pack_unpack_and_dilate_a_row_of_more_than_2_31_bits():
    # One row of 2^31 + 77 bools (2 GB, the input pack_bits must read) and its 256 MB of bits. Not
    # covered: pack_bits across planes and bool dilate past 2^31, whose inputs and outputs would
    # need > 4 GB here; they share the row kernels' int64 indexing.
    n = 2**31 + 77
    pos = np.sort([0, 5, 2**31 - 9, 2**31 - 1, 2**31, 2**31 + 8, n - 70, n - 1])
    x = torch.zeros(n, dtype=torch.bool)
    x[torch.from_numpy(pos)] = True
    packed = fastprep.pack_bits(x)
    del x
    assert torch.equal(packed, _packed_at(pos, n))
    assert torch.equal(fastprep.unpack_bits(packed, n).nonzero().flatten(), torch.from_numpy(pos))
    grown = np.unique(np.clip(np.concatenate([pos - 1, pos, pos + 1]), 0, n - 1))
    assert torch.equal(fastprep.dilate_packed(packed.view(1, -1), n), _packed_at(grown, n).view(1, -1))
