"""The same photos read from the formats users already have: crop 256 + dilated mask + YCbCr
samples delivered per second on one core, and the bytes read per sample, beside the folder of
JPEG files (fastprep.io.ImageFolder(roi=True)) they would otherwise read.

Photos: 48 files of 1024x1024 mosaics of scikit-image's photos (bench_decode.mosaic, rolled so
no two are alike), Pillow quality 90, 4:2:0. Each source holds those same bytes: a folder, a
WebDataset tar, an LMDB, an HDF5 of JPEG bytes (vlen uint8); the HDF5 uint8 array holds their
decoded pixels, chunked (1, 64, 64, 3). JPEG sources decode only each crop's window (the rows
above it are still entropy-decoded); the array reads the chunks the window covers.

Two groups: every source through a DataLoader with num_workers=0 (one core, the same in-process
path for the iterable WebDataset), and every source through fastprep.Loader(threads=1).
The folder is the baseline of each group ("x best baseline" is then its time over the row's).
Item i is photo i in every source and gets the same seed, so every row crops the same windows
(WebDataset seeds a key of digits as its number: the index write_webdataset wrote).

The ``make_*_source(tmpdir, photos)`` helpers build each source from a list of JPEG bytes and
return a :class:`Source` (a dataset factory, the bytes read and stored per sample): other
benchmark files import them to put these rows beside theirs.

Run: python -m pytest benchmarks/bench_formats.py --benchmark-only -p no:logging
"""

import io
import os
import pickle
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import pytest
import torch
from bench_decode import mosaic
from torch.utils.data import DataLoader

import fastprep
import fastprep.io as fio
from fastprep import transforms as T

pytestmark = [pytest.mark.skipif(not fio.available(), reason="fastprep._jpeg not built (no libjpeg-turbo)"),
              pytest.mark.usefixtures("one_thread")]  # one core: torch's own threads too

FILES, BATCH, SIZE, CROP, CHUNK = 48, 16, 1024, 256, 64


class Source(NamedTuple):
    make: Callable[[Any], Any]  # transform (or None) -> the dataset
    read: float  # bytes read per sample: the whole record, or the chunks a window covers
    stored: float  # bytes stored per sample


def photos_1024(n: int = FILES) -> list[bytes]:
    """n different 1024^2 q90 4:2:0 JPEGs of scikit-image's photos."""
    from PIL import Image

    image = mosaic(SIZE)
    out = []
    for k in range(n):
        buf = io.BytesIO()
        Image.fromarray(image.take(range(k * 37, k * 37 + SIZE), axis=1, mode="wrap")).save(buf, format="JPEG",
                                                                                           quality=90)
        out.append(buf.getvalue())
    return out


def label(k: int, n: int) -> int:
    """4 classes in runs, so that ImageFolder's sorted order is the photos' order in every source
    (item i is photo i everywhere, and its seed, hence its crop window, is the same)."""
    return k * 4 // n


def make_folder_source(tmpdir, photos):
    for k, data in enumerate(photos):
        cls = os.path.join(tmpdir, f"c{label(k, len(photos))}")
        os.makedirs(cls, exist_ok=True)
        with open(os.path.join(cls, f"{k:03d}.jpg"), "wb") as f:
            f.write(data)
    size = float(np.mean([len(p) for p in photos]))
    return Source(lambda tf: fio.ImageFolder(tmpdir, transform=tf, roi=True), size, size)


def make_webdataset_source(tmpdir, photos):
    paths = fio.write_webdataset([(fio.JpegFile(p), label(k, len(photos))) for k, p in enumerate(photos)],
                                 os.path.join(tmpdir, "photos-%03d.tar"), maxcount=len(photos))
    size = os.path.getsize(paths[0]) / len(photos)
    return Source(lambda tf: fio.WebDataset(paths, transform=tf, seed=0), size, size)


