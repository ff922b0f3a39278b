"""`python -m fastprep bench --details`: the seed workload, delivered into a consumer, by every loader
and setting (the headline before it: _headline.py; --data: _data.py).

The figure a training job feels is samples/s delivered into its step, not kernel time. Every row
here is a loader feeding a consumer that copies each batch once into a preallocated buffer of the
batch's size (as the host to device copy would): the usual pipeline and the fused fastprep
pipeline through a DataLoader (num_workers 0..cores; fastprep's with compact_collate, and with
CompactCollate(reuse=True) and the consumer releasing each batch after its copy),
fastprep.Loader (threads 1..cores), and
the peers torchdata.nodes and SPDL where they are installed, each on PIL and on numpy sources
(synthetic images), and on request on image files (``--sources folder,roi,packed-jpeg,packed-raw``:
JPEGs of the photos read whole, by window, from restart-indexed shards, from raw shards;
tools/bench/_file_sources.py). Rates are given as a share of the fused kernel's own 1-thread rate, measured
in the same run on the same sources, and per core used.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch.utils.data import default_collate

import fastprep
import fastprep.tools.bench._feeds as feeds
import fastprep.tools.bench._loaders as bench_loader
import fastprep.tools.bench._pipelines as pipelines
from fastprep import transforms as T
from fastprep.tools.bench._sweep import usable_cores
from fastprep.tools.bench._table import SOURCE_LABEL

SOURCES = ("pil", "numpy")
FILE_SOURCES = ("folder", "roi", "packed-jpeg", "packed-raw")  # on request only: files are written and packed
# (pipeline, loader) -> the row's name
NAMES = {("usual", "DataLoader"): "usual + default_collate, DataLoader",
         ("fastprep", "DataLoader"): "fused + compact_collate, DataLoader",
         ("fastprep reuse", "DataLoader"): "fused + CompactCollate(reuse=True), DataLoader",
         ("fastprep", "fastprep.Loader"): "fastprep.Loader (fused, into slots)",
         **{(pipeline, "fastprep.Loader"): name for pipeline, name in bench_loader.NAMES.items()},
         ("fastprep", "torchdata.nodes"): "fused + compact_collate, torchdata.nodes",
         ("fastprep", "SPDL, pipe per sample"): "fused + compact_collate, SPDL per sample",
         ("fastprep", "SPDL, pipe per batch"): "fused + compact_collate, SPDL per batch"}


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


def memcpy_floor_us(nbytes: int, repeat: int = 200) -> float:
    """Best microseconds to copy `nbytes` between preallocated buffers: the floor of a per-sample
    op that reads that many bytes (its crop window) and writes as many (its uint8 output)."""
    src, dst = torch.ones(nbytes, dtype=torch.uint8), torch.empty(nbytes, dtype=torch.uint8)
    dst.copy_(src)
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        dst.copy_(src)
        best = min(best, time.perf_counter() - t0)
    return best * 1e6


def _per_sample(backend: str, quick: bool, pools: dict[str, list]) -> list[dict]:
    """Each transform alone on one thread, on both source kinds (the old headline's numbers)."""
    variants = [("usual (PIL->tensor, scipy, float32)", pipelines.usual_transform),
                (f"fastprep fused ({backend})", pipelines.fastprep_transform),
                ("fastprep fused Compose", T.seed_workload(layout="HWC"))]
    if backend == "native":
        variants.append(("fastprep fused (numba)", pipelines.fastprep_numba_transform))
    variants.append(("fastprep unfused chain", pipelines.fastprep_unfused_transform))
    out = []
    for name, transform in variants:
        _say(f"per-sample time: {name}")
        repeat = (2 if quick else 5) if name.startswith("usual") else (10 if quick else 50)
        out.append({"name": name, "us_per_sample": {k: time_per_sample(transform, pools[k], repeat) for k in pools}})
    return out


def _ray_row(quick: bool, batch_size: int, cores: int, pool: int, address: str | None) -> dict:
    from fastprep.tools.bench._ray_row import ray_rate  # noqa: PLC0415 (Ray is an optional extra)

    _say("Ray Data: fastprep fused, local instance" if address is None else f"Ray Data at {address}")
    rate = ray_rate(batch_size, 8 if quick else 16, cores, pool, address)
    return {"num_cpus": cores, "address": address, "source": "numpy", "samples_per_s": rate,
            "variant": f"fastprep fused ({fastprep.backend()})"}


def check_sources(sources: list[str]) -> list[str]:
    """`sources`, or SystemExit naming the kinds there are (before anything runs)."""
    if not sources or any(s not in SOURCES + FILE_SOURCES for s in sources):
        raise SystemExit(f"bench: expected sources among {', '.join(SOURCES + FILE_SOURCES)}, got "
                         f"{','.join(sources)!r}")
    return sources


def run(quick: bool = False, generate_per_item: bool = False, gpu_rate: float = 5000.0, batch_size: int = 256,
        workers: list[int] | None = None, threads: list[int] | None = None, sources: list[str] | None = None,
        seconds: float | None = None, peers: bool = True, with_ray: bool = False,
        ray_address: str | None = None, pool: int | None = None) -> dict:
    cores = usable_cores()
    workers = list(range(0, cores + 1)) if workers is None else workers
    threads = list(range(1, cores + 1)) if threads is None else threads
    sources = check_sources(list(SOURCES) if sources is None else sources)
    pool = pool or (4 if quick else 8)
    budget = feeds.Budget(*((1, 0.5, 16) if quick else (4, 4.0, 200)))  # quick: 1 batch of a slow row is enough
    if seconds is not None:
        budget.min_seconds = seconds
    torch.set_num_threads(1)
    pools = {k: pipelines.SyntheticImages(1, None, pool=pool, as_pil=k == "pil").pool for k in SOURCES}

    # The kernel's own rate: the fused op alone, one thread, on the numpy sources (a zero-copy view).
    _say("fused kernel alone, 1 thread")
    kernel_us = time_per_sample(pipelines.fastprep_transform, pools["numpy"], 20 if quick else 100)
    kernel_rate = 1e6 / kernel_us
    floor_bytes = 3 * pipelines.CROP * pipelines.CROP
    floor_us = memcpy_floor_us(floor_bytes)
    per_sample = _per_sample(fastprep.backend(), quick, pools)

    compose = T.seed_workload(layout="HWC")  # fused: crop_mask_ycbcr, or the batch op in the Loader
    # Collates by pipeline, made afresh for each loader (a reusing one keeps that loader's buffers).
    transforms = {"usual": (pipelines.usual_transform, lambda: default_collate),
                  "fastprep": (pipelines.fastprep_transform, lambda: fastprep.compact_collate),
                  "fastprep reuse": (pipelines.fastprep_transform, lambda: fastprep.CompactCollate(reuse=True)),
                  "dataset Compose": (compose, lambda: fastprep.compact_collate),
                  "foreign": (pipelines.usual_transform, lambda: fastprep.compact_collate),
                  "foreign deterministic": (pipelines.usual_transform, lambda: fastprep.compact_collate)}
    plan: list[tuple[str, str, str, list[int]]] = [("usual", "DataLoader", "w", workers),
                                                   ("fastprep", "DataLoader", "w", workers),
                                                   ("fastprep reuse", "DataLoader", "w", workers),
                                                   ("fastprep", "fastprep.Loader", "t", threads),
                                                   *((p, "fastprep.Loader", "t", threads) for p in bench_loader.NAMES)]
    not_installed = {}
    for peer in feeds.PEERS if peers else []:
        why = feeds.peer_missing(peer)
        if why is None:
            plan.append(("fastprep", peer, "t", threads))
        else:
            not_installed[peer] = why
    files = _file_set(quick) if any(s in FILE_SOURCES for s in sources) else None
    rows = []
    for pipeline, loader, kind, settings in plan:
        transform, make_collate = transforms[pipeline]
        name = NAMES[(pipeline, loader)]
        for source in sources:
            length = batch_size * (budget.max_batches + 2 * max(settings) + 8)
            dataset = _dataset(source, pipeline, transform, compose, length, pool, generate_per_item, files)
            if dataset is None:
                continue
            if pipeline != "usual" and loader == "DataLoader":
                dataset = T.SeedByIndex(dataset, seed=0)  # as the README's DataLoader: the Loader's samples
            for n in settings:
                _say(f"{name}, {SOURCE_LABEL[source]} sources, {kind}={n}")
                kwargs = bench_loader.LOADER_KWARGS[pipeline](compose) if loader == "fastprep.Loader" else {}
                rate, extra = _measure(loader, dataset, batch_size, n, make_collate, kwargs, budget, quick,
                                       release=pipeline == "fastprep reuse")
                per_core = rate / max(n, 1)
                rows.append({"name": name, "pipeline": pipeline, "loader": loader, "source": source,
                             "setting": f"{kind}={n}", kind: n, "cores": max(n, 1), "samples_per_s": rate,
                             "share_of_kernel": rate / kernel_rate, "delivered_per_core": per_core,
                             "one_core_feeds": per_core / gpu_rate,
                             "bytes_per_sample": _bytes_per_sample(transform, make_collate(), pools["numpy"][0]),
                             **extra})
    # The fused Compose's per-sample work written out by hand: the floor under its Python.
    by_hand_us = time_per_sample(pipelines.fastprep_batch_op_one, pools["numpy"], 10 if quick else 50)
    own = None  # the Loader's own rates (numpy sources), without the consumer's copy
    if "numpy" in sources and {1, 2} & set(threads):
        _say("fastprep.Loader into a consumer that only counts")
        own = bench_loader.own_rates(batch_size, sorted({1, 2} & set(threads)), compose, budget, pool)
    ray_result = None
    if with_ray:
        ray_result = _ray_row(quick, batch_size, cores, pool, ray_address)
        r = ray_result["samples_per_s"]
        ray_result.update(share_of_kernel=r / kernel_rate, delivered_per_core=r / cores,
                          one_core_feeds=r / cores / gpu_rate)
    described = files.describe() if files is not None else None
    if files is not None:
        files.close()
    return {"workload": {"source": f"{pipelines.SOURCE_SIZE}x{pipelines.SOURCE_SIZE}x3 uint8", "files": described,
                         "sources_are": "synthetic", "pool": pool, "crop": pipelines.CROP, "p": pipelines.P,
                         "structure": "cross", "batch_size": batch_size, "generate_per_item": generate_per_item,
                         "consumer": "copies each batch's tensors once into preallocated buffers"},
            "machine": {"cores": cores, "torch": torch.__version__, "backend": fastprep.backend()},
            "gpu_rate": gpu_rate, "quick": quick,
            "kernel": {"what": "crop_mask_ycbcr alone, 1 thread, numpy HWC sources", "us_per_sample": kernel_us,
                       "samples_per_s": kernel_rate, "memcpy_floor_us": floor_us, "floor_bytes": floor_bytes},
            "variants": per_sample, "rows": rows, "peers_run": peers, "not_installed": not_installed, "ray": ray_result,
            "aims": bench_loader.aims(rows, per_sample, kernel_rate, NAMES[("fastprep", "fastprep.Loader")], own,
                                      by_hand_us),
            "floors": bench_loader.floors(batch_size, 0.3 if quick else 1.0)}


def _file_set(quick: bool) -> Any:
    from fastprep.tools.bench._file_sources import FileSet  # noqa: PLC0415 (files only when asked for)

    _say("writing the photo JPEGs and packing them")
    return FileSet(8 if quick else 32)


def _dataset(source: str, pipeline: str, transform: Callable, compose: Any, length: int, pool: int,
             generate_per_item: bool, files: Any) -> Any:
    """The row's dataset: synthetic images, or image files read as `source` (the usual pipeline
    reads files only as Pillow does: source "folder"); None for a row that does not apply."""
    if source in SOURCES:
        return pipelines.SyntheticImages(length, transform, pool=pool, as_pil=source == "pil",
                                         generate_per_item=generate_per_item)
    from fastprep.tools.bench._file_sources import FileImages  # noqa: PLC0415

    if pipeline == "usual":
        return FileImages(files, "folder", length, transform, pil=True) if source == "folder" else None
    if pipeline not in ("fastprep", "fastprep reuse"):
        return None  # the Loader-policy rows (issue 26's figures) run on the synthetic sources only
    return FileImages(files, source, length, compose)


def _measure(loader: str, dataset: Any, batch_size: int, n: int, make_collate: Callable[[], Callable],
             loader_kwargs: dict, budget: feeds.Budget, quick: bool, release: bool = False) -> tuple[float, dict]:
    # release: the consumer hands each batch back once copied, as DevicePrefetcher(release=True)
    # does once its host-to-device copy completed, so a reusing collate refills the buffers.
    consume = feeds.Consumer(release=release)
    if loader == "DataLoader":
        best, best_pf = 0.0, None
        for pf in ([2] if quick else [2, 4]) if n > 0 else [None]:
            batches, skip = feeds.dataloader(dataset, batch_size, n, make_collate(), pf)
            rate = feeds.delivered_rate(batches, consume, skip, budget, multiple=max(n, 1))
            if rate > best:
                best, best_pf = rate, pf
        return best, {"prefetch_factor": best_pf}
    if loader == "fastprep.Loader":
        batches, skip = feeds.fastprep_loader(dataset, batch_size, n, **loader_kwargs)
    else:
        batches, skip = feeds.PEERS[loader][1](dataset, batch_size, n, make_collate())
    return feeds.delivered_rate(batches, consume, skip, budget), {}


def _bytes_per_sample(transform: Callable, collate: Callable, source: Any) -> int:
    return sum(t.numel() * t.element_size() for t in feeds.batch_tensors(collate([(transform(source), 7)])))


def table(result: dict) -> str:
    from fastprep.tools.bench._table import format_table  # noqa: PLC0415 (kept apart: this file runs, that prints)

    return format_table(result)
