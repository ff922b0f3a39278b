"""fastprep.io.ImageFolder and JpegFile: torchvision's folder order, decoding in load_raw,
JpegFile windows with the bits of the full decode cropped (and the fused op on them), the Loader
over a folder, and decode_jpeg_batch's errors (its GPU run needs torchvision + CUDA)."""

import io
import os

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

import fastprep
import fastprep.io as fio
from fastprep import transforms as T

from helpers.jpeg_photos import encode, grey_jpeg, needs_decoder, photo, photo_jpeg

pytestmark = [needs_decoder, pytest.mark.one_backend]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """root/{cat,dog,grey}/...: JPEGs of every kind, a PNG, an upper-case extension, a nested
    folder, and files ImageFolder must skip."""
    from PIL import Image

    root = tmp_path_factory.mktemp("images")
    files = {
        "cat/b.jpg": photo_jpeg("chelsea", "4:2:0", False, (160, 224)),
        "cat/a.JPEG": photo_jpeg("chelsea", "4:4:4", True, (150, 200)),
        "cat/nested/c.jpeg": photo_jpeg("coffee", "4:2:2", False, (140, 180)),
        "dog/z.png": None,
        "dog/y.jpg": photo_jpeg("astronaut", "4:2:0", True, (128, 128)),
        "grey/g.jpg": grey_jpeg(False, (130, 170)),
        "grey/notes.txt": b"not an image",
    }
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if data is None:
            Image.fromarray(photo("rocket")[:100, :120]).save(path)
        else:
            path.write_bytes(data)
    return root


def test_lists_files_in_torchvisions_order(folder):
    ds = fio.ImageFolder(folder)
    assert ds.classes == ["cat", "dog", "grey"] and ds.class_to_idx == {"cat": 0, "dog": 1, "grey": 2}
    rel = [(os.path.relpath(p, folder), t) for p, t in ds.samples]
    assert rel == [("cat/a.JPEG", 0), ("cat/b.jpg", 0), ("cat/nested/c.jpeg", 0), ("dog/y.jpg", 1), ("dog/z.png", 1),
                   ("grey/g.jpg", 2)]
    assert ds.targets == [0, 0, 0, 1, 1, 2] and len(ds) == 6


@pytest.mark.parametrize(("mode", "layout"), [("RGB", "CHW"), ("RGB", "HWC"), ("YCbCr", "CHW"), ("GRAY", "HWC")])
def test_load_raw_decodes_every_file(folder, mode, layout):
    from PIL import Image

    ds = fio.ImageFolder(folder, mode=mode, layout=layout)
    for i, (path, target) in enumerate(ds.samples):
        image, label = ds.load_raw(i)
        assert label == target and image.dtype == torch.uint8
        if path.endswith(".png"):
            with Image.open(path) as img:
                rgb = torch.from_numpy(np.array(img.convert("RGB"))).permute(2, 0, 1)
            expected = {"RGB": rgb, "YCbCr": fastprep.rgb_to_ycbcr(rgb),
                        "GRAY": torch.from_numpy(np.array(Image.open(path).convert("L")))[None]}[mode]
        else:
            expected = fio.decode_jpeg(path, mode=mode)
        assert torch.equal(image, expected if layout == "CHW" else expected.permute(1, 2, 0)), path


def test_roi_load_raw_gives_jpeg_files_and_getitem_the_same_bits(folder):
    crop = T.RandomCrop(96)
    plain, roi = fio.ImageFolder(folder, transform=crop), fio.ImageFolder(folder, transform=crop, roi=True)
    raw, label = roi.load_raw(1)
    assert isinstance(raw, fio.JpegFile) and (raw.height, raw.width) == (160, 224) and label == 0
    assert "cat/b.jpg" in repr(raw) and "4:2:0" in repr(raw)
    assert isinstance(roi.load_raw(4)[0], torch.Tensor)  # the PNG is decoded
    for i in range(len(plain)):
        torch.manual_seed(i)
        a = plain[i]
        torch.manual_seed(i)
        b = roi[i]
        assert torch.equal(a[0], b[0]) and a[1] == b[1]


@pytest.mark.parametrize("layout", ["CHW", "HWC"])
@pytest.mark.parametrize("subsampling", ["4:4:4", "4:2:2", "4:2:0"])
def test_jpeg_file_random_crop_is_random_crop_of_the_full_decode(subsampling, layout):
    f = fio.JpegFile(photo_jpeg("coffee", subsampling, False, (301, 451)), layout=layout)
    full = f.decode()
    for seed in range(30):
        h, w = (1 + seed * 7) % 301 or 1, (3 + seed * 13) % 451 or 1
        expected = fastprep.random_crop(full, h, w, seed, layout)  # [3, h, w]
        got = f.random_crop(h, w, seed)
        assert torch.equal(got if layout == "CHW" else got.permute(2, 0, 1), expected), (seed, h, w)


