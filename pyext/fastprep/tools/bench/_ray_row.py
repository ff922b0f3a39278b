"""`bench --ray`: the fused pipeline run by Ray Data tasks and streamed back as CompactBatches into
the same consumer as the other rows."""

from __future__ import annotations

import time

import ray

import fastprep
import fastprep.integrations._ray as fray
import fastprep.tools.bench._pipelines as pipelines
from fastprep.tools.bench._feeds import Consumer
from fastprep.tools.bench._ray_synthetic import SyntheticSource, synthetic_images


def ray_rate(batch_size: int, batches: int, num_cpus: int, pool: int, address: str | None = None) -> float:
    """Samples/s of the fused fastprep pipeline run by Ray Data tasks and streamed back as
    CompactBatches, in steady state (the first batch, which pays for starting the workers, is
    not counted). Starts a local Ray instance with `num_cpus` unless `address` names one."""
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
        # a DataLoader's workers pay the same once, and the other rows skip it too.
        for _ in dataset(64 * num_cpus * 2).iter_batches(batch_size=64):
            pass
        it = fray.iter_compact_batches(dataset(batch_size * (batches + 1)), batch_size=batch_size,
                                       drop_last=True, prefetch_batches=2)
        consume = Consumer()
        consume(next(it))
        t0 = time.perf_counter()
        rows = sum(consume(batch) for batch in it)
        return rows / (time.perf_counter() - t0)
    finally:
        if started:
            ray.shutdown()
