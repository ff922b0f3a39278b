"""`python -m fastprep bench`: the target workload, the usual way and the fastprep way.

Measures (1) per-sample transform time on one thread and (2) samples/s delivered by a DataLoader
for num_workers 0..cores with the best prefetch_factor, and reports bytes shipped per sample and
the share of a stated GPU consumption rate that one core can feed.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, default_collate

from fastprep.tools import pipelines


@dataclass
class Variant:
    name: str
    transform: Callable[[Any], torch.Tensor]
    collate: Callable[[list], Any]
    as_pil: bool
    bytes_per_sample: int = 0
    us_per_sample: float = 0.0
    loader: dict[str, float] = field(default_factory=dict)  # "w=N" -> samples/s (best prefetch)


def _variants(backends: list[str]) -> list[Variant]:
    import fastprep  # noqa: PLC0415

    out = [Variant("usual (PIL, scipy, float32)", pipelines.usual_transform, default_collate, True)]
    for backend in backends:
        fused = pipelines.fastprep_transform if backend == "native" else pipelines.fastprep_numba_transform
        out.append(Variant(f"fastprep fused ({backend})", fused, fastprep.compact_collate, False))
    out.append(Variant("fastprep unfused chain", pipelines.fastprep_unfused_transform,
                       fastprep.compact_collate, False))
    return out


def _say(msg: str) -> None:
    print(f"  .. {msg}", file=sys.stderr, flush=True)


def time_per_sample(transform: Callable, sources: list, repeat: int) -> float:
    """Median microseconds per sample over `repeat` passes through the sources, one thread."""
    transform(sources[0])
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for s in sources:
            transform(s)
        times.append((time.perf_counter() - t0) / len(sources))
    return float(np.median(times)) * 1e6


def loader_rate(dataset, batch_size: int, collate: Callable, workers: int,
                prefetch: int | None, batches: int) -> float:
    """Samples/s out of a DataLoader in steady state (host side: on a GPU the decode would run
    there). The first `workers` batches are skipped: the workers made them in parallel while the
    first one was awaited, so counting them would overstate the rate."""
    loader = DataLoader(dataset, batch_size=batch_size, num_workers=workers, collate_fn=collate,
                        prefetch_factor=prefetch, persistent_workers=False, drop_last=True)
    it = iter(loader)
    for _ in range(max(workers, 1)):
        next(it)
    t0 = time.perf_counter()
    for _ in range(batches):
        next(it)
    rate = batches * batch_size / (time.perf_counter() - t0)
    del it
    return rate


def ray_rate(batch_size: int, batches: int, num_cpus: int, pool: int, address: str | None = None) -> float:
    """Samples/s of the fused fastprep pipeline run by Ray Data tasks and streamed back as
    CompactBatches, in steady state (the first batch, which pays for starting the workers, is
    not counted). Starts a local Ray instance with `num_cpus` unless `address` names one."""
    import ray  # noqa: PLC0415

    import fastprep  # noqa: PLC0415
    from fastprep import ray as fray  # noqa: PLC0415
    from fastprep.tools.ray_synthetic import SyntheticSource, synthetic_images  # noqa: PLC0415

    started = not ray.is_initialized()
    if started:
        ray.init(address=address, num_cpus=None if address else num_cpus, include_dashboard=False,
                 log_to_driver=False,
                 runtime_env={"env_vars": {"FASTPREP_BACKEND": fastprep.backend()}})
    try:
        ray.data.DataContext.get_current().enable_progress_bars = False

        def dataset(rows: int):
            # Sources are made in the task from a per-worker pool, as SyntheticImages does in-process.
            return synthetic_images(rows, decoded=False).map_batches(
                fray.CompactMap(pipelines.fastprep_transform, seed=0, num_classes=pipelines.NUM_CLASSES,
                                load=SyntheticSource(pool)),
                batch_format="numpy", batch_size=64)

        # A first pass starts Ray's worker processes (import torch and fastprep, make the pool);
        # a DataLoader's workers pay the same once, and loader_rate skips it too.
        for _ in dataset(64 * num_cpus * 2).iter_batches(batch_size=64):
            pass
        it = fray.iter_compact_batches(dataset(batch_size * (batches + 1)), batch_size=batch_size,
                                       drop_last=True, prefetch_batches=2)
        next(it)
        t0 = time.perf_counter()
        rows = sum(len(batch.data["id"]) for batch in it)
        return rows / (time.perf_counter() - t0)
    finally:
        if started:
            ray.shutdown()


def run(quick: bool = False, generate_per_item: bool = False, gpu_rate: float = 5000.0,
        batch_size: int = 256, workers: list[int] | None = None, with_ray: bool = False,
        ray_address: str | None = None) -> dict:
    import fastprep  # noqa: PLC0415

    cores = os.cpu_count() or 1
    workers = list(range(0, cores + 1)) if workers is None else workers
    prefetches = [2] if quick else [2, 4]
    backends = ["native", "numba"] if fastprep.backend() == "native" else ["numba"]
    variants = _variants(backends)
    torch.set_num_threads(1)
    sources = [pipelines.make_source(i) for i in range(4 if quick else 8)]
    from PIL import Image  # noqa: PLC0415

    pil_sources = [Image.fromarray(s) for s in sources]
    for v in variants:
        _say(f"per-sample time: {v.name}")
        fast = "usual" not in v.name
        v.us_per_sample = time_per_sample(v.transform, pil_sources if v.as_pil else sources,
                                          repeat=(20 if fast else 2) if quick else (50 if fast else 5))
        sample = v.collate([(v.transform(sources[0]), 7)])
        v.bytes_per_sample = sample.nbytes if hasattr(sample, "nbytes") else \
            sum(t.numel() * t.element_size() for t in sample)
    for v in variants:
        for w in workers:
            batches = 2 * w + (2 if quick else 4)
            dataset = pipelines.SyntheticImages(batch_size * (batches + w + 1), v.transform,
                                                pool=len(sources), as_pil=v.as_pil,
                                                generate_per_item=generate_per_item)
            best = 0.0
            for pf in (prefetches if w > 0 else [None]):
                _say(f"DataLoader: {v.name}, num_workers={w}, prefetch_factor={pf}")
                best = max(best, loader_rate(dataset, batch_size, v.collate, w, pf, batches))
            v.loader[f"w={w}"] = best
    base = variants[0].us_per_sample
    ray_result = None
    if with_ray:
        _say("Ray Data: fastprep fused, local instance" if ray_address is None else f"Ray Data at {ray_address}")
        fused = variants[1]
        ray_result = {"num_cpus": cores, "address": ray_address,
                      "samples_per_s": ray_rate(batch_size, 8 if quick else 16, cores, len(sources),
                                                ray_address),
                      "variant": fused.name, "in_process_samples_per_s": fused.loader}
    return {"ray": ray_result,"workload": {"source": f"{pipelines.SOURCE_SIZE}x{pipelines.SOURCE_SIZE}x3 uint8",
                         "crop": pipelines.CROP, "p": pipelines.P, "structure": "cross",
                         "batch_size": batch_size, "generate_per_item": generate_per_item},
            "machine": {"cores": cores, "torch": torch.__version__, "backend": fastprep.backend()},
            "gpu_rate": gpu_rate,
            "variants": [{**asdict(v), "transform": None, "collate": None,
                          "speedup": base / v.us_per_sample,
                          "one_core_feeds": 1e6 / v.us_per_sample / gpu_rate} for v in variants]}


def table(result: dict) -> str:
    ws = list(result["variants"][0]["loader"])
    head = (f"{'variant':<30}{'us/sample':>11}{'speedup':>9}{'bytes/sample':>14}"
            f"{'1 core feeds':>14}" + "".join(f"{'samples/s ' + w:>16}" for w in ws))
    lines = [head, "-" * len(head)]
    for v in result["variants"]:
        lines.append(f"{v['name']:<30}{v['us_per_sample']:>11.1f}{v['speedup']:>8.1f}x"
                     f"{v['bytes_per_sample']:>14,}{v['one_core_feeds']:>13.1%} "
                     + "".join(f"{v['loader'][w]:>16.0f}" for w in ws))
    lines.append(f"(1 core feeds = share of a GPU consuming {result['gpu_rate']:.0f} samples/s that "
                 f"one core's transforms keep up with; samples/s through a DataLoader, batch "
                 f"{result['workload']['batch_size']}, best prefetch_factor)")
    r = result.get("ray")
    if r:
        where = f"cluster at {r['address']}" if r["address"] else f"local, num_cpus={r['num_cpus']}"
        best_w, best = max(r["in_process_samples_per_s"].items(), key=lambda kv: kv[1])
        lines.append(f"{r['variant'] + ' via Ray Data':<30}{'':>48}{r['samples_per_s']:>16.0f}   "
                     f"({where}; {r['samples_per_s'] / best:.2f}x the best DataLoader, {best_w})")
    return "\n".join(lines)
