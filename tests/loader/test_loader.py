"""fastprep.Loader: the same samples as SeedByIndex + DataLoader for any threads / workers, batches
in reused slots, failures that name the sample and leave no thread behind, mid-epoch resume."""

import gc
import threading

import pytest
import torch
from torch.utils.data import DataLoader, Dataset

import fastprep
from fastprep import transforms as T
from fastprep.tools.bench._pipelines import SyntheticImages

from helpers.fused_spies import fused_calls, per_sample_items

CROP = 48


def _tf(fuse=True):
    return T.seed_workload(CROP, layout="HWC", fuse=fuse)


def _dataset(n=40):
    return SyntheticImages(n, _tf(), pool=4, size=96)


def _loader_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("fastprep-loader")]


def _by_index(batches, order=None):
    """{dataset index: (image, label)} from CompactBatches of (image, label) in `order`."""
    out, k = {}, 0
    for b in batches:
        images, labels = b.data if isinstance(b, fastprep.CompactBatch) else b
        for j in range(len(labels)):
            i = order[k] if order is not None else k
            out[i] = (images[j].clone(), int(labels[j]))
            k += 1
    return out


def _reference(ds, seed, epoch=0, num_workers=0):
    wrapped = T.SeedByIndex(ds, seed=seed)
    wrapped.set_epoch(epoch)
    dl = DataLoader(wrapped, batch_size=8, num_workers=num_workers, collate_fn=fastprep.compact_collate)
    return _by_index(dl)


def _same(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[i][0], b[i][0]) and a[i][1] == b[i][1] for i in a)


@pytest.fixture(scope="module")
def reference():
    return _reference(_dataset(), seed=7)


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("fuse", [True, False])
def test_samples_equal_seed_by_index_in_a_dataloader(reference, threads, fuse):
    loader = fastprep.Loader(_dataset(), 8, transform=_tf(fuse), seed=7, threads=threads)
    assert len(loader) == 5
    assert _same(_by_index(loader), reference)
    assert not _loader_threads()


def test_same_samples_as_dataloader_workers_and_with_the_transform_inside_the_dataset(reference):
    assert _same(_reference(_dataset(), seed=7, num_workers=2), reference)
    # No Loader transform: dataset[i] runs the dataset's own (fastprep-only) transform per thread.
    assert _same(_by_index(fastprep.Loader(_dataset(), 8, seed=7, threads=2)), reference)
    # A SeedByIndex is unwrapped: its seed is used.
    assert _same(_by_index(fastprep.Loader(T.SeedByIndex(_dataset(), seed=7), 8, threads=2)), reference)


def test_shuffle_and_epochs_keep_sample_bits():
    ds = _dataset()
    loader = fastprep.Loader(ds, 8, transform=_tf(), seed=7, threads=2, shuffle=True)
    for epoch in (0, 1):
        loader.set_epoch(epoch)
        order = loader.indices(epoch)
        assert sorted(order) == list(range(len(ds)))
        assert _same(_by_index(loader, order), _reference(ds, seed=7, epoch=epoch))
    assert loader.indices(0) != loader.indices(1)


def test_last_batch_and_drop_last():
    sizes = [len(b.data[1]) for b in fastprep.Loader(_dataset(21), 8, transform=_tf(), seed=1)]
    assert sizes == [8, 8, 5]
    loader = fastprep.Loader(_dataset(21), 8, transform=_tf(), seed=1, drop_last=True)
    assert len(loader) == 2 and [len(b.data[1]) for b in loader] == [8, 8]


class Items(Dataset):
    """(uint8 image, bool mask, float, int label, str) samples, with failures on demand."""

    def __init__(self, n=20, fail_at=None, exc=KeyError, odd_shape_at=None):
        self.n, self.fail_at, self.exc, self.odd_shape_at = n, fail_at, exc, odd_shape_at

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.fail_at:
            raise self.exc(f"item {i} is broken")
        g = torch.Generator().manual_seed(i)
        w = 9 if i == self.odd_shape_at else 10
        return (torch.randint(0, 256, (3, 6, w), dtype=torch.uint8, generator=g), torch.rand(5, 11, generator=g) < 0.5,
                torch.rand(4, generator=g), i % 7, f"name{i}")


