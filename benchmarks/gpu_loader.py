"""gpu_check.sh stage: fastprep.Loader with and without the GPU decode split, into the device.

For the seed pipeline (RandomCrop -> RandomDilatedMask -> RGBToYCbCr) and torchvision's ImageNet
training pipeline (RandomResizedCrop + RandomHorizontalFlip + ToDtype + Normalize), over the packed
photos: ``Loader(..., device="cuda", expand=True)`` decoding the JPEG windows in its threads at
each thread count; then the split (``decode_on="cuda"``: the threads cut windows, the device stage
decodes them) at `split_threads` threads, for each JPEG decoder ("torchvision", "nvimagecodec")
and each count of device-stage streams (1, 2, 4, 8, 16), with the CPU cores the process kept busy
(its CPU time over the row's wall time) and the decoders that ran; last, for each pipeline, a
profile of the fastest split setting: where the device stage's time went (decode, resize, copies,
waits; torch.profiler's device time on CUDA, host time in a dry run) and the stage's own clock.
The consumer only takes each batch (on the device, expanded): the rate is the Loader's. A pipeline
the split refuses is reported as that refusal. Run by gpu_check.sh; alone:
``GPU_CHECK_DIR=/tmp/x python benchmarks/gpu_loader.py``.
"""

from __future__ import annotations

import time
from typing import Any

from gpu_common import PIPELINES, Stage, cores, device, no_device, photos, samples, sizes, thread_counts
from gpu_decode import DECODERS, decoder_missing
from gpu_feed import rate

import fastprep


def loader(packed: Any, pipeline: str, threads: int, length: int, **split: Any) -> fastprep.Loader:
    """The Loader of `pipeline` over the packed photos, batches expanded on the check's device."""
    transform = PIPELINES[pipeline]()
    return fastprep.Loader(samples(packed, length, transform), sizes().batch, transform=transform, threads=threads,
                           seed=0, drop_last=True, device=device(), expand=True, **split)


def loader_rate(packed: Any, pipeline: str, threads: int, **split: Any) -> dict:
    """Samples/s the Loader delivers to a consumer that only takes its batches, the CPU cores the
    process kept busy meanwhile, and (with the split) what its decoders and device stage did."""
    s = sizes()
    batches = loader(packed, pipeline, threads, s.batch * (s.warmup + 300), **split)
    cpu, wall = time.process_time(), time.perf_counter()
    got = rate(batches, lambda batch: None, device(), s.batch, s.warmup, s.min_steps, s.seconds)
    row = {"samples_per_s": got, "cores_busy": round((time.process_time() - cpu) / (time.perf_counter() - wall), 2)}
    if batches.decode_on is not None:
        row.update(decoders=batches.jpeg_decoders.describe(), stage=batches.device_stage.describe())
    return row


def split_device() -> str:
    """decode_on: the device, or in a dry run the CPU decoder standing in for it."""
    return device().type


# torch.profiler's op and kernel names, by what the device stage spends its time on.
CATEGORIES = {"decode": ("jpeg", "decode", "nvimgcodec", "huffman", "idct"),
              "resize": ("resize", "upsample", "interp", "gather", "index"),
              "copies": ("memcpy", "copy_", "to_copy", "pin"), "waits": ("synchronize", "wait", "event")}


def profile_split(packed: Any, pipeline: str, settings: dict) -> dict:
    """Where the device stage's time goes at `settings` (threads, streams, jpeg_decoder), over ~8
    batches: torch.profiler's self time per category (device time on CUDA, host time on the CPU)."""
    from torch.profiler import ProfilerActivity, profile  # noqa: PLC0415

    s = sizes()
    cuda = device().type == "cuda"
    batches = loader(packed, pipeline, settings["threads"], s.batch * (s.warmup + 8), decode_on=split_device(),
                     streams=settings["streams"], jpeg_decoder=settings["jpeg_decoder"])
    it = iter(batches)
    for _ in range(s.warmup):
        next(it)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        got = rate(it, lambda batch: None, device(), s.batch, 0, min(8, s.min_steps + 5))
    spent = {k: 0.0 for k in [*CATEGORIES, "other"]}
    for e in prof.key_averages():
        us = (getattr(e, "self_device_time_total", 0) or getattr(e, "self_cuda_time_total", 0)) if cuda \
            else e.self_cpu_time_total
        name = e.key.lower()
        spent[next((k for k, words in CATEGORIES.items() if any(w in name for w in words)), "other")] += us / 1e3
    total = sum(spent.values()) or 1.0
    return {"samples_per_s": got, **settings, "profile_ms": {k: round(v, 1) for k, v in spent.items()},
            "profile_share": {k: round(v / total, 3) for k, v in spent.items()},
            "stage": batches.device_stage.describe(), "decoders": batches.jpeg_decoders.describe()}


def main() -> None:
    s = sizes()
    split = split_device()
    stage = Stage("loader", what=f"fastprep.Loader into {device().type}, batch {s.batch}, packed {s.side}^2 photos, "
                                 f"{cores()} cores; decode_on={split!r} (threads {s.split_threads}, by decoder and "
                                 f"streams) against decoding in the threads")
    missing = no_device()
    if missing:
        stage.skip_all(missing)
        return
    packed = photos()
    threads = min(s.split_threads, cores())
    for pipeline in PIPELINES:
        base = {}
        for t in thread_counts():
            row = stage.row(f"{pipeline} t={t}, decode in the threads",
                            lambda p=pipeline, t=t: loader_rate(packed, p, t), pipeline=pipeline, threads=t,
                            decode_on=None)
            if row.get("samples_per_s", 0) > base.get("samples_per_s", 0):
                base = row
        best = None
        # A dry run's split: fastprep's decoder standing in for the device, and nvImageCodec's CPU backend.
        for choice in DECODERS if device().type == "cuda" else ("host", "nvimagecodec"):
            skip = decoder_missing(choice, device()) if choice != "host" else None
            for streams in s.streams:
                def with_split(p=pipeline, choice=choice, streams=streams, base=base) -> dict:
                    row = loader_rate(packed, p, threads, decode_on=split, streams=streams, jpeg_decoder=choice)
                    if base.get("samples_per_s"):
                        row.update(ratio=row["samples_per_s"] / base["samples_per_s"],
                                   ratio_of=f"decode in {base['threads']} threads")
                    return row

                row = stage.row(f"{pipeline} t={threads} streams={streams}, decode_on={split!r} "
                                f"jpeg_decoder={choice!r}", with_split, skip=skip, pipeline=pipeline, threads=threads,
                                decode_on=split, streams=streams, jpeg_decoder=choice)
                if row.get("samples_per_s", 0) > (best or {}).get("samples_per_s", 0):
                    best = row
        if best is not None:
            settings = {k: best[k] for k in ("threads", "streams", "jpeg_decoder")}
            stage.row(f"{pipeline} profile of the split at {settings}", lambda p=pipeline, st=settings:
                      profile_split(packed, p, st), pipeline=pipeline, feed="profile")


if __name__ == "__main__":
    main()
