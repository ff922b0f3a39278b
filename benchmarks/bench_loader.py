"""Samples/s through a DataLoader with 2 workers: the usual pipeline with default_collate vs the
fused fastprep transform with compact_collate (host side; expand would run on the GPU)."""

import pytest
from torch.utils.data import DataLoader, default_collate

import fastprep
import fastprep.tools.bench._pipelines as pipelines

from conftest import run_floor

BATCH, BATCHES, WORKERS = 64, 4, 2
GROUP = f"DataLoader epoch: {BATCHES} batches of {BATCH}, {WORKERS} workers, start-up included"


def _drain(dataset, collate):
    loader = DataLoader(dataset, batch_size=BATCH, num_workers=WORKERS, collate_fn=collate,
                        persistent_workers=False)

    def run():
        for _ in loader:
            pass
    return run


def test_usual_default_collate(benchmark):
    pytest.importorskip("scipy")
    pytest.importorskip("PIL")
    benchmark.group = GROUP
    ds = pipelines.SyntheticImages(BATCH * BATCHES, pipelines.usual_transform, pool=4, as_pil=True)
    benchmark.pedantic(_drain(ds, default_collate), rounds=2, iterations=1)


def test_fastprep_fused_compact_collate(benchmark):
    benchmark.group = GROUP
    ds = pipelines.SyntheticImages(BATCH * BATCHES, pipelines.fastprep_transform, pool=4)
    benchmark.pedantic(_drain(ds, fastprep.compact_collate), rounds=3, iterations=1)


def test_fastprep_fused_default_collate(benchmark):
    """The fused op alone, batches still assembled by default_collate (uint8)."""
    benchmark.group = GROUP
    ds = pipelines.SyntheticImages(BATCH * BATCHES, pipelines.fastprep_transform, pool=4)
    benchmark.pedantic(_drain(ds, default_collate), rounds=3, iterations=1)


def test_memcpy_batch_bytes(benchmark):
    benchmark.group = GROUP
    run_floor(benchmark, BATCH * BATCHES * 3 * 256 * 256, BATCH * BATCHES * 3 * 256 * 256)