def test_generic_samples_collate_like_compact_collate():
    ds = Items()
    got = list(b.clone() for b in fastprep.Loader(ds, 6, threads=2, seed=0))
    want = list(DataLoader(ds, batch_size=6, collate_fn=fastprep.compact_collate))
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert repr(g.spec) == repr(w.spec)
        for a, b in zip(g.expand(), w.expand(), strict=True):
            assert torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b


def test_batches_live_in_reused_slots_until_the_next_one_and_clone_keeps_one():
    loader = fastprep.Loader(Items(40), 4, threads=1, depth=1, seed=0)
    seen, kept = [], []
    for b in loader:
        seen.append(b.data[0].data_ptr())
        kept.append((b.clone(), b.data[0].clone()))
    assert len(set(seen)) == 2  # depth + 1 slots, reused in turn
    for copy, image in kept:
        assert torch.equal(copy.data[0], image)


def test_decode_on_cpu():
    images, masks, floats, labels, names = next(iter(fastprep.Loader(Items(), 4, expand=True, seed=0)))
    assert images.dtype == torch.float32 and masks.dtype == torch.bool and labels.dtype == torch.int64
    assert names == ["name0", "name1", "name2", "name3"]


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("exc", [KeyError, ValueError])
def test_a_failing_sample_reaches_the_consumer_with_its_index(threads, exc):
    with pytest.raises(exc, match="item 13 is broken") as info:
        for _ in fastprep.Loader(Items(fail_at=13, exc=exc), 4, threads=threads, seed=0):
            pass
    assert any("sample 13" in note for note in getattr(info.value, "__notes__", [])) or "sample 13" in str(info.value)
    assert not _loader_threads()


def test_a_failing_transform_names_the_sample():
    def bad(image):
        raise RuntimeError("transform says no")

    with pytest.raises(RuntimeError, match="transform says no") as info:
        list(fastprep.Loader(_dataset(), 8, transform=bad, seed=0, threads=2))
    assert any("in transform" in n for n in getattr(info.value, "__notes__", [])) or "transform" in str(info.value)
    assert not _loader_threads()


def test_mixed_shapes_name_both_samples():
    with pytest.raises(ValueError, match=r"sample 5 is \(\(3, 6, 9\), torch.uint8\), but the batch is laid out "
                                         r"from sample 0's \(\(3, 6, 10\), torch.uint8\)"):
        list(fastprep.Loader(Items(odd_shape_at=5), 8, threads=1, seed=0))
    assert not _loader_threads()


def test_break_del_interrupt_and_gc_leave_no_thread():
    loader = fastprep.Loader(_dataset(80), 4, transform=_tf(), seed=0, threads=3)
    for _ in loader:
        break
    gc.collect()
    assert not _loader_threads()
    it = iter(loader)
    next(it)
    del it
    gc.collect()
    assert not _loader_threads()
    with pytest.raises(KeyboardInterrupt):
        for _ in loader:
            raise KeyboardInterrupt
    gc.collect()
    assert not _loader_threads()
    with pytest.raises(KeyboardInterrupt):  # raised in a Loader thread: reaches the consumer too
        list(fastprep.Loader(Items(fail_at=3, exc=KeyboardInterrupt), 4, threads=2, seed=0))
    assert not _loader_threads()


