"""Where the GPU decode split's device stage spends its time, per batch: the host side (cProfile of
one stage thread's work: the decoder call, the resize's checks, tables and launches) and the device
side (torch.profiler's kernels by self device time), for the ImageNet row (RandomResizedCrop + flip
+ ToDtype + Normalize) at one stream, by JPEG decoder; and the resize alone on one batch of decoded
windows, timed with the device synchronized, against the decode alone.

gpu_check.sh's `loader` stage gives the rates; this says which part to make faster. Alone, on the
GPU machine (the build installed): ``GPU_CHECK_DIR=/tmp/x python benchmarks/gpu_stage_profile.py``;
``GPU_CHECK_DRY_RUN=1`` runs it on the CPU stand-in at tiny sizes.
"""

from __future__ import annotations

import cProfile
import json
import os
import pstats
import time
from typing import Any

from gpu_common import device, no_device, photos, results_dir, sizes, sync
from gpu_loader import loader, split_device

import fastprep
from fastprep.batch._device_prefetcher import DevicePrefetcher

BATCHES = 12


def stage_profile(packed: Any, pipeline: str, jpeg_decoder: str) -> dict:
    """cProfile of the stage thread's per-batch work (streams=1: one thread) over BATCHES batches,
    and torch.profiler's device kernels meanwhile: the top entries, in ms per batch."""
    from torch.profiler import ProfilerActivity, profile  # noqa: PLC0415

    s = sizes()
    host = cProfile.Profile()
    work = DevicePrefetcher._copy_and_expand
    # A measurement harness, not the library: the stage thread's work is wrapped for this run only.
    DevicePrefetcher._copy_and_expand = lambda self, batch: host.runcall(work, self, batch)
    try:
        batches = loader(packed, pipeline, s.split_threads, s.batch * (s.warmup + BATCHES + 2), decode_on=split_device(),
                         streams=1, jpeg_decoder=jpeg_decoder)
        it = iter(batches)
        for _ in range(s.warmup):
            next(it)
        host.disable()
        host = cProfile.Profile()  # the warm-up's compiles and first allocations left out
        cuda = device().type == "cuda"
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        t0 = time.perf_counter()
        with profile(activities=activities) as prof:
            for _ in range(BATCHES):
                next(it)
            sync()
        wall = time.perf_counter() - t0
    finally:
        DevicePrefetcher._copy_and_expand = work
    stats = pstats.Stats(host)
    rows = sorted(((v[2], v[3], f"{os.path.basename(k[0])}:{k[1]} {k[2]}") for k, v in stats.stats.items()),
                  reverse=True)
    top_self = [(name, round(1e3 * tt / BATCHES, 2)) for tt, _, name in rows[:18]]
    top_cum = [(name, round(1e3 * ct / BATCHES, 2)) for _, ct, name in sorted(rows, key=lambda r: -r[1])[:18]]
    kernels = []
    for e in prof.key_averages():
        us = (getattr(e, "self_device_time_total", 0) or 0) if cuda else e.self_cpu_time_total
        kernels.append((us, e.key, e.count))
    kernels.sort(reverse=True)
    return {"pipeline": pipeline, "jpeg_decoder": jpeg_decoder, "batch": s.batch,
            "ms_per_batch_wall": round(1e3 * wall / BATCHES, 2),
            "samples_per_s": round(s.batch * BATCHES / wall),
            "host_self_ms_per_batch": top_self, "host_cumulative_ms_per_batch": top_cum,
            "device_self_ms_per_batch": [(k[:90], round(us / 1e3 / BATCHES, 3), n // BATCHES)
                                         for us, k, n in kernels[:25]],
            "stage": batches.device_stage.describe(), "decoders": batches.jpeg_decoders.describe()}


def resize_alone(packed: Any, jpeg_decoder: str) -> dict:
    """One batch's window cuts (the first the stage gets) decoded, then finished by the row's device
    half (the resize, flip, dtype and normalize: ops/_resize_windows.py), each timed with the device
    synchronized, best of 5."""
    from fastprep.batch._window_batch import WindowCuts  # noqa: PLC0415
    from fastprep.io.jpeg._gpu import decode_window_batch  # noqa: PLC0415

    s = sizes()
    dev = device()
    batches = loader(packed, "imagenet", s.split_threads, s.batch * 3, decode_on=split_device(), streams=1,
                     jpeg_decoder=jpeg_decoder)
    kept = []
    real = WindowCuts.decode
    WindowCuts.decode = lambda self, *a, **k: (kept.append(self), real(self, *a, **k))[1]
    try:
        next(iter(batches))
    finally:
        WindowCuts.decode = real
    cuts = kept[0]
    times: dict[str, list[float]] = {"decode": [], "finish": []}
    for _ in range(5):
        sync()
        t0 = time.perf_counter()
        windows = decode_window_batch(cuts.cuts, device=dev, jpeg_decoder=cuts.decoders)
        sync()
        t1 = time.perf_counter()
        extras = {k: v.to(dev) for k, v in cuts.extras.items()}
        cuts.group.finish_on_device(windows, cuts.geometry, cuts.out_size, extras)
        sync()
        times["decode"].append(t1 - t0)
        times["finish"].append(time.perf_counter() - t1)
    sizes_px = [int(w.shape[-1]) * int(w.shape[-2]) for w in windows]
    return {"jpeg_decoder": jpeg_decoder, "windows": len(windows), "window_px_mean": sum(sizes_px) // len(sizes_px),
            "window_px_max": max(sizes_px), "decode_ms": round(1e3 * min(times["decode"]), 2),
            "finish_ms": round(1e3 * min(times["finish"]), 2)}


def main() -> None:
    missing = no_device()
    if missing:
        print(f"gpu_stage_profile: skipped: {missing}")
        return
    packed = photos()
    decoders = ("torchvision", "nvimagecodec") if device().type == "cuda" else ("host",)
    found = {"stage": [], "resize": []}
    for choice in decoders:
        for what, fn in (("resize", lambda c=choice: resize_alone(packed, c)),
                         ("stage", lambda c=choice: stage_profile(packed, "imagenet", c))):
            try:
                row = fn()
            except Exception as e:  # noqa: BLE001 (one failing row is reported, the rest run)
                row = {"jpeg_decoder": choice, "error": f"{type(e).__name__}: {e}"}
            found[what].append(row)
            print(json.dumps(row, indent=1))
    path = os.path.join(os.environ.get("OUT") or results_dir(), "gpu_stage_profile.json")
    with open(path, "w") as f:
        json.dump({"fastprep": fastprep.__file__, **found}, f, indent=1)
    print(f"gpu_stage_profile: {path}")


if __name__ == "__main__":
    main()
