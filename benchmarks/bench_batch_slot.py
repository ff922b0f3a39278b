"""A batch of the target pipeline, one thread: crop_mask_ycbcr_batch straight into a preallocated
slot (fastprep.Loader's path) vs the per-sample op and compact_collate (a DataLoader worker's
path), on the same sources with the same seeds, and the same bits (checked); memcpy of the
batch's bytes as the floor."""

import pytest
import torch

import fastprep
import fastprep.tools.bench._pipelines as pipelines

from conftest import run_floor

BATCH, CROP, P = 64, pipelines.CROP, pipelines.P
GROUP = f"batch of {BATCH} (1024^2 -> 256^2, mask, YCbCr): into a slot vs per sample + collate"

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def inputs():
    pool = [torch.from_numpy(pipelines.make_source(i)) for i in range(8)]
    sources = [pool[i % len(pool)] for i in range(BATCH)]
    seeds = [fastprep.derive_seed(0, i) for i in range(BATCH)]
    mask_seeds = [fastprep.derive_seed(s, 1) for s in seeds]
    return sources, seeds, mask_seeds


def _windows(sources, seeds):
    """The windows crop_mask_ycbcr draws from the seeds: what the batch op takes."""
    return zip(*(fastprep.random_crop_params(s.shape[0], s.shape[1], CROP, CROP, seed) for s, seed in zip(sources, seeds)))


def _per_sample_collate(sources, seeds, mask_seeds):
    samples = [(fastprep.crop_mask_ycbcr(src, CROP, CROP, P, seed, layout="HWC", mask_seed=ms), i % 1000)
               for i, (src, seed, ms) in enumerate(zip(sources, seeds, mask_seeds))]
    return fastprep.compact_collate(samples)


def _into_slot(sources, seeds, mask_seeds, slot):
    tops, lefts = _windows(sources, seeds)
    return fastprep.crop_mask_ycbcr_batch(sources, list(tops), list(lefts), CROP, CROP, P, mask_seeds, slot)


def test_same_bits(inputs):
    slot = torch.empty(BATCH, 3, CROP, CROP, dtype=torch.uint8)
    assert torch.equal(_into_slot(*inputs, slot), _per_sample_collate(*inputs).data[0])


def test_fastprep_batch_into_slot(benchmark, inputs):
    benchmark.group = GROUP
    slot = torch.empty(BATCH, 3, CROP, CROP, dtype=torch.uint8)
    benchmark(_into_slot, *inputs, slot)


def test_per_sample_op_and_compact_collate(benchmark, inputs):
    benchmark.group = GROUP
    benchmark(_per_sample_collate, *inputs)


def test_memcpy_batch_bytes(benchmark):
    benchmark.group = GROUP
    run_floor(benchmark, BATCH * 3 * CROP * CROP, BATCH * 3 * CROP * CROP)
