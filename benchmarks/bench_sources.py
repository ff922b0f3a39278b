"""Real image files at the kernel's speed (issue 25): restart-indexed JPEG shards and raw shards
against today's file reading, per window and delivered through the Loader, side by side.

Files: FILES 1024x1024 quality-90 4:2:0 JPEGs of scikit-image's photos (the photo mosaic,
rolled per file: fastprep.tools.photos), and the mixed folder (the photos at 500-1600 px, every
third progressive, grey ones, a PNG: photos.write_mixed_folder). Packed once by fastprep.io.pack.

- per 256x256 window at a random place, one core: the full decode, today's ROI decode (the rows
  above the window are entropy-decoded too), the restart-window cut + decode (PackedJpeg.decode),
  the cut alone (what a GPU decode split leaves the CPU), libjpeg-turbo's decode of the cut's
  bytes alone (the floor under the cut + decode), and DALI's CPU ROI decoder where it installs.
- delivered samples/s of crop 256 + dilated mask + YCbCr (the fused Compose), batch 256, through
  fastprep.Loader(threads=1) into a consumer that copies each batch (tools.feeds.Consumer), over
  ImageFolder(roi=False), ImageFolder(roi=True), PackedDataset jpeg and raw (raw also with
  verify=False: no CRC pass over each window), the decoded arrays in memory, and the peers that install here: litdata's StreamingDataset of the JPEG bytes (windows
  decoded by fastprep's ROI decoder, as ImageFolder(roi=True)), DALI's CPU pipeline (decode + crop
  only: no mask, no YCbCr). Each row notes the bytes it reads per sample and the pack's size.

Peers (not in any extra: their dependency pins would replace this torch): pip install --no-deps
litdata lightning-utilities boto3 botocore s3transfer jmespath python-dateutil six obstore;
pip install --no-deps nvidia-dali-cuda120 nvidia-nvimgcodec-cu12 optree.

Run: python -m pytest benchmarks/bench_sources.py --benchmark-only -p no:logging
"""

import itertools
import os
import shutil
import tempfile

import numpy as np
import pytest
import torch

import fastprep
import fastprep.io as fio
import fastprep.tools.bench._feeds as feeds
from fastprep import transforms as T
from fastprep.tools.bench._file_sources import FileImages, FileSet, bytes_read

pytestmark = [pytest.mark.usefixtures("one_thread"),
              pytest.mark.skipif(not fio.available(), reason="fastprep._jpeg not built (no libjpeg-turbo)")]

FILES, CROP, BATCH, EPOCH = 32, 256, 256, 512
WINDOW_GROUP = "window 256^2 at a random place, 1024^2 q90 4:2:0 photo mosaic, 1 core"


@pytest.fixture(scope="module")
def files():
    pytest.importorskip("skimage.data", reason="the photos come from scikit-image")
    fs = FileSet(FILES)
    yield fs
    fs.close()


@pytest.fixture(scope="module")
def mixed():
    pytest.importorskip("skimage.data", reason="the photos come from scikit-image")
    fs = FileSet(mixed=True)
    yield fs
    fs.close()


def random_windows(fs: FileSet, kind: str):
    """(item, crop) for a random file and a random 256^2 window, a fresh one each call."""
    ds = fs.dataset(kind)
    rng = np.random.default_rng(0)

    def draw():
        item = ds.load_raw(int(rng.integers(len(ds))))[0]
        return item, (int(rng.integers(item.height - CROP + 1)), int(rng.integers(item.width - CROP + 1)), CROP, CROP)
    return draw


def _window_bench(benchmark, fn, also=()):
    benchmark.group = WINDOW_GROUP
    benchmark.extra_info["also_vs"] = list(also)
    benchmark(fn)


def test_window_full_decode(benchmark, files):
    draw = random_windows(files, "roi")
    _window_bench(benchmark, lambda: draw()[0].decode(layout="HWC"))


def test_window_roi_decode(benchmark, files):
    draw = random_windows(files, "roi")
    _window_bench(benchmark, lambda: (lambda it, c: it.decode(c, layout="HWC"))(*draw()))


def test_window_fastprep_restart_cut_decode(benchmark, files):
    draw = random_windows(files, "packed-jpeg")
    _window_bench(benchmark, lambda: (lambda it, c: it.decode(c, layout="HWC"))(*draw()), ["test_window_full_decode"])


