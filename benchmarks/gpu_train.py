"""gpu_check.sh stage: ResNet-18 and ResNet-50 training steps fed three ways, as a share of the
device-cached rate.

torchvision's models (channels_last, bf16 autocast, SGD with momentum; gpu_feed.make_step), batch
256, for each pipeline (the seed's crop + mask + YCbCr, 256^2; the ImageNet training pipeline,
224^2) over the packed photos:

- device-cached: one batch of that pipeline kept on the device, the step's ceiling;
- the Loader decoding in its threads (``device="cuda", expand=True``);
- the Loader with the GPU decode split (``decode_on="cuda"``: its threads cut, the device stage decodes);

each Loader at the settings the loader stage (gpu_loader.py) found fastest for it (threads; for the
split also the device stage's streams and JPEG decoder), with the CPU cores the process kept busy.

A dry run (GPU_CHECK_DRY_RUN=1) trains fastprep.tools.diagnose._demo_model.TinyNet on the CPU instead, the
split's device the CPU decoder. Run by gpu_check.sh; alone: ``GPU_CHECK_DIR=/tmp/x python
benchmarks/gpu_train.py``.
"""

from __future__ import annotations

import functools
import json
import os
import time
from collections.abc import Callable
from typing import Any

import torch
from gpu_common import DRY_RUN, PIPELINES, Stage, device, no_device, photos, results_dir, sizes, thread_counts
from gpu_feed import MODELS, build_model, forever, make_step, rate
from gpu_loader import loader, split_device


def models() -> list[str]:
    return ["tiny"] if DRY_RUN else ["resnet18", "resnet50"]


def cached_batch(packed: Any, pipeline: str) -> tuple[torch.Tensor, ...]:
    """One batch of `pipeline` from the Loader, kept on the device."""
    it = iter(loader(packed, pipeline, max(thread_counts()), sizes().batch * 2))
    try:
        return tuple(x.clone() for x in next(it))
    finally:
        it.close()


def best_settings(pipeline: str, split: str | None) -> dict[str, Any]:
    """The Loader settings (threads; with the split, streams and jpeg_decoder too) at which the
    loader stage measured this Loader fastest (the most threads, the split's defaults, when it
    measured none)."""
    try:
        with open(os.path.join(results_dir(), "loader.json")) as f:
            rows = json.load(f)["rows"]
    except (OSError, ValueError, KeyError):
        rows = []
    rows = [r for r in rows if r.get("status") == "ok" and r.get("pipeline") == pipeline
            and r.get("decode_on") == split and r.get("feed") != "profile"]
    keys = ("threads", "streams", "jpeg_decoder") if split else ("threads",)
    if not rows:
        return {"threads": max(thread_counts())}
    best = max(rows, key=lambda r: r["samples_per_s"])
    return {k: best[k] for k in keys}


def main() -> None:
    s = sizes()
    split = split_device()
    stage = Stage("train", what=f"training steps ({', '.join(MODELS[m] for m in models())}; channels_last, bf16 "
                                f"autocast, SGD) on {device().type}, batch {s.batch}; the Loader at the thread count "
                                f"the loader stage found fastest, decoding in its threads or with decode_on={split!r}")
    missing = no_device()
    if missing:
        stage.skip_all(missing)
        return
    torch.backends.cudnn.benchmark = True
    packed = photos()
    dev = device()

    @functools.cache
    def step_of(name: str) -> Callable[[Any], None]:
        torch.manual_seed(0)
        # bf16 autocast on the GPU; a dry run's CPU steps stay float32 (CPU bf16 convolutions are slow)
        return make_step(build_model(name).to(dev, memory_format=torch.channels_last), dev, amp=dev.type == "cuda")

    for name in models():
        for pipeline in PIPELINES:
            title = f"{MODELS[name].split(' ')[0]} {pipeline}"

            def ceiling(name=name, pipeline=pipeline) -> dict:
                cached = cached_batch(packed, pipeline)
                return {"samples_per_s": rate(forever(lambda: cached), step_of(name), dev, s.batch, s.warmup,
                                              s.min_steps, s.seconds)}

            top = stage.row(f"{title}: device-cached", ceiling, model=name, pipeline=pipeline, feed="device-cached")
            for feed, kw in (("threads", {}), ("split", {"decode_on": split})):
                settings = best_settings(pipeline, kw.get("decode_on"))
                shown = " ".join(f"{k}={v!r}" if isinstance(v, str) else f"{k}={v}" for k, v in settings.items())
                label = f"Loader {shown}, " + (f"decode_on={split!r}" if kw else "decode in the threads")

                def fed(name=name, pipeline=pipeline, kw=kw, top=top, settings=settings) -> dict:
                    batches = loader(packed, pipeline, settings["threads"], s.batch * (s.warmup + 300), **kw,
                                     **{k: v for k, v in settings.items() if k != "threads"})
                    cpu, wall = time.process_time(), time.perf_counter()
                    got = rate(batches, step_of(name), dev, s.batch, s.warmup, s.min_steps, s.seconds)
                    row = {"samples_per_s": got,
                           "cores_busy": round((time.process_time() - cpu) / (time.perf_counter() - wall), 2)}
                    if top.get("samples_per_s"):
                        row.update(ratio=got / top["samples_per_s"], ratio_of="device-cached")
                    return row

                stage.row(f"{title}: {label}", fed, model=name, pipeline=pipeline, feed=feed, **settings)


if __name__ == "__main__":
    main()
