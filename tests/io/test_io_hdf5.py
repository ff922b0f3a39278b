"""fastprep.io.HDF5Dataset on files written by h5py: uint8 pixel arrays (HWC, CHW, grey) read by
window, reading only the chunks the window covers; variable-length JPEG bytes as JpegFiles;
transforms through DataLoader and Loader; errors naming the file, the dataset and the index."""

import io
import sys

import numpy as np
import pytest
import torch

import fastprep.io as fio

from helpers.jpeg_photos import needs_decoder, photo, photo_jpeg
from helpers.source_checks import check_map_source

h5py = pytest.importorskip("h5py")
pytestmark = [needs_decoder, pytest.mark.one_backend]

N, H, W = 5, 100, 140
LABELS = [2, 7, 1, 8, 2]
JPEGS = [photo_jpeg(name, sub, False, (90 + 10 * k, 120)) for k, (name, sub) in
         enumerate([("astronaut", "4:2:0"), ("coffee", "4:4:4"), ("chelsea", "4:2:2"), ("rocket", "4:2:0"),
                    ("coffee", "4:2:0")])]


@pytest.fixture(scope="module")
def pixels():
    arr = np.stack([np.roll(photo("astronaut")[:H, :W], 7 * k, axis=1) for k in range(N)])
    return np.ascontiguousarray(arr)


@pytest.fixture(scope="module")
def h5(tmp_path_factory, pixels):
    path = tmp_path_factory.mktemp("h5") / "data.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("hwc", data=pixels, chunks=(1, 16, 16, 3))
        f.create_dataset("chw", data=pixels.transpose(0, 3, 1, 2))
        f.create_dataset("grey", data=pixels[..., 1], chunks=(1, 32, 32))
        f.create_dataset("labels", data=np.array(LABELS, dtype=np.int64))
        jpegs = f.create_dataset("jpegs", (N,), dtype=h5py.vlen_dtype(np.uint8))
        for i, d in enumerate(JPEGS):
            jpegs[i] = np.frombuffer(d, np.uint8)
        f.create_dataset("floats", data=np.zeros((2, 8, 8, 3), np.float32))
        f.create_dataset("flat", data=np.zeros((2, 64), np.uint8))
        f.create_dataset("rgba", data=np.zeros((2, 8, 8, 4), np.uint8))
        f.create_dataset("strings", data=[b"a", b"b"], dtype=h5py.string_dtype("ascii"))
        f.create_dataset("short_labels", data=np.arange(3))
    return path


@pytest.mark.parametrize("images", ["hwc", "chw", "grey"])
def test_windows_are_the_arrays_slices_at_every_edge(h5, pixels, images):
    ds = fio.HDF5Dataset(h5, images, "labels", mode="GRAY" if images == "grey" else "RGB")
    want = torch.from_numpy(pixels[..., 1:2] if images == "grey" else pixels)  # [N, H, W, C]
    for i in (0, N - 1):
        item, label = ds.load_raw(i)
        assert isinstance(item, fio.HDF5Image) and (item.height, item.width) == (H, W) and label == LABELS[i]
        for top, left, h, w in [(0, 0, H, W), (0, 0, 17, 33), (H - 21, W - 40, 21, 40), (13, 0, 50, 1), (0, W - 1, H, 1)]:
            window = want[i, top:top + h, left:left + w]
            assert torch.equal(item.decode((top, left, h, w), layout="HWC"), window)
            assert torch.equal(item.decode((top, left, h, w)), window.permute(2, 0, 1))


class CountingFile(io.FileIO):
    """A file whose reads are recorded: (offset, bytes)."""

    reads: list = []

    def readinto(self, b):
        offset = self.tell()
        n = super().readinto(b)
        CountingFile.reads.append((offset, n))
        return n


