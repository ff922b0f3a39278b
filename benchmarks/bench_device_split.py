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
  (decode_on="cpu": the consumer's thread decodes, so that row uses two cores and is NOT a GPU
  figure). benchmarks/gpu_feed.py times the split on a GPU (nvJPEG) into a real training step.

Run: python -m pytest benchmarks/bench_device_split.py --benchmark-only -p no:logging
"""

import itertools

import numpy as np
import pytest
import torch
from bench_sources import BATCH, BATCHES, CROP, _epoch, files, fused, random_windows  # noqa: F401 (files: a fixture)

import fastprep
from fastprep.loader import iteration
from fastprep.tools.file_sources import FileImages

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


def test_loader_fastprep_split_cpu_stand_in(benchmark, request):
    _epoch(benchmark, _loader(request, decode_on="cpu"), LOADER_GROUP,
           "decode_on='cpu': the CONSUMER'S thread decodes with libjpeg-turbo (2 cores busy; not a GPU figure)")
