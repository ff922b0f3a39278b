"""Collate 256 samples of the target pipeline (3x256x256 uint8 + label) into one batch."""

import torch
from torch.utils.data import default_collate

from fastprep import CompactCollate

from conftest import run_floor

N, SHAPE = 256, (3, 256, 256)
GROUP = "collate 256 x 3x256x256"


def _samples(dtype=torch.uint8):
    g = torch.Generator().manual_seed(0)
    imgs = [torch.randint(0, 256, SHAPE, dtype=torch.uint8, generator=g) for _ in range(N)]
    if dtype != torch.uint8:
        imgs = [i.to(dtype) / 255 for i in imgs]
    return [(img, k % 1000) for k, img in enumerate(imgs)]


def test_fastprep_compact_collate(benchmark):
    benchmark.group = GROUP
    benchmark(CompactCollate(), _samples())


def test_fastprep_compact_collate_reuse(benchmark):
    benchmark.group = GROUP
    collate, samples = CompactCollate(reuse=True), _samples()
    benchmark(lambda: collate(samples).release())  # the prefetcher hands each batch back


def test_default_collate_uint8(benchmark):
    benchmark.group = GROUP
    benchmark(default_collate, _samples())


def test_default_collate_float32(benchmark):
    benchmark.group = GROUP
    benchmark(default_collate, _samples(torch.float32))


def test_memcpy_fresh_buffer(benchmark):
    """Allocate a new batch buffer and copy the batch's bytes in: page faults included."""
    benchmark.group = GROUP
    src = torch.ones(N * 3 * 256 * 256, dtype=torch.uint8)
    benchmark(lambda: torch.empty_like(src).copy_(src))


def test_memcpy_existing_buffer(benchmark):
    benchmark.group = GROUP
    run_floor(benchmark, N * 3 * 256 * 256, N * 3 * 256 * 256)
