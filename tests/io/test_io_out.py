"""Every reader's ``decode(..., out=)`` in fastprep.io, as a table: each item type a source hands out
(decode_jpeg itself, JpegFile from bytes / a folder / an LMDB / a tar shard / an HDF5 file of
encoded images, HDF5Image over HWC, CHW and grey pixels, PackedJpeg of a YCbCr- and an RGB-coded
JPEG, PackedRaw) x layout x mode x {whole, crop}. A good `out` (contiguous, a slice of a batch, a
permuted view) receives the bits of the call without `out` and is returned itself; a bad one
(shape, the other layout's shape, dtype, device, overlapping elements, sparse, not a tensor) is
refused with a ValueError naming `out`, before anything is written."""

import io
import pickle
import re
import tarfile

import numpy as np
import pytest
import torch

import fastprep.io as fio

from helpers.jpeg_photos import encode, needs_decoder, photo, photo_jpeg

pytestmark = [needs_decoder, pytest.mark.one_backend]

SHAPE = (61, 75)  # odd sizes: partial MCUs at the right and bottom edges
CROP = (5, 17, 33, 41)


def _jpeg() -> bytes:
    return photo_jpeg("coffee", "4:2:0", False, SHAPE)


def _rgb_coded() -> bytes:
    return encode(np.ascontiguousarray(photo("chelsea")[:SHAPE[0], :SHAPE[1]]), subsampling="4:4:4", keep_rgb=True)


class _Function:
    """decode_jpeg as an item: decode(crop, out=) calls it with the item's mode and layout."""

    def __init__(self, data, mode, layout):
        self.data, self.mode, self.layout = data, mode, layout

    def decode(self, crop=None, *, out=None):
        return fio.decode_jpeg(self.data, crop=crop, mode=self.mode, layout=self.layout, out=out)


def _folder(root, mode, layout):
    if not (root / "folder").exists():
        (root / "folder" / "k").mkdir(parents=True)
        (root / "folder" / "k" / "a.jpg").write_bytes(_jpeg())
    return fio.ImageFolder(root / "folder", roi=True, mode=mode, layout=layout).load_raw(0)[0]


def _lmdb(root, mode, layout):
    lmdb = pytest.importorskip("lmdb")
    path = root / "db"
    if not path.exists():
        env = lmdb.open(str(path), map_size=1 << 22)
        with env.begin(write=True) as txn:
            txn.put(b"00000000", pickle.dumps((_jpeg(), 3)))
        env.close()
    return fio.LMDBDataset(path, mode=mode, layout=layout).load_raw(0)[0]


def _tar(root, mode, layout):
    path = root / "shard-000.tar"
    if not path.exists():
        with tarfile.open(path, "w") as tar:
            for name, data in (("s0.jpg", _jpeg()), ("s0.cls", b"3")):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return next(iter(fio.WebDataset(str(path), mode=mode, layout=layout, seed=0).iter_raw()))[0]


def _h5(root, images, mode, layout, **kw):
    h5py = pytest.importorskip("h5py")
    path = root / "images.h5"
    if not path.exists():
        pixels = photo("astronaut")[:SHAPE[0], :SHAPE[1]]
        with h5py.File(path, "w") as f:
            f["hwc"] = pixels[None]
            f["chw"] = np.ascontiguousarray(pixels.transpose(2, 0, 1))[None]
            f["grey"] = np.ascontiguousarray(pixels[..., 1])[None]
            f.create_dataset("jpegs", (1,), dtype=h5py.vlen_dtype(np.uint8))[0] = np.frombuffer(_jpeg(), np.uint8)
    return fio.HDF5Dataset(path, images, mode=mode, layout=layout, **kw).load_raw(0)


def _packed(root, name, mode, layout, data=_jpeg, packing="jpeg"):
    path = root / name
    if not path.exists():
        (root / f"src-{name}" / "k").mkdir(parents=True)
        (root / f"src-{name}" / "k" / "a.jpg").write_bytes(data())
        fio.pack(root / f"src-{name}", path, mode=packing, progress=False)
    return fio.PackedDataset(path, mode=mode, layout=layout).load_raw(0)[0]


