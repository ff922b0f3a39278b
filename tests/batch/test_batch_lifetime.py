"""A batch's life (issue 28): a batch whose buffers go back to a pool raises once they may hold
another batch, or is never reused while it is referenced; what expand() hands out never aliases
reusable buffers; batches copied ahead of a loop that stops early go back to their pool; and a
DataLoader with persistent workers keeps them across DevicePrefetcher epochs."""

import gc

import pytest
import torch
from torch.utils.data import DataLoader, Dataset

import fastprep
from fastprep import CompactCollate, DevicePrefetcher

pytestmark = pytest.mark.one_backend


class _Samples(Dataset):
    """(uint8 image, float field, label) with values that tell the samples apart."""

    def __len__(self):
        return 12

    def __getitem__(self, i):
        return torch.full((3, 4, 4), i, dtype=torch.uint8), torch.full((2,), float(i)), i


def _value(batch):
    return int(batch.data[0][0, 0, 0, 0])


# Ways a consumer keeps batches past the point where their buffers are reused.
KEPT = {
    "list(DevicePrefetcher(release=True)) over a reusing collate": lambda: list(DevicePrefetcher(
        DataLoader(_Samples(), batch_size=3, collate_fn=CompactCollate(reuse=True)), "cpu", release=True)),
    "list(Loader(device='cpu'))": lambda: list(fastprep.Loader(_Samples(), 3, threads=1, device="cpu")),
    "list(Loader())": lambda: list(fastprep.Loader(_Samples(), 3, threads=2)),
}


@pytest.mark.parametrize("how", list(KEPT))
def test_a_batch_kept_past_its_reuse_raises_instead_of_changing(how):
    batches = KEPT[how]()
    assert len(batches) == 4
    for batch in batches[:-1]:
        with pytest.raises(RuntimeError, match="was released"):
            _value(batch)
    assert _value(batches[-1]) == 9  # the last one is still the consumer's


EXPANDED = {
    "Loader(device='cpu', expand=True)": lambda: list(fastprep.Loader(_Samples(), 3, threads=1, device="cpu",
                                                                      expand=True)),
    "Loader(expand=True)": lambda: list(fastprep.Loader(_Samples(), 3, threads=2, expand=True)),
    "DevicePrefetcher(expand=True, release=True)": lambda: list(DevicePrefetcher(
        DataLoader(_Samples(), batch_size=3, collate_fn=CompactCollate(reuse=True)), "cpu", expand=True,
        release=True)),
}


@pytest.mark.parametrize("how", list(EXPANDED))
def test_expanded_fields_never_alias_reused_buffers(how):
    for k, (images, floats, labels) in enumerate(EXPANDED[how]()):
        want = torch.arange(3 * k, 3 * k + 3)
        assert torch.equal(labels, want)
        assert torch.equal(floats, want[:, None].float().expand(3, 2))  # not overwritten by later batches
        assert torch.equal(images[:, 0, 0, 0], want.float().mul(1 / 255))


@pytest.mark.parametrize("workers", [0, 1])
def test_breaking_out_early_gives_the_batches_back(workers):
    """Ten loops that stop after one batch, then a whole epoch: reuse keeps working (before, the
    batches copied ahead were never released and each break lost slots for good)."""
    collate = CompactCollate(reuse=True)
    loader = DataLoader(_Samples(), batch_size=3, num_workers=workers, collate_fn=collate,
                        persistent_workers=workers > 0)
    for _ in range(10):
        for batch in DevicePrefetcher(loader, "cpu", depth=2, release=True):
            assert _value(batch) == 0
            break
        del batch  # the batch the consumer held goes back once it lets go of it
        gc.collect()
    fresh = []
    for batch in DevicePrefetcher(loader, "cpu", depth=2, release=True):
        fresh.append(batch._base._pool.fresh if workers else None)  # the worker's slot it shares
    if workers:
        assert fresh.count(True) <= 1, fresh  # slots reused, not allocated again
    else:
        assert collate.pool.nbytes > 0  # what the breaks handed back was kept for reuse


def test_persistent_workers_survive_prefetcher_epochs():
    loader = DataLoader(_Samples(), batch_size=3, num_workers=2, persistent_workers=True,
                        collate_fn=CompactCollate(reuse=True))
    epochs = [[int(b.data[2][0]) for b in DevicePrefetcher(loader, "cpu", release=True)] for _ in range(3)]
    assert epochs == [[0, 3, 6, 9]] * 3
    for _batch in DevicePrefetcher(loader, "cpu", release=True):
        break  # an early stop must not shut the workers the next epoch reuses
    del _batch
    assert [int(b.data[2][0]) for b in DevicePrefetcher(loader, "cpu", release=True)] == [0, 3, 6, 9]


def test_a_batch_of_tuples_unpacks_as_its_fields():
    """``for images, labels in loader`` without expand gives the compact fields (issue 27)."""
    for images, floats, labels in fastprep.Loader(_Samples(), 3, threads=1):
        assert images.dtype == torch.uint8 and images.shape == (3, 3, 4, 4) and labels.dtype == torch.uint8
        assert floats.dtype == torch.float32
    images, floats, labels = fastprep.compact_collate([_Samples()[0], _Samples()[1]])
    assert labels.tolist() == [0, 1] and floats[1].tolist() == [1.0, 1.0]
    batch = fastprep.compact_collate([{"image": torch.zeros(3, 2, 2, dtype=torch.uint8), "label": 1}])
    with pytest.raises(TypeError, match="a CompactBatch of dict samples does not unpack; read its fields by name"):
        _image, _label = batch
    assert batch["label"].tolist() == [1] and torch.equal(batch["image"], batch.data["image"])
    batch = fastprep.compact_collate([_Samples()[0], _Samples()[1]])
    assert torch.equal(batch[2], labels) and torch.equal(batch[-1], labels)
    batch.release()
    with pytest.raises(RuntimeError, match="CompactBatch.data: this batch was released"):
        batch[0]
