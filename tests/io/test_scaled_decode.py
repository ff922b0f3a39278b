"""Reduced-scale JPEG decoding (libjpeg-turbo's M/8 scales) and the opt-in that uses it,
``RandomResizedCrop(..., jpeg_scale="reduced")`` / ``Resize(..., jpeg_scale="reduced")``.

The scaled decode of a window must be libjpeg-turbo's own scaled decode of the whole image,
cropped (Pillow's ``draft`` runs it for M = 1, 2, 4), from a file and from a packed record's cut;
the opt-in must give the same bits in the fused batch path as one sample at a time, read exactly
what is not a JPEG, and refuse bad arguments by name."""

import io
import os

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

import fastprep
import fastprep.io as fio
from fastprep import transforms as T
from fastprep.io.jpeg._scale import reduced_crop, scaled_size

from helpers.jpeg_photos import encode, grey_jpeg, needs_decoder, photo, photo_jpeg, write_tree

PIL = pytest.importorskip("PIL.Image")

pytestmark = [needs_decoder]

SHAPES = {"astronaut": (512, 512), "coffee": (301, 411), "chelsea": (300, 451)}  # odd sizes: partial blocks


def _jpeg(name: str, subsampling: str) -> bytes:
    h, w = SHAPES[name]
    return encode(np.ascontiguousarray(photo(name)[:h, :w]), subsampling=subsampling)


def _windows(h: int, w: int, rng: np.random.Generator, n: int = 6) -> list[tuple[int, int, int, int]]:
    """Random windows of an h x w image, plus the whole image and its corners."""
    out = [(0, 0, h, w), (0, 0, 1, 1), (h - 1, w - 1, 1, 1), (0, w - 3, h, 3)]
    for _ in range(n):
        wh, ww = int(rng.integers(1, h + 1)), int(rng.integers(1, w + 1))
        out.append((int(rng.integers(0, h - wh + 1)), int(rng.integers(0, w - ww + 1)), wh, ww))
    return out


