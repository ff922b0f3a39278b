"""CMYK and YCCK JPEGs (4 components, Adobe) load everywhere with Pillow's bits: decode_jpeg in every
mode, every window and every reduced scale, packs (JPEG records and raw ones), their windows and
cuts, the GPU batch path's host fallback, and ImageFolder as torchvision's (Pillow) loads it.

Plain reference: Pillow's ``Image.open(f).convert("RGB")`` / ``convert("L")`` (it reads a 4-component
JPEG as inverted "CMYK;I" and converts in integer arithmetic), and fastprep.rgb_to_ycbcr of that
RGB for mode "YCbCr". YCCK files are made by storing four planes through Pillow's CMYK encoder and
setting the Adobe marker's transform to 2 (YCCK): libjpeg then decodes them as YCCK -> CMYK."""

import io
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

import fastprep.io as fio
import fastprep.io.jpeg._device_decoders as device_decoders
from fastprep.io.jpeg import ycbcr_in_layout

from helpers.jpeg_photos import needs_decoder, photo

pytestmark = [needs_decoder, pytest.mark.one_backend]


def cmyk_jpeg(shape, subsampling=0, progressive=False, kind="CMYK", seed=0):
    """A 4-component JPEG of random pixels (every sample value, every K) over a photo's shapes."""
    rng = np.random.default_rng(seed)
    h, w = shape
    planes = rng.integers(0, 256, (h, w, 4), dtype=np.uint8)
    base = photo("astronaut")[:h, :w]  # smooth regions beside the noise: upsampling of real edges
    planes[: h // 2, :, :3] = base[: h // 2]
    planes[: h // 4, : w // 2, 3] = (0, 255)[seed % 2]  # saturated K: the ends of Pillow's formula
    buf = io.BytesIO()
    Image.fromarray(planes, "CMYK").save(buf, "JPEG", quality=92, subsampling=subsampling, progressive=progressive)
    data = bytearray(buf.getvalue())
    adobe = data.find(b"\xff\xee")  # Pillow writes Adobe's marker for CMYK: transform 0
    assert adobe > 0 and data[adobe + 4:adobe + 9] == b"Adobe" and data[adobe + 15] == 0
    if kind == "YCCK":
        data[adobe + 15] = 2
    elif kind == "no Adobe marker":  # libjpeg assumes CMYK; Pillow still reads it inverted
        length = int.from_bytes(data[adobe + 2:adobe + 4], "big")
        del data[adobe:adobe + 2 + length]
    return bytes(data)


CASES = {  # name: (shape, Pillow's subsampling code, progressive, kind)
    "cmyk-444-odd": ((61, 77), 0, False, "CMYK"),
    "cmyk-420-progressive": ((64, 90), 2, True, "CMYK"),
    "cmyk-422-tall": ((97, 33), 1, False, "CMYK"),
    "ycck-444": ((40, 41), 0, False, "YCCK"),
    "ycck-420-odd": ((53, 71), 2, False, "YCCK"),
    "ycck-422-progressive": ((33, 150), 1, True, "YCCK"),
    "no-adobe-420": ((45, 58), 2, False, "no Adobe marker"),
}


def case_jpeg(name):
    shape, sub, prog, kind = CASES[name]
    return cmyk_jpeg(shape, sub, prog, kind, seed=len(name))


def pillow(data, mode="RGB"):
    with Image.open(io.BytesIO(data)) as im:
        assert im.mode == "CMYK"
        arr = np.array(im.convert(mode))
    return torch.from_numpy(arr).permute(2, 0, 1) if arr.ndim == 3 else torch.from_numpy(arr)[None]


def reference(data):
    rgb = pillow(data)
    return {"RGB": rgb, "GRAY": pillow(data, "L"), "YCbCr": ycbcr_in_layout(rgb, "CHW")}


def windows(h, w, rng, n=5):
    fixed = [(0, 0, h, w), (0, 0, 1, 1), (h - 1, w - 1, 1, 1), (0, w - 1, h, 1), (h // 2, 0, 1, w)]
    for _ in range(n):
        hh, ww = int(rng.integers(1, h + 1)), int(rng.integers(1, w + 1))
        fixed.append((int(rng.integers(0, h - hh + 1)), int(rng.integers(0, w - ww + 1)), hh, ww))
    return fixed


@pytest.mark.parametrize("name", CASES)
def test_decode_is_pillows_in_every_mode_window_and_layout(name):
    data = case_jpeg(name)
    header = fio.read_jpeg_header(data)
    assert header.components == 4 and header.color_space == ("YCCK" if "ycck" in name else "CMYK")
    want = reference(data)
    rng = np.random.default_rng(3)
    for mode, full in want.items():
        assert torch.equal(fio.decode_jpeg(data, mode=mode), full), mode
        for t, left, h, w in windows(header.height, header.width, rng):
            crop = (t, left, h, w)
            window = full[:, t:t + h, left:left + w]
            assert torch.equal(fio.decode_jpeg(data, crop=crop, mode=mode), window), (mode, crop)
            assert torch.equal(fio.decode_jpeg(data, crop=crop, mode=mode, layout="HWC"), window.permute(1, 2, 0))
            strided = torch.zeros(h, w + 3, window.shape[0], dtype=torch.uint8).permute(2, 0, 1)[:, :, 1:w + 1]
            fio.decode_jpeg(data, crop=crop, mode=mode, out=strided)  # an output of no contiguous row
            assert torch.equal(strided, window), (mode, crop)


def test_every_sample_and_k_pair_converts_as_pillow():
    """Ramps (C along rows, K down columns) at quality 100 decode to all 65536 (C, K) pairs: the
    integer formula's every input, against Pillow's."""
    ramp = np.arange(256, dtype=np.uint8)
    planes = np.stack(np.broadcast_arrays(ramp[None, :], ramp[:, None], 255 - ramp[None, :], ramp[:, None]), -1)
    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(planes), "CMYK").save(buf, "JPEG", quality=100, subsampling=0)
    data = buf.getvalue()
    with Image.open(io.BytesIO(data)) as im:
        samples = np.asarray(im)
    assert len(set(zip(samples[..., 0].ravel().tolist(), samples[..., 3].ravel().tolist(), strict=True))) == 65536
    for mode, full in reference(data).items():
        assert torch.equal(fio.decode_jpeg(data, mode=mode), full), mode


@pytest.mark.parametrize("name", ["cmyk-444-odd", "cmyk-420-progressive", "ycck-422-progressive"])
def test_reduced_scale_is_pillows_draft_and_windows_are_its_crops(name):
    data = case_jpeg(name)
    H, W = fio.read_jpeg_header(data)[:2]
    rng = np.random.default_rng(4)
    for m in range(1, 9):
        whole = fio.decode_jpeg(data, scale=m)
        if m in (1, 2, 4):  # Pillow's draft picks libjpeg-turbo's scale M/8 from a requested size
            with Image.open(io.BytesIO(data)) as im:
                im.draft("CMYK", (W * m // 8, H * m // 8))
                assert torch.equal(whole, torch.from_numpy(np.array(im.convert("RGB"))).permute(2, 0, 1)), m
        gray = fio.decode_jpeg(data, scale=m, mode="GRAY")
        assert torch.equal(fio.decode_jpeg(data, scale=m, mode="YCbCr"), ycbcr_in_layout(whole, "CHW"))
        for t, left, h, w in windows(*whole.shape[1:], rng, 3):
            got = fio.decode_jpeg(data, crop=(t, left, h, w), scale=m)
            assert torch.equal(got, whole[:, t:t + h, left:left + w]), (m, t, left, h, w)
            got = fio.decode_jpeg(data, crop=(t, left, h, w), scale=m, mode="GRAY")
            assert torch.equal(got, gray[:, t:t + h, left:left + w]), (m, t, left, h, w)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("cmyk")
    (root / "a").mkdir()
    (root / "b").mkdir()
    for i, name in enumerate(CASES):
        (root / "ab"[i % 2] / f"{name}.jpg").write_bytes(case_jpeg(name))
    buf = io.BytesIO()
    Image.fromarray(photo("coffee")[:50, :60]).save(buf, "JPEG")
    (root / "a" / "rgb.jpg").write_bytes(buf.getvalue())
    return root


def test_image_folder_loads_as_torchvisions(folder):
    ds = fio.ImageFolder(folder)
    assert len(ds) == len(CASES) + 1
    for i, (path, label) in enumerate(ds.samples):
        with Image.open(path) as im:  # torchvision's ImageFolder loader
            want = torch.from_numpy(np.array(im.convert("RGB"))).permute(2, 0, 1)
        image, got_label = ds[i]
        assert torch.equal(image, want) and got_label == label, path


@pytest.fixture(scope="module")
def packs(folder, tmp_path_factory):
    out = tmp_path_factory.mktemp("packs")
    for mode in ("jpeg", "raw"):
        summary = fio.pack(folder, out / mode, mode=mode, progress=False)
        assert summary.records == len(CASES) + 1 and not summary.skipped
    return out


@pytest.mark.parametrize("mode", ["RGB", "YCbCr", "GRAY"])
def test_packed_records_windows_and_cuts_are_the_files(folder, packs, mode):
    ds = fio.PackedDataset(packs / "jpeg", mode=mode)
    rng = np.random.default_rng(5)
    for i, (path, _) in enumerate(fio.ImageFolder(folder).samples):
        image = ds.load_raw(i)[0]
        assert isinstance(image, fio.PackedJpeg)
        full = fio.decode_jpeg(path, mode=mode)
        if "rgb" not in path:
            assert torch.equal(full, reference(Path(path).read_bytes())[mode])
        assert torch.equal(ds[i][0], full)
        for t, left, h, w in windows(image.height, image.width, rng, 3):
            window = full[:, t:t + h, left:left + w]
            assert torch.equal(image.decode((t, left, h, w)), window), (path, t, left, h, w)
            cut = image.cut((t, left, h, w))
            assert torch.equal(fio.decode_jpeg(cut.data, crop=tuple(cut[1:]), mode=mode), window)
        for m in (1, 3, 4, 6):
            scaled = fio.decode_jpeg(path, mode=mode, scale=m)
            for t, left, h, w in windows(*scaled.shape[1:], rng, 2):
                got = image.decode((t, left, h, w), scale=m)
                assert torch.equal(got, scaled[:, t:t + h, left:left + w]), (path, m, t, left, h, w)


def test_raw_packs_hold_pillows_rgb(folder, packs):
    ds = fio.PackedDataset(packs / "raw")
    for i, (path, _) in enumerate(fio.ImageFolder(folder).samples):
        assert torch.equal(ds[i][0], fio.decode_jpeg(path)), path


@pytest.mark.parametrize("mode", ["RGB", "YCbCr"])
def test_a_device_batch_decodes_4_component_cuts_on_the_host(folder, packs, monkeypatch, mode):
    """A device decoder's colour conversion is not Pillow's: decode_window_batch sends a CMYK / YCCK
    cut to the host decoder (its window only) and uploads it; the others reach the device decoder,
    here a CPU stand-in for one."""
    reached = []

    class StandIn:
        name = "stand-in"

        def decode(self, buffers, crops, mode, dev):
            reached.extend(device_decoders.frame_components(b) for b in buffers)
            return [fio.decode_jpeg(b, crop=c, mode=mode) for b, c in zip(buffers, crops, strict=True)]

    ds = fio.PackedDataset(packs / "jpeg", mode=mode)
    crops = [(1, 2, ds.load_raw(i)[0].height - 3, ds.load_raw(i)[0].width // 2) for i in range(len(ds))]
    cuts = [ds.cut_window(i, crop) for i, crop in enumerate(crops)]
    chain = device_decoders.DecoderChain([StandIn()])
    got = fio.decode_window_batch(cuts, device="cpu", mode=mode, jpeg_decoder=chain)
    assert reached == [3]  # only the RGB photo's cut went to the device decoder
    assert chain.counts == {"stand-in": 1, device_decoders.HOST: len(cuts) - 1}
    assert chain.refused == {"4-component (CMYK / YCCK)": len(cuts) - 1}
    for i, ((t, left, h, w), image) in enumerate(zip(crops, got, strict=True)):
        if mode == "RGB" or "rgb" not in ds.where(i):  # the device's YCbCr of an RGB photo is converted RGB
            assert torch.equal(image, ds[i][0][:, t:t + h, left:left + w]), i
    assert [device_decoders.frame_components(case_jpeg(n)) for n in CASES] == [4] * len(CASES)
    assert device_decoders.frame_components(b"\xff\xd8\xff\xe0\x00") == 0 and device_decoders.frame_components(b"not a jpeg") == 0


def test_two_components_are_still_refused_by_name():
    data = bytearray(cmyk_jpeg((16, 16)))
    sof = data.find(b"\xff\xc0")
    # Two components: drop the last two component specs from the SOF and rewrite its length.
    del data[sof + 16:sof + 22]
    data[sof + 2:sof + 4] = (8 + 3 * 2).to_bytes(2, "big")
    data[sof + 9] = 2
    sos = data.find(b"\xff\xda")  # its scan, of the first two (libjpeg reads the header up to it)
    del data[sos + 9:sos + 13]
    data[sos + 2:sos + 4] = (6 + 2 * 2).to_bytes(2, "big")
    data[sos + 4] = 2
    assert fio.read_jpeg_header(bytes(data)).components == 2
    with pytest.raises(ValueError, match=r"decode_jpeg: a JPEG of 2 components in no colour space libjpeg knows is "
                                         r"not decoded \(fastprep reads 1: grey, 3: YCbCr or RGB, 4: CMYK or YCCK\)"):
        fio.decode_jpeg(bytes(data))
    with pytest.raises(ValueError, match=r"a JPEG of 2 components is not packed \(grey, YCbCr, RGB, CMYK and YCCK"):
        fio.jpeg._jpeg.transcode_record(bytes(data), 4, False)
