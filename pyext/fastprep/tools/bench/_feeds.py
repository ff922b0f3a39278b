"""What `python -m fastprep bench` feeds and how it measures: the loaders it compares (DataLoader,
fastprep.Loader, torchdata.nodes, SPDL), a consumer that copies each batch once as the host to
device copy would, and the steady-state rate a loader delivers into it."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset, SequentialSampler

from fastprep.batch._compact import CompactBatch


def batch_tensors(batch: Any) -> list[torch.Tensor]:
    """The tensors of a batch that would cross to the device: a CompactBatch's, or those at the top
    level of a tuple / list / dict (default_collate's (images, labels))."""
    if isinstance(batch, CompactBatch):
        return batch.tensors()
    if isinstance(batch, torch.Tensor):
        return [batch]
    items = batch.values() if isinstance(batch, dict) else batch
    return [t for t in items if isinstance(t, torch.Tensor)]


class Consumer:
    """A training step's share of the data work: each batch is copied once into preallocated buffers
    of the batch's size (what `.to("cuda", non_blocking=True)` from pinned memory does, here into
    host memory), so a loader that hands out tensors it still has to finish, or that are slow to
    read, pays for it. `release`: then hand a CompactBatch back (CompactBatch.release), as
    DevicePrefetcher(release=True) does once its copy completed. Returns the batch's sample count."""

    def __init__(self, release: bool = False) -> None:
        self._buffers: list[torch.Tensor] = []
        self.release = release

    def __call__(self, batch: Any) -> int:
        tensors = batch_tensors(batch)
        if [(b.shape, b.dtype) for b in self._buffers] != [(t.shape, t.dtype) for t in tensors]:
            self._buffers = [torch.empty_like(t, memory_format=torch.contiguous_format) for t in tensors]
        for dst, src in zip(self._buffers, tensors, strict=True):
            dst.copy_(src)
        n = int(tensors[0].shape[0])
        if self.release and hasattr(batch, "release"):
            batch.release()
        return n


@dataclass
class Budget:
    """How long to time one configuration (after its warm-up batches): at least `min_batches`
    batches, then until `min_seconds` have passed or `max_batches` batches were timed."""

    min_batches: int = 2
    min_seconds: float = 1.0
    max_batches: int = 200


def delivered_rate(batches: Iterable[Any], consume: Consumer, skip: int, budget: Budget,
                   multiple: int = 1) -> float:
    """Samples/s that `batches` delivers into `consume` in steady state: `skip` warm-up batches
    first (start-up, first-touch of buffers, batches made in parallel while the first was
    awaited), then whole rounds of `multiple` batches (a DataLoader's workers finish theirs
    together) until the budget is spent."""
    it = iter(batches)
    try:
        for _ in range(skip):
            consume(next(it))
        samples = done = 0
        t0 = time.perf_counter()
        while True:
            samples += consume(next(it))
            done += 1
            if done % multiple:
                continue
            spent = time.perf_counter() - t0
            if done >= budget.max_batches or (done >= budget.min_batches and spent >= budget.min_seconds):
                return samples / spent
    finally:
        close = getattr(it, "close", None)  # stop a generator's threads (Loader, SPDL) now
        if callable(close):
            close()
        del it


# -- the loaders: each returns (iterable of batches, warm-up batches to skip) ---------------------

def dataloader(dataset: Dataset, batch_size: int, workers: int, collate: Callable,
               prefetch: int | None = None) -> tuple[Iterable[Any], int]:
    loader = DataLoader(dataset, batch_size=batch_size, num_workers=workers, collate_fn=collate,
                        prefetch_factor=prefetch if workers else None, drop_last=True)
    return loader, max(workers, 1)


def fastprep_loader(dataset: Dataset, batch_size: int, threads: int, transform: Any,
                    deterministic: bool = False) -> tuple[Iterable[Any], int]:
    import fastprep  # noqa: PLC0415 (the tools import the library lazily)

    loader = fastprep.Loader(dataset, batch_size, transform=transform, threads=threads, seed=0, drop_last=True,
                             deterministic=deterministic)
    return loader, loader.depth + 1  # every slot written once: first-touch of its pages


def torchdata_nodes(dataset: Dataset, batch_size: int, threads: int, collate: Callable) -> tuple[Iterable[Any], int]:
    """torchdata.nodes as its DataLoader migration guide builds it: samples by a thread-based
    ParallelMapper, batched, collated, prefetched."""
    from torchdata import nodes  # noqa: PLC0415 (an optional peer)

    node = nodes.SamplerWrapper(SequentialSampler(dataset))
    node = nodes.ParallelMapper(node, map_fn=dataset.__getitem__, num_workers=threads, method="thread",
                                in_order=True)
    node = nodes.Batcher(node, batch_size, drop_last=True)
    node = nodes.Mapper(node, collate)
    node = nodes.Prefetcher(node, 2)
    loader = nodes.Loader(node)

    def batches() -> Iterator[Any]:
        try:
            yield from loader
        finally:
            _stop_nodes(node)  # its threads hold the graph: it is never collected while they wait

    return batches(), 2


def _stop_nodes(node: Any, depth: int = 0) -> None:
    """Stop the threads of a torchdata.nodes graph, from the consumer's end to the source."""
    stop = getattr(node, "_shutdown", None)
    if callable(stop):
        stop()
    for attr in ("_it", "source"):
        child = getattr(node, attr, None)
        if child is not None and depth < 32:
            _stop_nodes(child, depth + 1)


def spdl_pipeline(dataset: Dataset, batch_size: int, threads: int, collate: Callable,
                  per_batch: bool = False) -> tuple[Iterable[Any], int]:
    """SPDL's PipelineBuilder with `threads` threads: as its docs build it, samples by a pipe of
    `threads` concurrency, aggregated into batches and collated; or, per_batch, indices
    aggregated first and each task making a whole batch (less per-item overhead)."""
    from spdl.pipeline import PipelineBuilder  # noqa: PLC0415 (an optional peer)

    builder = PipelineBuilder().add_source(range(len(dataset)))
    if per_batch:
        builder = (builder.aggregate(batch_size, drop_last=True)
                   .pipe(lambda idx: collate([dataset[i] for i in idx]), concurrency=threads, output_order="input"))
    else:
        builder = (builder.pipe(dataset.__getitem__, concurrency=threads, output_order="input")
                   .aggregate(batch_size, drop_last=True)
                   .pipe(collate))
    pipeline = builder.add_sink(3).build(num_threads=threads)

    def batches() -> Iterator[Any]:
        with pipeline.auto_stop():
            yield from pipeline.get_iterator(timeout=600)

    return batches(), 2


# Peer rows: name -> (module that must import, loader factory).
PEERS = {"torchdata.nodes": ("torchdata.nodes", torchdata_nodes),
         "SPDL, pipe per sample": ("spdl.pipeline", spdl_pipeline),
         "SPDL, pipe per batch": ("spdl.pipeline", functools.partial(spdl_pipeline, per_batch=True))}


def peer_missing(name: str) -> str | None:
    """None when peer `name` imports, else why not (reported as 'not installed')."""
    import importlib  # noqa: PLC0415

    try:
        importlib.import_module(PEERS[name][0])
    except Exception as exc:  # noqa: BLE001 (any import failure means the row cannot run)
        return f"{type(exc).__name__}: {exc}"
    return None
