"""fastprep.Loader with the fused resized-crop pipelines (ImageNet training: RandomResizedCrop, flip,
ToDtype, Normalize; validation: Resize, CenterCrop, ToDtype, Normalize): every sample of a chunk
through one resized_crop_batch call into the batch slot, the samples of SeedByIndex + DataLoader
with the unfused steps, on numpy and PIL sources of mixed sizes."""

import pytest
import torch
from torch.utils.data import DataLoader

import fastprep
from fastprep import transforms as T

from helpers.fused_spies import MEAN, PIPELINES, STD, per_sample_items, resized_crop_calls
from helpers.mixed_photos import Photos

PIL = pytest.importorskip("PIL.Image")

pytestmark = pytest.mark.one_backend  # the op's bits are tests/test_resize*.py's, on both backends


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
