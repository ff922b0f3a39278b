"""fastprep.Loader with the fused resized-crop pipelines (ImageNet training: RandomResizedCrop, flip,
ToDtype, Normalize; validation: Resize, CenterCrop, ToDtype, Normalize): every sample of a chunk
through one resized_crop_batch call into the batch slot, the samples of SeedByIndex + DataLoader
with the unfused steps, on numpy and PIL sources of mixed sizes."""

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, Dataset

import fastprep
from fastprep import transforms as T

from helpers.fused_spies import MEAN, PIPELINES, STD, per_sample_items, resized_crop_calls

PIL = pytest.importorskip("PIL.Image")

pytestmark = pytest.mark.one_backend  # the op's bits are tests/test_resize*.py's, on both backends


class Photos(Dataset):
    """(image, label) of a pool of RGB images of mixed sizes, as numpy HWC arrays or PIL images."""

    def __init__(self, transform=None, as_pil=False, n=20):
        rng = np.random.default_rng(1)
        sizes = [(60, 80), (80, 52), (45, 45), (70, 96), (50, 66)]
        self.pool = [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for h, w in sizes]
        if as_pil:
            self.pool = [PIL.fromarray(a) for a in self.pool]
        self.transform, self.n = transform, n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        image = self.pool[i % len(self.pool)]
        return (self.transform(image) if self.transform is not None else image), i


def _samples(batches):
    return [(img.clone(), int(label)) for b in batches for img, label in zip(*b.data)]


@pytest.mark.parametrize("as_pil", [False, True])
@pytest.mark.parametrize("name", ["imagenet", "validation, flips, bfloat16"])
def test_loader_writes_each_chunk_with_one_op_call(name, as_pil, monkeypatch):
    reference = DataLoader(T.SeedByIndex(Photos(T.Compose(PIPELINES[name](), fuse=False), as_pil), seed=9),
                           batch_size=8, collate_fn=fastprep.compact_collate)
    want = _samples(reference)
    calls, one_by_one = resized_crop_calls(monkeypatch), per_sample_items(monkeypatch)
    for threads in (1, 2):
        calls.clear()
        got = _samples(fastprep.Loader(Photos(None, as_pil), 8, transform=T.Compose(PIPELINES[name]()), seed=9,
                                       threads=threads))
        assert len(got) == len(want) == 20
        assert all(torch.equal(a, b) and la == lb for (a, la), (b, lb) in zip(got, want))
        assert sum(calls) == 20 and max(calls) > 1 and not one_by_one  # batch calls, straight into the slots


def test_a_dataset_applying_the_pipeline_itself():
    """The transform inside the dataset (torchvision's style): the same samples as SeedByIndex."""
    tf = T.Compose([T.RandomResizedCrop(24), T.RandomHorizontalFlip(), T.ToDtype(torch.float32, scale=True),
                    T.Normalize(MEAN, STD)])
    want = _samples(DataLoader(T.SeedByIndex(Photos(tf), seed=4), batch_size=8, collate_fn=fastprep.compact_collate))
    got = _samples(fastprep.Loader(Photos(tf), 8, seed=4, threads=2))
    assert all(torch.equal(a, b) and la == lb for (a, la), (b, lb) in zip(got, want))