def test_window_fastprep_cut_only(benchmark, files):
    draw = random_windows(files, "packed-jpeg")
    _window_bench(benchmark, lambda: (lambda it, c: it.cut(c))(*draw()))


def test_window_fastprep_floor_libjpeg_on_the_cut(benchmark, files):
    """libjpeg-turbo decoding the cut's bytes (already cut): what cut + decode cannot go under."""
    draw = random_windows(files, "packed-jpeg")
    cuts = itertools.cycle([(lambda it, c: it.cut(c))(*draw()) for _ in range(200)])
    _window_bench(benchmark, lambda: (lambda c: fio.decode_jpeg(c.data, crop=c[1:], layout="HWC"))(next(cuts)))


def _dali():
    try:
        import nvidia.dali as dali  # noqa: PLC0415
        import nvidia.dali.fn as fn  # noqa: PLC0415
    except ImportError as exc:
        pytest.skip(f"NVIDIA DALI is not installed: {exc}")
    return dali, fn


def _dali_pipeline(fs: FileSet, batch: int):
    """DALI's CPU ROI decode of a 256^2 window at a random place of random files (nvImageCodec's
    libjpeg-turbo backend), batch `batch`, one thread."""
    dali, fn = _dali()
    datas = [np.fromfile(p, np.uint8) for p, _ in fs.dataset("roi").samples]
    rng = np.random.default_rng(0)

    @dali.pipeline_def(batch_size=batch, num_threads=1, device_id=None, seed=0)
    def pipe():
        enc = fn.external_source(source=lambda: [datas[int(rng.integers(len(datas)))] for _ in range(batch)],
                                 batch=True)
        return fn.decoders.image_crop(enc, device="cpu", crop=(CROP, CROP), crop_pos_x=fn.random.uniform(range=(0, 1)),
                                      crop_pos_y=fn.random.uniform(range=(0, 1)))
    p = pipe()
    p.build()
    return p


def test_window_dali_cpu_roi_decode(benchmark, files):
    p = _dali_pipeline(files, 1)
    _window_bench(benchmark, p.run)


# -- delivered through the Loader -------------------------------------------------------------


def fused():
    return T.seed_workload(CROP, layout="HWC")


ROUNDS, WARM = 3, 3  # timed rounds of EPOCH samples (+ 1 untimed), after WARM batches (start-up, first touch)
BATCHES = WARM + (ROUNDS + 1) * EPOCH // BATCH


def _epoch(benchmark, batches_of, group: str, note: str = "", also=()):
    """Steady state: time rounds of EPOCH samples (whole batches of BATCH) from one running loader,
    delivered into a consumer that copies each batch, after WARM batches (threads starting, batch
    slots first touched)."""
    benchmark.group = group
    benchmark.extra_info.update(samples=EPOCH, also_vs=list(also))
    if note:
        benchmark.extra_info["note"] = note
    consume = feeds.Consumer()
    it = iter(batches_of())
    for _ in range(WARM):
        consume(next(it))

    def epoch():
        n = 0
        while n < EPOCH:
            n += consume(next(it))
        return n

    try:
        assert benchmark.pedantic(epoch, rounds=ROUNDS, warmup_rounds=1) == EPOCH
    finally:
        close = getattr(it, "close", None)
        if callable(close):
            close()


def _loader(fs: FileSet, kind: str):
    ds = FileImages(fs, kind, len(fs.dataset("folder")), fused())
    sampler = np.random.default_rng(1).integers(0, len(ds), BATCHES * BATCH).tolist()
    return lambda: fastprep.Loader(ds, BATCH, transform=fused(), sampler=sampler, threads=1, seed=0, drop_last=True)


def _bytes_note(fs: FileSet, kind: str) -> str:
    if kind == "arrays":
        return "reads 0 B/sample (decoded in memory)"
    if kind in ("folder", "roi"):  # the whole file is read
        return f"reads {fs.bytes_on_disk('folder') / len(fs.dataset('folder')) / 1e3:,.1f} kB/sample"
    draw = random_windows(fs, kind)
    per = np.mean([bytes_read(*draw()) for _ in range(200)])
    return f"reads {per / 1e3:,.1f} kB/sample; pack = {fs.bytes_on_disk(kind) / fs.bytes_on_disk('folder'):.3f}x the files"