def make_lmdb_source(tmpdir, photos):
    import lmdb

    path = os.path.join(tmpdir, "photos.lmdb")
    env = lmdb.open(path, map_size=4 * sum(len(p) for p in photos) + (1 << 20))
    with env.begin(write=True) as txn:
        for k, data in enumerate(photos):
            txn.put(f"{k:08d}".encode(), pickle.dumps((data, label(k, len(photos)))))
    env.close()
    page = 4096  # a value over a page sits in whole overflow pages, which the memory map reads
    per_sample = np.mean([-(-len(pickle.dumps((p, 0))) // page) * page for p in photos])
    stored = os.path.getsize(os.path.join(path, "data.mdb")) / len(photos)
    return Source(lambda tf: fio.LMDBDataset(path, transform=tf), float(per_sample), stored)


def make_hdf5_jpeg_source(tmpdir, photos):
    import h5py

    path = os.path.join(tmpdir, "photos_jpeg.h5")
    with h5py.File(path, "w") as f:
        images = f.create_dataset("images", (len(photos),), dtype=h5py.vlen_dtype(np.uint8))
        for k, data in enumerate(photos):
            images[k] = np.frombuffer(data, np.uint8)
        f.create_dataset("labels", data=[label(k, len(photos)) for k in range(len(photos))])
    stored = os.path.getsize(path) / len(photos)
    return Source(lambda tf: fio.HDF5Dataset(path, "images", "labels", transform=tf),
                  float(np.mean([len(p) for p in photos])), stored)


def covered_chunk_bytes(size: int, crop: int, chunk: int, channels: int = 3) -> float:
    """The bytes of the chunks a crop x crop window at a uniform random place covers, on average."""
    per_axis = np.mean([(p + crop - 1) // chunk - p // chunk + 1 for p in range(size - crop + 1)])
    return float(per_axis ** 2 * chunk * chunk * channels)


def make_hdf5_array_source(tmpdir, photos, chunk: int = CHUNK):
    import h5py

    path = os.path.join(tmpdir, f"photos_u8_{chunk}.h5")
    with h5py.File(path, "w") as f:
        images = f.create_dataset("images", (len(photos), SIZE, SIZE, 3), np.uint8, chunks=(1, chunk, chunk, 3))
        for k, data in enumerate(photos):
            images[k] = fio.decode_jpeg(data, layout="HWC").numpy()
        f.create_dataset("labels", data=[label(k, len(photos)) for k in range(len(photos))])
    stored = os.path.getsize(path) / len(photos)
    return Source(lambda tf: fio.HDF5Dataset(path, "images", "labels", transform=tf),
                  covered_chunk_bytes(SIZE, CROP, chunk), stored)


SOURCES = {"folder": make_folder_source, "webdataset": make_webdataset_source, "lmdb": make_lmdb_source,
           "hdf5_jpeg": make_hdf5_jpeg_source, "hdf5_uint8_chunked": make_hdf5_array_source}


def train_tf() -> T.Compose:
    return T.seed_workload(CROP)


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    pytest.importorskip("lmdb")
    pytest.importorskip("h5py")
    photos = photos_1024()
    return {name: make(str(tmp_path_factory.mktemp(name)), photos) for name, make in SOURCES.items()}


def _run(benchmark, epoch, source: Source) -> None:
    assert benchmark.pedantic(epoch, rounds=5, warmup_rounds=1) == FILES
    rate = FILES / benchmark.stats.stats.median
    benchmark.extra_info["note"] = (f"{rate:6.0f} samples/s, {source.read / 1024:5.0f} KiB read, "
                                    f"{source.stored / 1024:5.0f} KiB stored a sample")


def _dataloader_row(name: str):
    def test(benchmark, sources):
        benchmark.group = f"sources: {FILES} 1024^2 q90 photos, crop {CROP} + mask + YCbCr, DataLoader num_workers=0"
        ds = sources[name].make(train_tf())
        dataset = ds if isinstance(ds, torch.utils.data.IterableDataset) else T.SeedByIndex(ds, seed=0)
        loader = DataLoader(dataset, batch_size=BATCH, collate_fn=fastprep.compact_collate)
        _run(benchmark, lambda: sum(len(b.data[1]) for b in loader), sources[name])

    return test


def _loader_row(name: str):
    def test(benchmark, sources):
        benchmark.group = f"sources: {FILES} 1024^2 q90 photos, crop {CROP} + mask + YCbCr, fastprep.Loader threads=1"
        loader = fastprep.Loader(sources[name].make(None), BATCH, transform=train_tf(), seed=0, threads=1)

        def epoch():
            n = 0
            for batch in loader:
                n += len(batch.data[1])
                batch.release()
            return n

        _run(benchmark, epoch, sources[name])

    return test


# One function a row (the summary names rows by function); the folder is each group's baseline.
test_dataloader_folder = _dataloader_row("folder")
test_dataloader_fastprep_webdataset = _dataloader_row("webdataset")
test_dataloader_fastprep_lmdb = _dataloader_row("lmdb")
test_dataloader_fastprep_hdf5_jpeg = _dataloader_row("hdf5_jpeg")
test_dataloader_fastprep_hdf5_uint8_chunked = _dataloader_row("hdf5_uint8_chunked")
test_loader_folder = _loader_row("folder")
test_loader_fastprep_webdataset = _loader_row("webdataset")
test_loader_fastprep_lmdb = _loader_row("lmdb")
test_loader_fastprep_hdf5_jpeg = _loader_row("hdf5_jpeg")
test_loader_fastprep_hdf5_uint8_chunked = _loader_row("hdf5_uint8_chunked")