@pytest.mark.one_backend
@pytest.mark.parametrize("subsampling", ["4:4:4", "4:2:2", "4:2:0"])
def test_scaled_decode_is_libjpeg_turbos_scaled_decode_cropped(subsampling):
    rng = np.random.default_rng(0)
    for name, (H, W) in SHAPES.items():
        data = _jpeg(name, subsampling)
        for m in (1, 2, 4):  # Pillow's draft picks the scale M/8 from a requested size
            with PIL.open(io.BytesIO(data)) as im:
                im.draft("RGB", (W * m // 8, H * m // 8))
                want = torch.from_numpy(np.array(im.convert("RGB"))).permute(2, 0, 1)
            assert torch.equal(fio.decode_jpeg(data, scale=m), want), (name, m)
        for m in range(1, 9):
            whole = fio.decode_jpeg(data, scale=m)
            assert tuple(whole.shape[1:]) == scaled_size(H, W, m)
            for t, left, h, w in _windows(*whole.shape[1:], rng):
                got = fio.decode_jpeg(data, crop=(t, left, h, w), scale=m, layout="HWC")
                assert torch.equal(got.permute(2, 0, 1), whole[:, t:t + h, left:left + w]), (name, m, (t, left, h, w))


@pytest.mark.one_backend
def test_grey_progressive_and_every_mode_too():
    rng = np.random.default_rng(2)
    for data in (grey_jpeg(), grey_jpeg(progressive=True), photo_jpeg("coffee", "4:2:2", True, (301, 411))):
        for mode in ("RGB", "YCbCr", "GRAY"):
            for m in (2, 3, 4):
                whole = fio.decode_jpeg(data, scale=m, mode=mode)
                for t, left, h, w in _windows(*whole.shape[1:], rng, n=3):
                    got = fio.decode_jpeg(data, crop=(t, left, h, w), scale=m, mode=mode)
                    assert torch.equal(got, whole[:, t:t + h, left:left + w]), (mode, m, (t, left, h, w))


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    """A pack of the photos in 4:2:0 and 4:2:2 (the source files' bytes kept for the references)."""
    root = tmp_path_factory.mktemp("scaled")
    files = {f"{s.replace(':', '')}/{name}.jpg": _jpeg(name, s) for name in SHAPES for s in ("4:2:0", "4:2:2")}
    (root / "src").mkdir()
    write_tree(root / "src", {rel: (lambda b=b: b) for rel, b in files.items()})
    fio.pack(root / "src", root / "pack", progress=False, threads=1)
    ds = fio.PackedDataset(root / "pack")
    return ds, [files[rel] for rel in sorted(files)]  # ImageFolder order: classes, then file names


@pytest.mark.one_backend
def test_a_packed_windows_scaled_decode_is_the_files(packed):
    """The cut holds the blocks the scaled window comes from (and the chroma context where the
    scaled decode still upsamples: 4:2:2): the file's scaled decode, cropped."""
    ds, sources = packed
    rng = np.random.default_rng(1)
    for i, data in enumerate(sources):
        item = ds.load_raw(i)[0]
        for m in (1, 2, 3, 4, 6):
            whole = fio.decode_jpeg(data, scale=m)
            for t, left, h, w in _windows(*whole.shape[1:], rng, n=8):
                got = item.decode((t, left, h, w), scale=m)
                assert torch.equal(got, whole[:, t:t + h, left:left + w]), (i, m, (t, left, h, w))


@pytest.mark.one_backend
def test_a_scaled_window_read_by_range_is_the_mapped_records(packed, tmp_path):
    """A remote pack's record read by range (fetch="ranges") brings the full-scale rows the scaled
    window's blocks come from: the same bits as the mapped record's scaled decode."""
    pytest.importorskip("fsspec")
    ds, _ = packed
    remote = fio.PackedDataset(f"file://{ds.path}", cache_dir=tmp_path / "cache", fetch="ranges")
    rng = np.random.default_rng(2)
    for i in range(len(ds)):
        here, there = ds.load_raw(i)[0], remote.load_raw(i)[0]
        for m in (1, 2, 4, 8):
            for window in _windows(*scaled_size(here.height, here.width, m), rng, n=3):
                assert torch.equal(there.decode(window, scale=m), here.decode(window, scale=m)), (i, m, window)
    assert 0 < remote.bytes_fetched


@pytest.mark.one_backend
@pytest.mark.parametrize("crop, size, at_least, want", [
    ((150, 170, 700, 700), (1024, 1024), (224, 224), (4, (75, 85, 350, 350))),
    ((0, 0, 1024, 1024), (1024, 1024), (224, 224), (2, (0, 0, 256, 256))),
    ((0, 0, 1024, 1024), (1024, 1024), (100, 100), (1, (0, 0, 128, 128))),
    ((0, 0, 300, 300), (1024, 1024), (224, 224), (8, (0, 0, 300, 300))),  # 1/2 would be 150 < 224
    ((3, 5, 900, 448), (1000, 700), (224, 224), (4, (2, 3, 450, 224))),  # the narrow side decides
    ((3, 5, 900, 447), (1000, 700), (224, 224), (8, (3, 5, 900, 447))),
    ((996, 0, 4, 700), (1000, 700), (1, 1), (2, (249, 0, 1, 175))),  # 1/8 rounds the 4 rows away
    ((999, 0, 1, 700), (1000, 700), (1, 1), (8, (999, 0, 1, 700))),  # no scale keeps one row
])
def test_reduced_crop_picks_the_smallest_scale_that_keeps_the_output(crop, size, at_least, want):
    scale, scaled = reduced_crop(crop, *size, at_least)
    assert (scale, scaled) == want
    if scale < 8:  # the scaled window is inside the scaled image
        sh, sw = scaled_size(*size, scale)
        assert scaled[0] + scaled[2] <= sh and scaled[1] + scaled[3] <= sw


def _pipeline(jpeg_scale, resize=True):
    first = T.RandomResizedCrop(40, jpeg_scale=jpeg_scale) if resize else T.Resize(48, jpeg_scale=jpeg_scale)
    rest = [T.RandomHorizontalFlip()] if resize else [T.CenterCrop(40)]
    return [first, *rest]


def _samples(batches):
    return [img.clone() for b in batches for img in b.data[0]]


def _source(packed, kind, transform=None):
    """The pack, or the files it was packed from as JpegFiles (ImageFolder(roi=True))."""
    path = packed[0].path
    if kind == "packed":
        return fio.PackedDataset(path, transform=transform)
    return fio.ImageFolder(os.path.join(os.path.dirname(path), "src"), roi=True, transform=transform)


@pytest.mark.parametrize("kind", ["packed", "files"])
@pytest.mark.parametrize("resize", [True, False], ids=["RandomResizedCrop", "Resize+CenterCrop"])
def test_reduced_decode_batch_path_is_the_per_sample_path(packed, resize, kind):
    """The Loader's fused chunks read the same scaled windows as the steps one by one (SeedByIndex
    + DataLoader), the same bits on every run; and they are not the exact decode's."""
    ds = _source(packed, kind)
    ref = _source(packed, kind, T.Compose(_pipeline("reduced", resize), fuse=False))
    want = [img for b in DataLoader(T.SeedByIndex(ref, seed=5), batch_size=4, collate_fn=fastprep.compact_collate)
            for img in b[0]]
    runs = [_samples(fastprep.Loader(ds, 4, transform=T.Compose(_pipeline("reduced", resize)), seed=5, threads=2))
            for _ in range(2)]
    exact = _samples(fastprep.Loader(ds, 4, transform=T.Compose(_pipeline("exact", resize)), seed=5, threads=2))
    assert len(want) == len(runs[0]) == len(exact) == len(ds)
    assert all(torch.equal(a, b) and torch.equal(a, c) for a, b, c in zip(want, *runs))
    assert any(not torch.equal(a, b) for a, b in zip(runs[0], exact))
    for a, b in zip(runs[0], exact):  # a reduced decode of the same window: close, not equal
        mse = (a.double() - b.double()).pow(2).mean().item()
        assert mse == 0 or 10 * np.log10(255 ** 2 / mse) > 20


def test_reduced_decode_reads_other_images_exactly():
    """Tensors, arrays and PIL images have no scaled decode: 'reduced' gives 'exact''s bits."""
    img = torch.from_numpy(np.ascontiguousarray(photo("astronaut"))).permute(2, 0, 1)
    for make in (lambda d: T.RandomResizedCrop(64, jpeg_scale=d), lambda d: T.Resize(64, jpeg_scale=d)):
        torch.manual_seed(3)
        a = make("reduced")(img)
        torch.manual_seed(3)
        assert torch.equal(a, make("exact")(img))


@pytest.mark.one_backend
def test_bad_arguments_are_named():
    for make in (lambda: T.RandomResizedCrop(224, jpeg_scale="fast"), lambda: T.Resize(224, jpeg_scale=None)):
        with pytest.raises(ValueError, match=r"expected jpeg_scale to be one of \('exact', 'reduced'\), got"):
            make()
    assert "jpeg_scale='reduced'" in repr(T.RandomResizedCrop(224, jpeg_scale="reduced"))
    assert "jpeg_scale" not in repr(T.Resize(224))
    data = _jpeg("coffee", "4:2:0")
    for bad in (0, 9, 2.0, True, "4"):
        with pytest.raises(ValueError, match=r"decode_jpeg: expected scale to be an int M in 1\.\.8"):
            fio.decode_jpeg(data, scale=bad)
    with pytest.raises(ValueError, match=r"at scale 4/8: crop \(top=0, left=0, height=152, width=10\) is not inside "
                                         r"the 151x206 image"):
        fio.decode_jpeg(data, crop=(0, 0, 152, 10), scale=4)


@pytest.mark.one_backend
def test_bad_packed_scales_are_named(packed):
    ds, _ = packed
    item = ds.load_raw(0)[0]
    with pytest.raises(ValueError, match=r"PackedJpeg.decode: expected scale to be an int M in 1\.\.8 .*, got 16"):
        item.decode(scale=16)
    h, w = scaled_size(item.height, item.width, 2)
    with pytest.raises(ValueError, match=rf"at scale 2/8: crop .* is not inside the {h}x{w} image"):
        item.decode((0, 0, h + 1, w), scale=2)
    from fastprep import _jpeg  # the binding checks what it is given too (C++: before touching memory)
    out = torch.empty(3, 4, 4, dtype=torch.uint8)
    with pytest.raises(ValueError, match=r"scale: expected M of a scale M/8 in 1\.\.8, got 0"):
        _jpeg.decode_record_into(item.record, item.checksum, out.numpy(), 0, 0, "RGB", False, True, 0)
    with pytest.raises(ValueError, match=r"not inside the .* image \(the image decoded at scale 1/8\)"):
        _jpeg.decode_record_into(item.record, item.checksum, out.numpy(), h, 0, "RGB", False, True, 1)
