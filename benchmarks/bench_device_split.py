"""The GPU decode split (issue 25 item 5, ``Loader(decode_on=...)``): what the CPU is left with
when a device decodes, beside today's decode in the threads, one run.

- per 256^2 window at a random place of a 1024^2 q90 4:2:0 photo (restart-indexed jpeg shards),
  one core: the window's decode (what the threads do today), its cut alone (PackedJpeg.cut: byte
  copies), and the cut plus the packed mask bits (everything a split thread does per sample).
- through fastprep.Loader(threads=1), crop 256 + dilated mask + YCbCr, batch 256, into a consumer
  copying each batch (what crosses to the device: for the split, the masks and labels; the cut
  bytes go to nvJPEG): today's decode in the thread; the split's threads alone (the device stage
  takes each batch as it is: a device that decodes in no time, so this is the rate one core
  cuts for a GPU decoder); and the split with the CPU decoder standing in for the device
  (decode_on="cpu": the device stage's 1 or 2 threads decode, so those rows use 2-3 cores and are
  NOT GPU figures: they show the stage's scaling with its streams). benchmarks/gpu_feed.py times the split on a GPU (nvJPEG) into a real training step.
- the split's CPU side for both pipelines the issue aims at (issue 32: >= 20k samples/s per core),
  Loader(threads=1), batch 256, the device stage taking the batches as they are: the seed's crop
  256 + mask + YCbCr and ImageNet's RandomResizedCrop(224) + flip + ToDtype + Normalize, over
  1024^2 photo shards and ImageNet-size (480^2) photo shards, beside the same pipeline decoding in
  the thread.

Run: python -m pytest benchmarks/bench_device_split.py --benchmark-only -p no:logging
"""

import itertools

import numpy as np
import pytest
import torch
from bench_sources import BATCH, BATCHES, CROP, _epoch, files, fused, random_windows  # noqa: F401 (files: a fixture)

import fastprep
import fastprep.loader._iteration as iteration
from fastprep import transforms as T
from fastprep.tools.bench._file_sources import FileImages, FileSet

pytestmark = [pytest.mark.usefixtures("one_thread"),
              pytest.mark.skipif(not fastprep.io.available(), reason="fastprep._jpeg not built (no libjpeg-turbo)")]

WINDOW_GROUP = "split: per window 256^2 at a random place, 1024^2 q90 4:2:0 photo, restart-indexed shard, 1 core"
LOADER_GROUP = f"split: loader threads=1, crop {CROP} + mask + YCbCr, batch {BATCH}, 1024^2 photo JPEG shards"


def _photos(request):
    return request.getfixturevalue("files")  # bench_sources' photo files (module-scoped)


def _windows(request, benchmark, fn):
    draw = random_windows(_photos(request), "packed-jpeg")
    pairs = itertools.cycle([draw() for _ in range(256)])
    benchmark.group = WINDOW_GROUP
    benchmark(lambda: fn(*next(pairs)))


def _mask(seed: int) -> torch.Tensor:
    return torch.ops.fastprep.random_dilated_mask.default([CROP, CROP], 0.25, seed, "cross", 1, True)


def test_window_decode_in_a_thread(benchmark, request):
    _windows(request, benchmark, lambda item, crop: item.decode(crop, layout="HWC"))


def test_window_fastprep_split_cut(benchmark, request):
    _windows(request, benchmark, lambda item, crop: item.cut(crop))


def test_window_fastprep_split_cut_and_mask(benchmark, request):
    seeds = itertools.count()
    _windows(request, benchmark, lambda item, crop: (item.cut(crop), _mask(next(seeds))))


class _TakeAsIs:
    """A device stage that takes each host batch as it is (and releases it once the next is asked
    for, as DevicePrefetcher does): the threads' rate alone, as behind a device decoding in no time."""

    def __init__(self, host, *args, **kwargs):
        self.host = host

    def __iter__(self):
        previous = None
        for batch in self.host:
            if previous is not None:
                previous.release()
            previous = batch
            yield batch


def _loader(request, **kw):
    fs = _photos(request)
    ds = FileImages(fs, "packed-jpeg", len(fs.dataset("folder")), fused())
    sampler = np.random.default_rng(1).integers(0, len(ds), BATCHES * BATCH).tolist()
    return lambda: fastprep.Loader(ds, BATCH, transform=fused(), sampler=sampler, threads=1, seed=0, drop_last=True,
                                   **kw)


def test_loader_decode_in_the_thread(benchmark, request):
    _epoch(benchmark, _loader(request), LOADER_GROUP, "today: the thread decodes each window (decode_on=None)")


