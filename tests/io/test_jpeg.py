"""fastprep.io.decode_jpeg: the bits of a full decode (Pillow's), of an ROI decode (the full decode
cropped), of YCbCr-direct (Pillow's draft YCbCr; the round trip's differences), on real photos."""

import io
import random

import numpy as np
import pytest
import torch

import fastprep
import fastprep.io as fio

from helpers.jpeg_photos import PHOTOS, SUBSAMPLINGS, encode, grey_jpeg, needs_decoder, photo, photo_jpeg, pil_decode

pytestmark = [needs_decoder, pytest.mark.one_backend]

# Sizes with partial iMCUs on both axes, thin images, and whole photos.
SHAPES = [None, (301, 451), (67, 35), (17, 200), (200, 9)]


def windows(h: int, w: int, n_random: int = 25, seed: int = 0) -> list[tuple[int, int, int, int]]:
    """Every edge and corner, single pixels, odd and iMCU-aligned offsets, then random windows."""
    out = [(0, 0, h, w), (0, 0, 1, 1), (h - 1, w - 1, 1, 1), (0, w - 1, 1, 1), (h - 1, 0, 1, 1),
           (0, 0, 1, w), (h - 1, 0, 1, w), (0, 0, h, 1), (0, w - 1, h, 1), (h // 2, 0, 1, w), (0, w // 2, h, 1)]
    for top, left in ((1, 1), (7, 9), (8, 16), (16, 16), (15, 17), (h - 17, w - 33)):
        top, left = max(0, min(top, h - 1)), max(0, min(left, w - 1))
        for hh, ww in ((h - top, w - left), (min(17, h - top), min(33, w - left)), (min(16, h - top), min(16, w - left))):
            out.append((top, left, hh, ww))
    rng = random.Random(seed)
    for _ in range(n_random):
        hh, ww = rng.randint(1, h), rng.randint(1, w)
        out.append((rng.randint(0, h - hh), rng.randint(0, w - ww), hh, ww))
    return out


def crop_of(full: torch.Tensor, window, layout: str) -> torch.Tensor:
    top, left, h, w = window
    return full[:, top:top + h, left:left + w] if layout == "CHW" else full[top:top + h, left:left + w, :]


@pytest.mark.parametrize("progressive", [False, True], ids=["baseline", "progressive"])
@pytest.mark.parametrize("subsampling", list(SUBSAMPLINGS))
@pytest.mark.parametrize("name", PHOTOS)
def test_full_decode_is_pillows(name, subsampling, progressive):
    data = photo_jpeg(name, subsampling, progressive)
    assert fio.read_jpeg_header(data).subsampling == subsampling
    ours = fio.decode_jpeg(data, layout="HWC").numpy()
    np.testing.assert_array_equal(ours, pil_decode(data))
    np.testing.assert_array_equal(fio.decode_jpeg(data).numpy(), ours.transpose(2, 0, 1))


@pytest.mark.parametrize("progressive", [False, True], ids=["baseline", "progressive"])
def test_grey_jpeg_decodes_as_pillow_does(progressive):
    data = grey_jpeg(progressive)
    assert fio.read_jpeg_header(data).color_space == "GRAY"
    grey = fio.decode_jpeg(data, mode="GRAY")
    np.testing.assert_array_equal(grey[0].numpy(), pil_decode(data, "L"))
    np.testing.assert_array_equal(fio.decode_jpeg(data, layout="HWC").numpy(), pil_decode(data, "RGB"))
    ycc = fio.decode_jpeg(data, mode="YCbCr")
    assert torch.equal(ycc[0], grey[0]) and bool((ycc[1:] == 128).all())


@pytest.mark.parametrize(("mode", "layout"), [("RGB", "CHW"), ("RGB", "HWC"), ("YCbCr", "CHW"), ("GRAY", "HWC")])
@pytest.mark.parametrize("progressive", [False, True], ids=["baseline", "progressive"])
@pytest.mark.parametrize("subsampling", list(SUBSAMPLINGS))
def test_roi_decode_is_the_full_decode_cropped(subsampling, progressive, mode, layout):
    for shape in SHAPES:
        data = photo_jpeg("coffee", subsampling, progressive, shape)
        full = fio.decode_jpeg(data, mode=mode, layout=layout)
        h, w = (full.shape[1:] if layout == "CHW" else full.shape[:2])
        for window in windows(h, w):
            roi = fio.decode_jpeg(data, crop=window, mode=mode, layout=layout)
            assert torch.equal(roi, crop_of(full, window, layout)), (shape, window)


@pytest.mark.parametrize("progressive", [False, True], ids=["baseline", "progressive"])
def test_roi_decode_of_a_grey_jpeg_is_the_full_decode_cropped(progressive):
    for shape in [(512, 512), (77, 301)]:
        data = grey_jpeg(progressive, shape)
        for mode in ("GRAY", "RGB", "YCbCr"):
            full = fio.decode_jpeg(data, mode=mode)
            for window in windows(*full.shape[1:], n_random=10):
                assert torch.equal(fio.decode_jpeg(data, crop=window, mode=mode), crop_of(full, window, "CHW"))


@pytest.mark.parametrize("subsampling", list(SUBSAMPLINGS))
@pytest.mark.parametrize("name", PHOTOS)
def test_ycbcr_direct_is_the_jpegs_own_samples(name, subsampling):
    from PIL import Image

    data = photo_jpeg(name, subsampling)
    with Image.open(io.BytesIO(data)) as img:
        img.draft("YCbCr", img.size)  # Pillow's libjpeg output without colour conversion
        assert img.mode == "YCbCr"
        theirs = np.array(img)
    np.testing.assert_array_equal(fio.decode_jpeg(data, mode="YCbCr", layout="HWC").numpy(), theirs)
    np.testing.assert_array_equal(fio.decode_jpeg(data, mode="GRAY", layout="HWC").numpy()[..., 0], theirs[..., 0])


@pytest.mark.parametrize("subsampling", list(SUBSAMPLINGS))
@pytest.mark.parametrize("name", PHOTOS)
def test_ycbcr_direct_differs_from_the_round_trip_only_where_rgb_clips(name, subsampling):
    """The docstring's claim: decode-to-RGB then rgb_to_ycbcr gives the JPEG's YCbCr back exactly
    wherever no RGB channel was clamped; pixels with a channel at 0 or 255 may differ."""
    data = photo_jpeg(name, subsampling)
    rgb = fio.decode_jpeg(data)
    diff = (fastprep.rgb_to_ycbcr(rgb).int() - fio.decode_jpeg(data, mode="YCbCr").int()).abs().amax(0)
    clipped = ((rgb == 0) | (rgb == 255)).any(0)
    assert int(diff[~clipped].max()) == 0
    assert float((diff > 0).float().mean()) <= 0.05  # the docs' "0.02-4.3% of pixels" on these photos


def test_the_round_trip_is_exact_for_every_ycbcr_that_needs_no_clamping():
    """All 2^24 (Y, Cb, Cr) through libjpeg's integer YCbCr -> RGB (jdcolor.c: 16-bit fixed point,
    the SIMD paths give the same bits) and fastprep.rgb_to_ycbcr: the unclamped ones come back."""
    fix = lambda x: int(x * 65536 + 0.5)  # noqa: E731
    x = np.arange(256, dtype=np.int64) - 128
    cr_r, cb_b = (fix(1.402) * x + 32768) >> 16, (fix(1.772) * x + 32768) >> 16
    cr_g, cb_g = -fix(0.71414) * x, -fix(0.34414) * x + 32768
    cb, cr = np.meshgrid(np.arange(256), np.arange(256), indexing="ij")
    for y in range(256):
        rgb = np.stack([y + cr_r[cr], y + ((cb_g[cb] + cr_g[cr]) >> 16), y + cb_b[cb]])
        inside = ((rgb >= 0) & (rgb <= 255)).all(0)
        ycc = fastprep.rgb_to_ycbcr(torch.from_numpy(rgb.clip(0, 255).astype(np.uint8))).numpy()
        expected = np.stack([np.full_like(cb, y), cb, cr])
        assert (ycc == expected)[:, inside].all(), y


def test_a_jpeg_stored_as_rgb_gives_ycbcr_through_rgb_to_ycbcr():
    data = encode(photo("chelsea"), subsampling="4:4:4", keep_rgb=True)
    assert fio.read_jpeg_header(data).color_space == "RGB"
    rgb = fio.decode_jpeg(data)
    np.testing.assert_array_equal(rgb.permute(1, 2, 0).numpy(), pil_decode(data))
    assert torch.equal(fio.decode_jpeg(data, mode="YCbCr"), fastprep.rgb_to_ycbcr(rgb))
    window = (5, 7, 100, 201)
    assert torch.equal(fio.decode_jpeg(data, crop=window, mode="YCbCr"), crop_of(fastprep.rgb_to_ycbcr(rgb), window, "CHW"))


@pytest.mark.parametrize("mode", ["RGB", "YCbCr", "GRAY"])
@pytest.mark.parametrize("crop", [None, (5, 7, 100, 201)])
def test_an_rgb_coded_jpeg_follows_layout_and_out_like_any_other(mode, crop):
    """The RGB-coded JPEG's YCbCr path converts in fastprep (CHW): it must still honour `layout`
    and check `out` as the decoder's own path does."""
    data = encode(photo("chelsea"), subsampling="4:4:4", keep_rgb=True)
    chw = fio.decode_jpeg(data, crop=crop, mode=mode)
    hwc = fio.decode_jpeg(data, crop=crop, mode=mode, layout="HWC")
    assert hwc.shape == chw.permute(1, 2, 0).shape and torch.equal(hwc, chw.permute(1, 2, 0))
    out = torch.zeros(2, *hwc.shape, dtype=torch.uint8)
    got = fio.decode_jpeg(data, crop=crop, mode=mode, layout="HWC", out=out[1])
    assert got.data_ptr() == out[1].data_ptr() and torch.equal(out[1], hwc) and not out[0].any()
    for bad in (torch.zeros(hwc.shape), torch.zeros(1, *hwc.shape, dtype=torch.uint8)):
        with pytest.raises(ValueError, match="expected out to be a uint8 CPU tensor of shape"):
            fio.decode_jpeg(data, crop=crop, mode=mode, layout="HWC", out=bad)


@pytest.mark.parametrize("layout", ["CHW", "HWC"])
def test_decodes_into_a_strided_out(layout):
    data = photo_jpeg("astronaut")
    batch = torch.zeros(2, 3, 300, 300, dtype=torch.uint8) if layout == "CHW" else torch.zeros(2, 300, 300, 3, dtype=torch.uint8)
    window = (11, 13, 300, 300)
    got = fio.decode_jpeg(data, crop=window, layout=layout, out=batch[1])
    assert got.data_ptr() == batch[1].data_ptr()
    assert torch.equal(batch[1], fio.decode_jpeg(data, crop=window, layout=layout)) and not batch[0].any()
    planes = torch.zeros(300, 3, 300, dtype=torch.uint8).permute(1, 0, 2)  # CHW view, channel stride 300
    assert torch.equal(fio.decode_jpeg(data, crop=window, out=planes), fio.decode_jpeg(data, crop=window))


@pytest.mark.parametrize("kind", ["bytes", "bytearray", "memoryview", "tensor", "numpy", "path"])
def test_takes_the_data_in_every_form(kind, tmp_path):
    data = photo_jpeg("chelsea")
    path = tmp_path / "chelsea.jpg"
    path.write_bytes(data)
    forms = {"bytes": data, "bytearray": bytearray(data), "memoryview": memoryview(data),
             "tensor": torch.frombuffer(bytearray(data), dtype=torch.uint8), "numpy": np.frombuffer(data, np.uint8),
             "path": path}
    assert torch.equal(fio.decode_jpeg(forms[kind]), fio.decode_jpeg(data))


def test_threads_decode_the_same_bits():
    from concurrent.futures import ThreadPoolExecutor

    jobs = [(photo_jpeg(n, s), (3, 5, 200, 250)) for n in PHOTOS[:4] for s in SUBSAMPLINGS]
    serial = [fio.decode_jpeg(d, crop=w) for d, w in jobs]
    with ThreadPoolExecutor(4) as pool:
        for _ in range(3):
            threaded = list(pool.map(lambda job: fio.decode_jpeg(job[0], crop=job[1]), jobs))
            assert all(torch.equal(a, b) for a, b in zip(serial, threaded))


def test_decoding_releases_the_gil():
    """While a thread decodes a slow (noise) JPEG, the main thread keeps waking from short sleeps:
    with the GIL held through each decode it could only wake between decodes."""
    import threading
    import time

    noise = np.random.default_rng(0).integers(0, 256, (1024, 1024, 3), dtype=np.uint8)
    data = encode(noise, quality=95)
    decodes, done = 4, threading.Event()

    def work():
        for _ in range(decodes):
            fio.decode_jpeg(data)
        done.set()

    thread, wakes = threading.Thread(target=work), 0
    thread.start()
    while not done.is_set():
        time.sleep(0.0005)
        wakes += 1
    thread.join()
    assert wakes >= 5 * decodes
