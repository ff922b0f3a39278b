"""gpu_check.sh stage: fastprep.Loader with and without the GPU decode split, into the device.

For the seed pipeline (RandomCrop -> RandomDilatedMask -> RGBToYCbCr) and torchvision's ImageNet
training pipeline (RandomResizedCrop + RandomHorizontalFlip + ToDtype + Normalize), over the packed
photos, at each thread count: ``Loader(..., device="cuda", decode=True)`` decoding the JPEG windows
in its threads, and the same with ``decode_on="cuda"`` (the threads cut windows, nvJPEG decodes
them). The consumer only takes each batch (on the device, decoded): the rate is the Loader's. A
pipeline the split refuses is reported as that refusal. Run by gpu_check.sh; alone:
``GPU_CHECK_DIR=/tmp/x python benchmarks/gpu_loader.py``.
"""

from __future__ import annotations

from typing import Any

from gpu_common import PIPELINES, Stage, cores, device, no_device, photos, samples, sizes, thread_counts
from gpu_feed import rate

import fastprep


def loader(packed: Any, pipeline: str, threads: int, length: int, **split: Any) -> fastprep.Loader:
    """The Loader of `pipeline` over the packed photos, batches decoded on the check's device."""
    transform = PIPELINES[pipeline]()
    return fastprep.Loader(samples(packed, length, transform), sizes().batch, transform=transform, threads=threads,
                           seed=0, drop_last=True, device=device(), decode=True, **split)


def loader_rate(packed: Any, pipeline: str, threads: int, **split: Any) -> float:
    """Samples/s the Loader delivers to a consumer that only takes its batches."""
    s = sizes()
    batches = loader(packed, pipeline, threads, s.batch * (s.warmup + 300), **split)
    return rate(batches, lambda batch: None, device(), s.batch, s.warmup, s.min_steps, s.seconds)


def split_device() -> str:
    """decode_on: the device, or in a dry run the CPU decoder standing in for it."""
    return device().type


def main() -> None:
    s = sizes()
    split = split_device()
    stage = Stage("loader", what=f"fastprep.Loader into {device().type}, batch {s.batch}, packed {s.side}^2 photos, "
                                 f"{cores()} cores; decode_on={split!r} against decoding in the threads")
    missing = no_device()
    if missing:
        stage.skip_all(missing)
        return
    packed = photos()
    for pipeline in PIPELINES:
        for threads in thread_counts():
            base = stage.row(f"{pipeline} t={threads}, decode in the threads",
                             lambda p=pipeline, t=threads: {"samples_per_s": loader_rate(packed, p, t)},
                             pipeline=pipeline, threads=threads, decode_on=None)

            def with_split(p=pipeline, t=threads, base=base) -> dict:
                got = loader_rate(packed, p, t, decode_on=split)
                row = {"samples_per_s": got}
                if base.get("samples_per_s"):
                    row.update(ratio=got / base["samples_per_s"], ratio_of="decode in the threads")
                return row

            stage.row(f"{pipeline} t={threads}, decode_on={split!r}", with_split, pipeline=pipeline, threads=threads,
                      decode_on=split)


if __name__ == "__main__":
    main()