PHOTOS_GROUP = f"loader, crop {CROP} + mask + YCbCr, batch {BATCH}, 1 thread, 1024^2 photo JPEGs"
MIXED_GROUP = f"loader, crop {CROP} + mask + YCbCr, batch {BATCH}, 1 thread, mixed folder (500-1600 px, progressive, " \
    "grey, PNG)"


def _row(fixture: str, group: str, kind: str, also=()):
    """One benchmark function per row (the summary keys entries by function name)."""
    def test(benchmark, request):
        fs = request.getfixturevalue(fixture)
        _epoch(benchmark, _loader(fs, kind), group, _bytes_note(fs, kind), also)
    return test


test_loader_imagefolder_whole_decode = _row("files", PHOTOS_GROUP, "folder")
test_loader_imagefolder_roi = _row("files", PHOTOS_GROUP, "roi")
test_loader_fastprep_packed_jpeg = _row("files", PHOTOS_GROUP, "packed-jpeg", ["test_loader_imagefolder_whole_decode"])
test_loader_fastprep_packed_raw = _row("files", PHOTOS_GROUP, "packed-raw", ["test_loader_fastprep_arrays_in_memory"])
test_loader_fastprep_packed_raw_unverified = _row("files", PHOTOS_GROUP, "packed-raw-unverified",
                                                  ["test_loader_fastprep_arrays_in_memory"])
test_loader_fastprep_arrays_in_memory = _row("files", PHOTOS_GROUP, "arrays")
test_loader_mixed_imagefolder_whole_decode = _row("mixed", MIXED_GROUP, "folder")
test_loader_mixed_imagefolder_roi = _row("mixed", MIXED_GROUP, "roi")
test_loader_mixed_fastprep_packed_jpeg = _row("mixed", MIXED_GROUP, "packed-jpeg",
                                              ["test_loader_mixed_imagefolder_whole_decode"])
test_loader_mixed_fastprep_packed_raw = _row("mixed", MIXED_GROUP, "packed-raw")


def litdata_item(path: str) -> dict:
    """litdata.optimize's function (module level: its worker processes import it)."""
    with open(path, "rb") as f:
        return {"image": f.read(), "label": 0}


class _LitImages(torch.utils.data.Dataset):
    """litdata's StreamingDataset of JPEG bytes, each decoded by window (fastprep.io.JpegFile)."""

    def __init__(self, stream):
        self.stream = stream

    def __len__(self):
        return len(self.stream)

    def load_raw(self, i):
        return fio.JpegFile(self.stream[i]["image"], layout="HWC"), 0


def test_loader_litdata_roi(benchmark, files):
    ld = pytest.importorskip("litdata", reason="litdata is not installed (see the module doc)")
    out = tempfile.mkdtemp(prefix="fastprep-litdata-")
    try:
        ld.optimize(fn=litdata_item, inputs=[p for p, _ in files.dataset("roi").samples], output_dir=out,
                    chunk_bytes="64MB", num_workers=1)
        ds = _LitImages(ld.StreamingDataset(out))
        sampler = np.random.default_rng(1).integers(0, len(ds), BATCHES * BATCH).tolist()
        size = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out)) / files.bytes_on_disk("folder")
        note = f"reads {files.bytes_on_disk('folder') / FILES / 1e3:,.1f} kB/sample; chunks = {size:.3f}x the files"
        _epoch(benchmark, lambda: fastprep.Loader(ds, BATCH, transform=fused(), sampler=sampler, threads=1, seed=0,
                                                   drop_last=True), PHOTOS_GROUP, note)
    finally:
        shutil.rmtree(out, ignore_errors=True)


def test_loader_dali_cpu_decode_crop_only(benchmark, files):
    p = _dali_pipeline(files, BATCH)

    def batches():
        while True:
            (out,) = p.run()
            yield torch.from_numpy(np.array(out.as_tensor()))
    _epoch(benchmark, batches, PHOTOS_GROUP, f"DALI does the ROI decode + crop only (no mask, no YCbCr); reads "
           f"{files.bytes_on_disk('folder') / FILES / 1e3:,.1f} kB/sample")