RGB, ALL = ("RGB", "YCbCr"), ("RGB", "YCbCr", "GRAY")
ITEMS = {  # name: (the item, given (folder for files, mode, layout); its modes; its type)
    "decode_jpeg": (lambda r, m, lay: _Function(_jpeg(), m, lay), ALL, _Function),
    "decode_jpeg rgb-coded": (lambda r, m, lay: _Function(_rgb_coded(), m, lay), ALL, _Function),
    "JpegFile": (lambda r, m, lay: fio.JpegFile(_jpeg(), mode=m, layout=lay), ALL, fio.JpegFile),
    "ImageFolder item": (_folder, ALL, fio.JpegFile),
    "LMDBDataset item": (_lmdb, ALL, fio.JpegFile),
    "WebDataset item": (_tar, ALL, fio.JpegFile),
    "HDF5Dataset JPEG item": (lambda r, m, lay: _h5(r, "jpegs", m, lay), ALL, fio.JpegFile),
    "HDF5Image HWC": (lambda r, m, lay: _h5(r, "hwc", m, lay), ("RGB",), fio.HDF5Image),
    "HDF5Image CHW": (lambda r, m, lay: _h5(r, "chw", m, lay, stored="CHW"), ("RGB",), fio.HDF5Image),
    "HDF5Image grey": (lambda r, m, lay: _h5(r, "grey", m, lay), ("RGB", "GRAY"), fio.HDF5Image),
    "PackedJpeg": (lambda r, m, lay: _packed(r, "jpeg", m, lay), ALL, fio.PackedJpeg),
    "PackedJpeg rgb-coded": (lambda r, m, lay: _packed(r, "rgb", m, lay, _rgb_coded), ALL, fio.PackedJpeg),
    "PackedRaw": (lambda r, m, lay: _packed(r, "raw", m, lay, packing="raw"), RGB, fio.PackedRaw),
}
CASES = [(item, mode, layout, crop) for item, (_, modes, _) in ITEMS.items() for mode in modes
         for layout in ("CHW", "HWC") for crop in (None, CROP)]


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("items")


def _good_outs(shape, layout):
    """(name, out, what must stay 7): outs a reader must write into, and nothing around them."""
    batch = torch.full((3, *shape), 7, dtype=torch.uint8)
    order = (1, 2, 0) if layout == "CHW" else (2, 0, 1)  # the other layout's storage, permuted back
    other = torch.full(tuple(shape[d] for d in order), 7, dtype=torch.uint8)
    return [("contiguous", torch.full(shape, 7, dtype=torch.uint8), []),
            ("a slice of a batch", batch[1], [batch[0], batch[2]]),
            ("the other layout's storage", other.permute(*(order.index(d) for d in range(3))), [])]


def _bad_outs(shape, layout):
    """(name, out, what the message says about it)."""
    h, w = (shape[1], shape[2]) if layout == "CHW" else (shape[0], shape[1])
    c = shape[0] if layout == "CHW" else shape[2]
    other = (h, w, c) if layout == "CHW" else (c, h, w)
    wider = (c, h, w + 1) if layout == "CHW" else (h, w + 1, c)
    bad = [("one column too many", torch.empty(wider, dtype=torch.uint8), r"\(wrong shape\)"),
           ("float32", torch.empty(shape), r"got torch.float32 .*\(wrong dtype\)"),
           ("on the meta device", torch.empty(shape, dtype=torch.uint8, device="meta"), r"on meta \(wrong device"),
           ("overlapping (expand)", torch.zeros(1, 1, 1, dtype=torch.uint8).expand(shape),
            r"out has elements that share memory .*strides \(\d, \d, \d\)"),
           ("sparse", torch.zeros(shape, dtype=torch.uint8).to_sparse(), r"not dense: layout torch.sparse_coo"),
           ("a numpy array", np.empty(shape, np.uint8), r"got ndarray"),
           ("4-D", torch.empty(1, *shape, dtype=torch.uint8), r"\(wrong shape\)")]
    if other != shape:
        bad.append(("the other layout's shape", torch.empty(other, dtype=torch.uint8),
                    rf"that is the {'HWC' if layout == 'CHW' else 'CHW'} shape, pass layout="))
    return bad


@pytest.mark.parametrize(("item", "mode", "layout", "crop"), CASES,
                         ids=[f"{i}-{m}-{lay}-{'crop' if c else 'whole'}" for i, m, lay, c in CASES])
def test_out_receives_the_bits_or_is_refused_naming_it(root, item, mode, layout, crop):
    make, _, kind = ITEMS[item]
    image = make(root, mode, layout)
    assert type(image) is kind
    ref = image.decode(crop).clone()
    channels = 1 if mode == "GRAY" else 3
    h, w = (crop[2], crop[3]) if crop else SHAPE
    shape = (channels, h, w) if layout == "CHW" else (h, w, channels)
    assert tuple(ref.shape) == shape and ref.dtype == torch.uint8
    for name, out, around in _good_outs(shape, layout):
        got = image.decode(crop, out=out)
        assert got is out, name
        assert torch.equal(out, ref), name
        assert all((t == 7).all() for t in around), f"{name}: written outside out"
    for name, out, says in _bad_outs(shape, layout):
        dense = isinstance(out, torch.Tensor) and out.device.type == "cpu" and not out.is_sparse
        if dense and name != "overlapping (expand)":
            out.fill_(7)
        with pytest.raises(ValueError, match=r"\bout\b") as err:
            image.decode(crop, out=out)
        assert re.search(says, str(err.value)), (name, str(err.value))
        assert len(str(err.value)) < 400, name  # the arguments are named, never printed whole
        if dense and name != "overlapping (expand)":
            assert (out == 7).all(), f"{name}: written before it was refused"