@pytest.mark.parametrize("layout", ["CHW", "HWC"])
def test_the_fused_op_on_the_decoded_window_gives_the_full_images_bits(layout):
    """The Loader / Compose hook (described in the report): draw (crop_seed, mask_seed) as the fused
    path does, decode only random_crop's window, and run crop_mask_ycbcr(_batch) on it with the
    same seeds: the window's size leaves one position, so the result is the full image's."""
    files = [fio.JpegFile(photo_jpeg(n, s, p), layout=layout) for n, s, p in
             [("astronaut", "4:2:0", False), ("coffee", "4:2:2", True), ("chelsea", "4:4:4", False)]]
    for k, f in enumerate(files):
        crop_seed, mask_seed = 1000 + k, 2000 + k
        full = f.decode()
        window = f.random_crop(64, 80, crop_seed)
        a, b = (fastprep.crop_mask_ycbcr(src, 64, 80, 0.25, crop_seed, layout, return_mask=True, mask_seed=mask_seed)
                for src in (full, window))
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    seeds = [11, 12, 13]
    crop_seeds = [fastprep.derive_seed(5, i) for i in range(3)]
    fulls, windows = [f.decode() for f in files], [f.random_crop(64, 80, s) for f, s in zip(files, crop_seeds)]
    tops, lefts = zip(*(fastprep.random_crop_params(f.height, f.width, 64, 80, s) for f, s in zip(files, crop_seeds)))
    outs = [torch.empty(3, 3, 64, 80, dtype=torch.uint8) for _ in range(2)]
    for srcs, out, at in zip((fulls, windows), outs, ((tops, lefts), ([0] * 3, [0] * 3))):
        torch.ops.fastprep.crop_mask_ycbcr_batch(srcs, *at, 64, 80, 0.25, seeds, out, layout, "cross", 1.0, True, None)
    assert torch.equal(outs[0], outs[1])


def _train_tf():
    return T.seed_workload(64)


def _collect(batches):
    images, labels = [], []
    for b in batches:
        x, y = b.data if isinstance(b, fastprep.CompactBatch) else b
        images.append(x.clone())
        labels.append(y.clone())
    return torch.cat(images), torch.cat(labels)


@pytest.mark.parametrize("threads", [1, 2])
def test_loader_over_a_folder_decodes_in_its_threads_with_dataloaders_bits(folder, threads):
    ds = fio.ImageFolder(folder, extensions=(".jpg", ".jpeg"))  # JPEGs, grey ones as RGB
    loader = fastprep.Loader(ds, 2, transform=_train_tf(), seed=3, threads=threads)
    ref = DataLoader(T.SeedByIndex(fio.ImageFolder(folder, transform=_train_tf(), extensions=(".jpg", ".jpeg")), seed=3),
                     batch_size=2, collate_fn=fastprep.compact_collate)
    got, expected = _collect(loader), _collect(ref)
    assert torch.equal(got[0], expected[0]) and torch.equal(got[1], expected[1])


def test_folder_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"ImageFolder: no class folder in"):
        fio.ImageFolder(tmp_path)
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=r"no file ending in .jpg, .jpeg.* in the class folders \['empty'\]"):
        fio.ImageFolder(tmp_path)
    (tmp_path / "empty" / "x.jpg").write_bytes(b"garbage")
    with pytest.raises(ValueError, match=r"ImageFolder: expected mode to be one of"):
        fio.ImageFolder(tmp_path, mode="L")
    ds = fio.ImageFolder(tmp_path)
    with pytest.raises(ValueError, match=r"ImageFolder: .*x.jpg: not a JPEG, and Pillow cannot decode it: cannot identify"):
        ds.load_raw(0)
    (tmp_path / "empty" / "x.jpg").write_bytes(encode(photo("chelsea"))[:-2000] + b"\xff\xd9")
    with pytest.warns(fio.CorruptJpegWarning, match=r"x.jpg"):
        fio.ImageFolder(tmp_path, strict=False).load_raw(0)
    with pytest.raises(ValueError, match=r"x.jpg: corrupt JPEG"):
        ds.load_raw(0)  # the default (strict): a bad sample, as Pillow raises


def test_decode_jpeg_batch_errors():
    data = [photo_jpeg("chelsea")]
    with pytest.raises(ValueError, match=r"decode_jpeg_batch: expected a CUDA device, got 'cpu'"):
        fio.decode_jpeg_batch(data, device="cpu")
    with pytest.raises(ValueError, match=r"decode_jpeg_batch: expected mode to be one of"):
        fio.decode_jpeg_batch(data, mode="CMYK")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match=r"decode_jpeg_batch: device='cuda' but CUDA is not available"):
            fio.decode_jpeg_batch(data)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_decode_jpeg_batch_on_cuda_is_close_to_the_cpu_decode():
    pytest.importorskip("torchvision.io")
    datas = [photo_jpeg(n, s) for n in ("astronaut", "coffee") for s in ("4:4:4", "4:2:0")]
    for mode in ("RGB", "YCbCr", "GRAY"):
        images = fio.decode_jpeg_batch(datas, mode=mode)
        for data, img in zip(datas, images):
            cpu = fio.decode_jpeg(data, mode=mode) if mode != "YCbCr" else fastprep.rgb_to_ycbcr(fio.decode_jpeg(data))
            assert img.is_cuda and img.shape == cpu.shape
            assert (img.cpu().int() - cpu.int()).abs().float().mean() < 1.0  # nvJPEG's IDCT is not libjpeg's