def test_a_window_reads_only_the_chunks_it_covers(h5):
    files = []

    def opener():  # no chunk cache: each window reads from the file (a cache serves chunks read before)
        files.append(CountingFile(h5, "rb"))
        return h5py.File(files[-1], "r", rdcc_nbytes=0)

    ds = fio.HDF5Dataset(opener, "hwc")
    try:
        item = ds.load_raw(2)
        dset = item.dataset
        chunks = [dset.id.get_chunk_info(k) for k in range(dset.id.get_num_chunks())]
        item.decode((0, 0, 1, 1))  # the chunk index (B-tree) is read and cached on the first read
        for top, left, h, w in [(20, 40, 30, 10), (33, 0, 64, 64), (99, 139, 1, 1)]:
            CountingFile.reads.clear()
            item.decode((top, left, h, w))
            touched = {c.chunk_offset for c in chunks
                       if any(o < c.byte_offset + c.size and c.byte_offset < o + n for o, n in CountingFile.reads)}
            covering = {(2, r, c, 0) for r in range(top // 16 * 16, top + h, 16) for c in range(left // 16 * 16, left + w, 16)}
            assert touched == covering, (top, left, h, w)
            assert sum(n for _, n in CountingFile.reads) <= len(covering) * 16 * 16 * 3
    finally:
        ds.close()  # h5py can crash at exit with a Python file object still open
        for f in files:
            f.close()


def test_vlen_jpeg_bytes_come_out_as_jpeg_files(h5):
    ds = fio.HDF5Dataset(h5, "jpegs", "labels")
    image, label = ds.load_raw(1)
    assert isinstance(image, fio.JpegFile) and bytes(image.data) == JPEGS[1] and label == LABELS[1]
    assert torch.equal(fio.HDF5Dataset(h5, "jpegs", roi=False).load_raw(1), fio.decode_jpeg(JPEGS[1]))


@pytest.mark.parametrize("images", ["hwc", "jpegs"])
def test_transforms_give_the_decoded_images_bits_through_dataloader_and_loader(h5, pixels, images):
    decoded = ([fio.decode_jpeg(d) for d in JPEGS] if images == "jpegs"
               else [torch.from_numpy(p).permute(2, 0, 1) for p in pixels])
    check_map_source(lambda tf: fio.HDF5Dataset(h5, images, "labels", transform=tf), decoded, LABELS)


def test_chw_arrays_no_roi_and_grey_as_rgb_read_the_same_pixels(h5, pixels):
    chw = fio.HDF5Dataset(h5, "chw", "labels", layout="HWC", roi=False)
    assert torch.equal(chw.load_raw(4)[0], torch.from_numpy(pixels[4]))
    assert torch.equal(fio.HDF5Dataset(h5, "chw")[0], torch.from_numpy(pixels[0]).permute(2, 0, 1))
    grey_as_rgb = fio.HDF5Dataset(h5, "grey").load_raw(3).decode((5, 6, 7, 8), layout="HWC")
    assert torch.equal(grey_as_rgb, torch.from_numpy(pixels[3, 5:12, 6:14, 1:2]).expand(7, 8, 3))


def test_bad_datasets_raise_naming_the_file_dataset_and_index(h5):
    f = str(h5)
    cases = [
        (dict(images="nope"), KeyError, r"HDF5Dataset: .*data.h5 has no dataset 'nope' \(it has \['chw', "),
        (dict(images="floats"), ValueError, r"data.h5:/floats is float32 of shape \(2, 8, 8, 3\); expected uint8 pixels"),
        (dict(images="flat"), ValueError, r"data.h5:/flat is uint8 of shape \(2, 64\); expected uint8 pixels"),
        (dict(images="rgba"), ValueError, r"data.h5:/rgba of shape \(2, 8, 8, 4\) read as NCHW has 8 channels"),
        (dict(images="strings"), ValueError, r"variable-length strings end at the first NUL byte"),
        (dict(images="hwc", labels="short_labels"), ValueError, r"data.h5:/short_labels is int64 of shape \(3,\); "
                                                                r"expected integer labels of shape \(5,\)"),
        (dict(images="hwc", mode="YCbCr"), ValueError, r"mode 'YCbCr' for pixels with 3 channels"),
    ]
    for kwargs, error, match in cases:
        with pytest.raises(error, match=match):
            fio.HDF5Dataset(h5, **kwargs)
    with pytest.raises(ValueError, match=r"HDF5Dataset: cannot open '.*missing.h5' as an HDF5 file"):
        fio.HDF5Dataset(h5.parent / "missing.h5")
    ds = fio.HDF5Dataset(h5, "hwc")
    with pytest.raises(IndexError, match=rf"index 5 is out of range for 5 images in {f}"):
        ds.load_raw(5)
    with pytest.raises(ValueError, match=r"HDF5Image: .*data.h5:/hwc\[1\]: crop \(top=90, left=0, height=20, width=5\) "
                                         r"is not inside the 100x140 image"):
        ds.load_raw(1).decode((90, 0, 20, 5))


def test_without_h5py_installed_the_error_names_the_install(h5, monkeypatch):
    monkeypatch.setitem(sys.modules, "h5py", None)  # what `import h5py` meets where it is not installed
    with pytest.raises(RuntimeError, match=r"HDF5Dataset needs h5py: pip install h5py"):
        fio.HDF5Dataset(h5)
