"""torchvision's ImageNet pipelines written with fastprep's transforms against torchvision v2's, one
core, on the same decoded images (uint8 CHW views of HWC memory, as torchvision's decode_jpeg gives
them), float32 out:

- training: RandomResizedCrop(224), RandomHorizontalFlip, ToDtype(float32, scale=True), Normalize;
- validation: Resize(256), CenterCrop(224), ToDtype(float32, scale=True), Normalize.

Per sample through each library's Compose (fastprep's: one resized_crop op call a sample; unfused:
the steps one by one), and a whole epoch through fastprep.Loader(threads=1) (one resized_crop_batch
call a chunk, into the batch slot) against torch's DataLoader(num_workers=0) with torchvision's
Compose in the dataset (default collate). Each library draws its own windows and flips.

Run (torchvision imports in build/tv-venv, see .ci/torchvision):
  build/tv-venv/bin/python -m pytest benchmarks/bench_imagenet.py --benchmark-only -p no:logging
"""

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, Dataset

import fastprep
from fastprep import transforms as T

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
SIZES = [(375, 500), (500, 375), (333, 500), (500, 400), (375, 500), (281, 500), (500, 500), (366, 500)]
POOL, EPOCH, BATCH = 32, 256, 32  # an epoch cycles through the pool (slots and threads made once an epoch)

v2 = pytest.importorskip("torchvision.transforms.v2")
pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.parametrize("pipeline", ["train", "val"])]


def _steps(lib, pipeline):
    if pipeline == "train":
        geometry = [lib.RandomResizedCrop(224), lib.RandomHorizontalFlip()]
    else:
        geometry = [lib.Resize(256), lib.CenterCrop(224)]
    return [*geometry, lib.ToDtype(torch.float32, scale=True), lib.Normalize(MEAN, STD)]


@pytest.fixture(scope="module")
def images():
    """POOL decoded ImageNet-sized images: CHW views of HWC uint8 memory."""
    rng = np.random.default_rng(0)
    return [torch.from_numpy(rng.integers(0, 256, (*SIZES[i % len(SIZES)], 3), dtype=np.uint8)).permute(2, 0, 1)
            for i in range(POOL)]


def _per_sample(benchmark, pipeline, transform, images, **info):
    benchmark.group = f"ImageNet {pipeline} pipeline, per sample (Compose), {POOL} images a call -> float32"
    benchmark.extra_info.update(samples=len(images), **info)
    transform(images[0])
    benchmark(lambda: [transform(img) for img in images])


def test_torchvision_v2_compose(benchmark, pipeline, images):
    _per_sample(benchmark, pipeline, v2.Compose(_steps(v2, pipeline)), images)


def test_fastprep_compose(benchmark, pipeline, images):
    compose = T.Compose(_steps(T, pipeline))
    assert compose.plan.fused is not None  # one resized_crop call a sample
    _per_sample(benchmark, pipeline, compose, images)


def test_fastprep_compose_unfused(benchmark, pipeline, images):
    _per_sample(benchmark, pipeline, T.Compose(_steps(T, pipeline), fuse=False), images,
                note="(the steps one by one: each a pass)")


class Images(Dataset):
    """EPOCH items (image, label) cycling through the pool, `transform` applied in __getitem__ when
    given (torchvision's way)."""

    def __init__(self, images, transform=None):
        self.images, self.transform = images, transform

    def __len__(self):
        return EPOCH

    def __getitem__(self, i):
        img = self.images[i % len(self.images)]
        return (self.transform(img) if self.transform is not None else img), i


def _epoch(benchmark, pipeline, loader, count):
    benchmark.group = f"ImageNet {pipeline} pipeline, an epoch of {EPOCH} images in batches of {BATCH} -> float32"
    benchmark.extra_info["samples"] = EPOCH

    def epoch():
        for images, _labels in loader:
            count(images)

    epoch()
    benchmark(epoch)


def test_torchvision_v2_in_a_dataloader(benchmark, pipeline, images):
    loader = DataLoader(Images(images, v2.Compose(_steps(v2, pipeline))), batch_size=BATCH, num_workers=0)
    _epoch(benchmark, pipeline, loader, lambda batch: batch.shape)


def test_fastprep_loader(benchmark, pipeline, images):
    loader = fastprep.Loader(Images(images), BATCH, transform=T.Compose(_steps(T, pipeline)), threads=1)
    _epoch(benchmark, pipeline, loader, lambda batch: batch.shape)