def test_pil_png_in_a_bytes_io_is_not_mistaken_for_a_jpeg():
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(photo("rocket")[:10, :10]).save(buf, format="PNG")
    with pytest.raises(ValueError, match=r"Not a JPEG file"):
        fio.JpegFile(buf.getvalue())


def _roi_pair(folder, **kw):
    return (fio.ImageFolder(folder, extensions=(".jpg", ".jpeg"), **kw),
            fio.ImageFolder(folder, extensions=(".jpg", ".jpeg"), roi=True, **kw))


class _Foreign(torch.nn.Module):
    """A transform that is not fastprep's: it must get decoded pixels, never a JpegFile."""

    def forward(self, img):
        assert isinstance(img, torch.Tensor), type(img)
        return img[..., 8:72, 4:84].clone()


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("tf", ["fused", "flip_fused", "padded_flip", "foreign", "mixed"])
def test_loader_over_roi_jpeg_files_gives_the_full_decodes_bits(folder, threads, tf):
    """ImageFolder(roi=True) hands the Loader JpegFiles: the fused path and every crop decode only
    their window; a transform that is not fastprep's gets the whole image decoded. Same batches."""
    make = {"fused": _train_tf,
            "flip_fused": lambda: T.Compose([T.RandomHorizontalFlip(), *_train_tf().transforms]),
            "padded_flip": lambda: T.Compose([T.RandomHorizontalFlip(), T.RandomCrop(160, padding=(3, 5), pad_if_needed=True,
                                                                                      padding_mode="reflect")]),
            "foreign": _Foreign,
            "mixed": lambda: T.Compose([_Foreign(), T.RandomCrop(32), T.RGBToYCbCr()])}[tf]
    plain, roi = _roi_pair(folder)
    got = [_collect(fastprep.Loader(ds, 2, transform=make(), seed=4, threads=threads)) for ds in (plain, roi)]
    assert torch.equal(got[0][0], got[1][0]) and torch.equal(got[0][1], got[1][1])
    if tf.endswith("fused"):  # and the unfused chain's bits (the flip drawn on the same generator)
        unfused = make()
        unfused.fuse = False
        ref = DataLoader(T.SeedByIndex(fio.ImageFolder(plain.root, transform=unfused, extensions=(".jpg", ".jpeg")),
                                       seed=4), batch_size=2, collate_fn=fastprep.compact_collate)
        assert torch.equal(got[0][0], _collect(ref)[0])


def test_dataloader_over_roi_jpeg_files_gives_the_full_decodes_bits(folder):
    got = []
    for roi in (False, True):
        ds = fio.ImageFolder(folder, transform=_train_tf(), extensions=(".jpg", ".jpeg"), roi=roi)
        got.append(_collect(DataLoader(T.SeedByIndex(ds, seed=9), batch_size=3, collate_fn=fastprep.compact_collate)))
    assert torch.equal(got[0][0], got[1][0]) and torch.equal(got[0][1], got[1][1])


def test_structured_samples_with_jpeg_files_crop_every_item_at_one_window():
    data = photo_jpeg("coffee", "4:2:2", False, (140, 180))
    f = fio.JpegFile(data)
    mask = torch.arange(140 * 180).reshape(140, 180) % 3 == 0
    tf = T.RandomCrop(150, pad_if_needed=True, fill=7)
    torch.manual_seed(2)
    a = tf({"image": f.decode(), "mask": mask, "id": "x"})
    torch.manual_seed(2)
    b = tf({"image": f, "mask": mask, "id": "x"})
    assert torch.equal(a["image"], b["image"]) and torch.equal(a["mask"], b["mask"]) and b["id"] == "x"
    assert T.RGBToYCbCr()(f).shape == (3, 140, 180)  # a pixel transform decodes it whole


def test_jpeg_files_that_do_not_decode_to_rgb_are_refused_by_colour_steps():
    f = fio.JpegFile(photo_jpeg("coffee"), mode="YCbCr", name="c.jpg")
    tf = T.seed_workload(32)
    with pytest.raises(ValueError, match=r"expects RGB pixels, got a JpegFile of c.jpg, .* mode 'YCbCr'.*mode='RGB'"):
        tf(f)


def test_the_fused_loader_path_decodes_only_windows(folder, monkeypatch):
    crops = []
    decode = fio.JpegFile.decode

    def recording(self, crop=None, **kw):
        crops.append(crop)
        return decode(self, crop, **kw)

    monkeypatch.setattr(fio.JpegFile, "decode", recording)
    roi = fio.ImageFolder(folder, extensions=(".jpg", ".jpeg"), roi=True)
    _collect(fastprep.Loader(roi, 2, transform=_train_tf(), seed=4, threads=1))
    assert len(crops) == len(roi) and all(c is not None and c[2:] == (64, 64) for c in crops), crops