def test_loader_fastprep_split_threads_only(benchmark, request, monkeypatch):
    monkeypatch.setattr(iteration, "DevicePrefetcher", _TakeAsIs)
    ds_bytes = []

    def batches():
        for b in _loader(request, decode_on="cpu")():
            ds_bytes.append(b.nbytes / len(b.windows))
            yield b
    _epoch(benchmark, batches, LOADER_GROUP, "the thread cuts + masks; the device stage takes the batches as "
           "they are (a device decoding in no time): windows/s one core cuts for a GPU")
    benchmark.extra_info["note"] += f"; {np.mean(ds_bytes) / 1e3:.1f} kB/sample cross to the device (cut + mask + label)"


@pytest.mark.parametrize("streams", [1, 2])
def test_loader_fastprep_split_cpu_stand_in(benchmark, request, streams):
    _epoch(benchmark, _loader(request, decode_on="cpu", streams=streams), LOADER_GROUP,
           f"decode_on='cpu', streams={streams}: the device stage's {streams} thread(s) decode with libjpeg-turbo "
           f"(cores busy: the loader thread + {streams}; not a GPU figure)")


# -- the split's CPU side, both pipelines (issue 32) ---------------------------------------------

CPU_SIDE_GROUP = "split CPU side: loader threads=1, batch {batch}, {pipeline}, {size}^2 photo JPEG shards"
PIPELINES = {
    "seed": (lambda: fused(), f"crop {CROP} + mask + YCbCr"),
    "imagenet": (lambda: T.Compose([T.RandomResizedCrop(224, layout="HWC"), T.RandomHorizontalFlip(),
                                    T.ToDtype(torch.float32, scale=True),
                                    T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])]),
                 "RandomResizedCrop(224) + flip + ToDtype + Normalize"),
}


@pytest.fixture(scope="module", params=[1024, 480], ids=lambda s: f"{s}px")
def photo_set(request):
    pytest.importorskip("skimage.data", reason="the photos come from scikit-image")
    fs = FileSet(32, size=request.param)
    yield fs, request.param
    fs.close()


def _pipeline_loader(photo_set, pipeline: str, **kw):
    fs, _ = photo_set
    make, _ = PIPELINES[pipeline]
    ds = FileImages(fs, "packed-jpeg", len(fs.dataset("folder")), make())
    sampler = np.random.default_rng(1).integers(0, len(ds), BATCHES * BATCH).tolist()
    return lambda: fastprep.Loader(ds, BATCH, transform=make(), sampler=sampler, threads=1, seed=0, drop_last=True,
                                   **kw)


@pytest.mark.parametrize("pipeline", list(PIPELINES))
@pytest.mark.parametrize("split", [False, True], ids=["decode-in-thread", "split-threads-only"])
def test_split_cpu_side(benchmark, photo_set, monkeypatch, pipeline, split):
    if split:
        monkeypatch.setattr(iteration, "DevicePrefetcher", _TakeAsIs)
    loader = _pipeline_loader(photo_set, pipeline, **({"decode_on": "cpu"} if split else {}))
    group = CPU_SIDE_GROUP.format(batch=BATCH, pipeline=PIPELINES[pipeline][1], size=photo_set[1])
    note = ("draws + cuts + slot writes (decode_on='cpu', the device stage taking the batches as they are: "
            "samples/s one core feeds a GPU decoder)" if split else "today: the thread decodes each window")
    _epoch(benchmark, loader, group, note)


def _cuda_problem() -> str | None:
    if not torch.cuda.is_available():
        return "needs a CUDA device"
    try:
        import torchvision.io  # noqa: F401, PLC0415 (nvJPEG)
    except (ImportError, RuntimeError, OSError) as exc:
        return f"needs torchvision built for torch {torch.__version__} ({exc})"
    return None


@pytest.mark.skipif(_cuda_problem() is not None, reason=str(_cuda_problem()))
@pytest.mark.parametrize("pipeline", list(PIPELINES))
@pytest.mark.parametrize("decode_on", [None, "cuda"], ids=["decode-in-thread", "split-on-cuda"])
def test_split_on_cuda(benchmark, photo_set, pipeline, decode_on):
    """Delivered samples/s on the GPU (batches made on the device, the consumer synchronising each):
    one thread decoding, against one thread cutting for nvJPEG + the row's device half."""
    loader = _pipeline_loader(photo_set, pipeline, device="cuda", decode_on=decode_on)

    def synced():
        for b in loader():
            torch.cuda.synchronize()
            yield b
    group = CPU_SIDE_GROUP.format(batch=BATCH, pipeline=PIPELINES[pipeline][1], size=photo_set[1]) + ", on CUDA"
    _epoch(benchmark, synced, group, "decode_on='cuda': nvJPEG + the device half" if decode_on else
           "the thread decodes, the batch is copied to the GPU")