@pytest.mark.parametrize("shuffle", [False, True])
def test_state_dict_resumes_mid_epoch_with_the_remaining_samples(shuffle):
    full = fastprep.Loader(_dataset(), 8, transform=_tf(), seed=3, threads=2, shuffle=shuffle)
    full.set_epoch(2)
    want = [b.clone() for b in full]
    loader = fastprep.Loader(_dataset(), 8, transform=_tf(), seed=3, threads=2, shuffle=shuffle)
    loader.set_epoch(2)
    it = iter(loader)
    next(it), next(it)
    state = loader.state_dict()
    del it
    resumed = fastprep.Loader(_dataset(), 8, transform=_tf(), threads=1, shuffle=shuffle)
    resumed.load_state_dict(state)
    got = [b.clone() for b in resumed]
    assert len(got) == len(want) - 2
    for g, w in zip(got, want[2:], strict=True):
        assert torch.equal(g.data[0], w.data[0]) and torch.equal(g.data[1], w.data[1])


def test_sampler_order_and_its_resume():
    order = [5, 3, 1, 0, 2, 4, 9, 8]
    got = [b.clone() for b in fastprep.Loader(Items(), 2, sampler=order, seed=0)]
    assert [int(x) for b in got for x in b.data[3]] == [i % 7 for i in order]


@pytest.mark.parametrize("kwargs,match", [
    (dict(batch_size=0), "expected batch_size to be an int >= 1, got 0"),
    (dict(threads=0), "expected threads to be an int >= 1, got 0"),
    (dict(depth=True), "expected depth to be an int >= 1, got True"),
    (dict(shuffle=True, sampler=[0, 1]), "shuffle=True and a sampler are exclusive"),
    (dict(device="gpu"), "Loader: bad device 'gpu'"),
    (dict(expand="yes"), "expected expand to be a bool or a callable, got 'yes'"),
    (dict(transform=3), "expected transform to be callable or None, got 3"),
])
def test_bad_arguments(kwargs, match):
    args = dict(batch_size=4)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        fastprep.Loader(Items(), **args)


@pytest.mark.parametrize("as_pil", [False, True])
def test_numpy_and_pil_sources_take_the_fused_path(as_pil, monkeypatch):
    ds = SyntheticImages(16, _tf(), pool=2, size=96, as_pil=as_pil)
    want = _reference(ds, seed=5)
    calls, one_by_one = fused_calls(monkeypatch), per_sample_items(monkeypatch)
    assert _same(_by_index(fastprep.Loader(ds, 8, transform=_tf(), seed=5, threads=2)), want)
    assert sum(map(len, calls)) == 16 and not one_by_one  # every sample through the batch op


def _flip_tf(fuse=True, after=False):
    steps = [T.RandomCrop(CROP, layout="HWC"), T.RandomDilatedMask(0.25), T.RGBToYCbCr()]
    if after:  # torchvision's usual order: the flip on the crop's CHW output
        steps.insert(1, T.RandomHorizontalFlip())
    else:
        steps.insert(0, T.RandomHorizontalFlip(layout="HWC"))
    return T.Compose(steps, fuse=fuse)


@pytest.mark.parametrize("after", [False, True])
@pytest.mark.parametrize("as_pil", [False, True])
@pytest.mark.parametrize("threads", [1, 2])
def test_a_flip_rides_along_in_the_slot_path(as_pil, threads, after, monkeypatch):
    """A flip before or after the crop, with the mask and colour steps, runs through the batch op
    with per-sample hflips, and gives the unfused chain's samples (DataLoader, SeedByIndex)."""
    ds = SyntheticImages(24, _flip_tf(fuse=False, after=after), pool=3, size=96, as_pil=as_pil)
    want = _reference(ds, seed=11)
    calls, one_by_one = fused_calls(monkeypatch), per_sample_items(monkeypatch)
    got = _by_index(fastprep.Loader(ds, 8, transform=_flip_tf(after=after), seed=11, threads=threads))
    assert _same(got, want)
    flips = [f for c in calls for f in c]
    assert not one_by_one and len(flips) == 24 and 0 < sum(flips) < 24  # all on the slot path, some flipped
