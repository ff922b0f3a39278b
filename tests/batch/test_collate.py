"""CompactCollate and CompactBatch: dtypes, structures, errors, expand, DataLoader workers."""

from collections import namedtuple

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, Dataset

import fastprep
from fastprep import CompactBatch, CompactCollate, compact_collate
from fastprep.batch._collate import smallest_int_dtype
from fastprep.batch._compact import Leaf, TensorHolder

pytestmark = pytest.mark.one_backend

Sample = namedtuple("Sample", "image mask label")


def _samples(n=4, h=6, w=11, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randint(0, 256, (3, h, w), dtype=torch.uint8, generator=g),
             torch.rand(h, w, generator=g) < 0.3, i * 7) for i in range(n)]


def test_tuple_samples_become_compact_tensors():
    samples = _samples()
    batch = compact_collate(samples)
    images, masks, labels = batch.data
    assert images.dtype == torch.uint8 and images.shape == (4, 3, 6, 11)
    assert masks.dtype == torch.uint8 and masks.shape == (4, 6, 2)
    assert labels.dtype == torch.uint8 and labels.tolist() == [0, 7, 14, 21]
    assert torch.equal(images, torch.stack([s[0] for s in samples]))
    np.testing.assert_array_equal(
        masks.numpy(), np.packbits(torch.stack([s[1] for s in samples]).numpy(), axis=-1, bitorder="little"))


@pytest.mark.parametrize("lo,hi,dtype", [(0, 255, torch.uint8), (-1, 5, torch.int8),
                                         (0, 256, torch.int16), (-40000, 3, torch.int32),
                                         (0, 2**40, torch.int64)])
def test_labels_take_the_smallest_dtype(lo, hi, dtype):
    assert smallest_int_dtype(lo, hi) == dtype
    batch = compact_collate([(lo,), (hi,)])
    assert batch.data[0].dtype == dtype and batch.data[0].tolist() == [lo, hi]


def test_label_dtype_given_and_out_of_range():
    assert CompactCollate(label_dtype=torch.int32)([(1,), (2,)]).data[0].dtype == torch.int32
    with pytest.raises(ValueError, match=r"label 300 \(sample\[0\] of sample 1\) does not fit label_dtype=torch.uint8"):
        CompactCollate(label_dtype=torch.uint8)([(1,), (300,)])
    with pytest.raises(ValueError, match="expected label_dtype to be one of .* got torch.float32"):
        CompactCollate(label_dtype=torch.float32)


@pytest.mark.parametrize("labels,bad,at", [([1, 2**70], 2**70, 1), ([2**64 - 1, -1], 2**64 - 1, 0),
                                           ([5, -2**63 - 1], -2**63 - 1, 1), ([0, -1], -1, 1)])
def test_a_label_that_does_not_fit_is_named_exactly(labels, bad, at):
    """The label printed is the one given, however large (numpy would turn [2**64 - 1, -1] into floats)."""
    with pytest.raises(ValueError, match=rf"CompactCollate: label {bad} \(sample\[0\] of sample {at}\) does not fit "
                                         r"label_dtype=torch.uint8 \[0, 255\]"):
        CompactCollate(label_dtype=torch.uint8)([(x,) for x in labels])


def test_dicts_namedtuples_lists_numpy_and_other_leaves():
    samples = [{"img": np.full((4, 4, 3), i, np.uint8), "meta": {"name": f"s{i}", "y": np.int64(i)},
                "pair": [torch.ones(2), Sample(torch.zeros(1, 2, 2, dtype=torch.uint8),
                                               torch.ones(2, 9, dtype=torch.bool), i)]}
               for i in range(3)]
    batch = compact_collate(samples)
    assert batch.data["img"].shape == (3, 4, 4, 3) and batch.data["img"][2].eq(2).all()
    assert batch.data["meta"]["name"] == ["s0", "s1", "s2"]  # default_collate's choice
    assert batch.data["meta"]["y"].dtype == torch.uint8
    inner = batch.data["pair"][1]
    assert isinstance(inner, Sample) and inner.mask.shape == (3, 2, 2) and inner.label.tolist() == [0, 1, 2]
    assert batch.spec["pair"][1].mask.role == "mask" and batch.spec["pair"][1].mask.width == 9
    assert batch.roles == {"img": "image", "meta": {"name": "other", "y": "label"},
                           "pair": ["tensor", Sample("image", "mask", "label")]}


def test_a_batch_has_one_name_for_its_spec():
    """`layout` means CHW / HWC everywhere in fastprep; a batch has no second name for its spec."""
    batch = compact_collate([(torch.zeros(1, 2, 2, dtype=torch.uint8), 0)])
    assert batch.spec[0].role == "image" and batch.spec[1].role == "label"
    assert not hasattr(batch, "layout")


def test_float_tensors_narrowed_on_request():
    samples = [(torch.rand(2, 3),) for _ in range(2)]
    assert compact_collate(samples).data[0].dtype == torch.float32
    narrowed = CompactCollate(float_dtype=torch.bfloat16)(samples)
    assert narrowed.data[0].dtype == torch.bfloat16
    assert narrowed.expand()[0].dtype == torch.float32


@pytest.mark.parametrize("bad,match", [
    ([(torch.zeros(3, 4, 4, dtype=torch.uint8),), (torch.zeros(3, 4, 5, dtype=torch.uint8),)],
     r"sample\[0\] of sample 1 is \(\(3, 4, 5\), torch.uint8\), sample 0's is \(\(3, 4, 4\), torch.uint8\)"),
    ([(torch.zeros(2, dtype=torch.uint8),), (torch.zeros(2, dtype=torch.float32),)], "sample 1 is"),
    ([(1, 2), (1,)], r"sample 1 has 1 fields, sample 0's has 2"),
    ([], "empty list of samples"),
    ([(torch.zeros(2, dtype=torch.uint8), 1), None], "sample 1 is NoneType, sample 0's is tuple"),
    ([{"x": (1, 2)}, {"x": 3}], r"sample\['x'\] of sample 1 is int, sample 0's is tuple"),
    ([(torch.zeros(2, dtype=torch.uint8, device="meta"),)] * 2,
     r"sample\[0\] of sample 0 is on meta; collate CPU samples"),
    ([(torch.zeros(2, 2), 0), (torch.zeros(2, 2).requires_grad_(), 1)],
     r"sample\[0\] of sample 1 requires grad; a batch is data .* detach\(\) it"),
    ([{"x": torch.ones(3, requires_grad=True)}] * 2, r"sample\['x'\] of sample 0 requires grad"),
    ([(torch.zeros(3, 4, 4, dtype=torch.uint8), torch.zeros(4, 4, dtype=torch.bool), torch.ones(2) * 1.0)] * 2
     + [(torch.zeros(3, 4, 4, dtype=torch.uint8), torch.zeros(4, 4, dtype=torch.bool),
         torch.ones(2, requires_grad=True))], r"sample\[2\] of sample 2 requires grad"),
])
def test_bad_batches_name_the_sample(bad, match):
    with pytest.raises(ValueError, match=match):
        compact_collate(bad)


class _GradSamples(Dataset):
    """Sample 5's image requires grad (a transform that forgot no_grad)."""

    def __len__(self):
        return 8

    def __getitem__(self, i):
        return torch.rand(3, 4, 4, requires_grad=i == 5), torch.rand(2, requires_grad=i == 5), i


@pytest.mark.parametrize("threads", [1, 2])
def test_the_loader_names_a_sample_that_requires_grad(threads):
    """Copied into a reusable slot, its graph would be dropped without a word: refused by name."""
    with pytest.raises(ValueError, match=r"Loader: field 0 of sample 5 requires grad; a batch is data"):
        list(fastprep.Loader(_GradSamples(), 4, threads=threads))


@pytest.mark.parametrize("bad,match", [
    ([(1, None), (2, None)], r"sample\[1\] holds NoneType across the batch"),
    ([(1, None), (2, 1.5)], r"sample\[1\] holds NoneType, float across the batch"),
])
def test_fields_default_collate_cannot_batch_are_named(bad, match):
    with pytest.raises(TypeError, match=match):
        compact_collate(bad)


def test_a_label_field_takes_only_ints():
    with pytest.raises(ValueError, match=r"sample\[1\] of sample 1 is str 'cat', but the field is a label"):
        compact_collate([(1, 1), (2, "cat")])
    with pytest.raises(ValueError, match=r"sample\[0\]: labels in \[0, 36893488147419103232\] do not fit in int64"):
        compact_collate([(0,), (2**65,)])


def test_non_tensor_fields_survive_expand_and_moves():
    batch = compact_collate([(torch.zeros(3, 2, 2, dtype=torch.uint8), "cat", {"id": "a"}),
                             (torch.ones(3, 2, 2, dtype=torch.uint8), "dog", {"id": "b"})])
    images, names, meta = batch.expand()
    assert names == ["cat", "dog"] and meta == {"id": ["a", "b"]}
    assert images.dtype == torch.float32 and images[1].max() == 1 / 255
    moved = batch.to("cpu")
    assert moved.data[1] == ["cat", "dog"]
    assert repr(moved) == "CompactBatch(('image(2, 3, 2, 2):torch.uint8', 'list', {'id': 'list'}), nbytes=24)"


def test_expand_matches_the_float_pipeline():
    samples = _samples()
    batch = compact_collate(samples)
    images, masks, labels = batch.expand()
    ref = torch.stack([s[0] for s in samples]).float() / 255
    torch.testing.assert_close(images, ref, atol=0.5 / 255, rtol=0)  # within half a uint8 level
    assert torch.equal(masks, torch.stack([s[1] for s in samples]))
    assert labels.dtype == torch.int64 and labels.tolist() == [0, 7, 14, 21]
    mean, std = [0.5, 0.4, 0.3], [0.2, 0.25, 0.3]
    norm, _, onehot = batch.expand(mean=mean, std=std, channels_last=True, num_classes=22,
                                   dtype=torch.float16)
    expected = (ref - torch.tensor(mean).view(1, 3, 1, 1)) / torch.tensor(std).view(1, 3, 1, 1)
    torch.testing.assert_close(norm.float(), expected, atol=2e-2, rtol=1e-2)
    assert norm.is_contiguous(memory_format=torch.channels_last) and norm.dtype == torch.float16
    assert onehot.shape == (4, 22) and onehot[1, 7] == 1 and onehot.sum() == 4
    with pytest.raises(ValueError, match="expected a floating dtype, got torch.int32"):
        batch.expand(dtype=torch.int32)


def test_nbytes_of_the_target_pipeline():
    samples = [(torch.zeros(3, 256, 256, dtype=torch.uint8), 3) for _ in range(256)]
    batch = compact_collate(samples)
    assert batch.nbytes == 256 * (3 * 256 * 256 + 1)  # ~197 KB a sample
    assert batch.nbytes_expanded == 256 * (3 * 256 * 256 * 4 + 8)  # ~786 KB as float32 + int64
    masks = compact_collate([(torch.zeros(5, 13, dtype=torch.bool),)] * 2)
    assert masks.nbytes == 2 * 5 * 2 and masks.nbytes_expanded == 2 * 5 * 13


def test_pin_memory_protocol_is_what_the_dataloader_calls(monkeypatch):
    from torch.utils.data._utils.pin_memory import pin_memory as loader_pin
    calls = []
    monkeypatch.setattr(CompactBatch, "pin_memory", lambda self, device=None: calls.append(self) or self)
    batch = compact_collate(_samples())
    assert loader_pin(batch) is batch and calls == [batch]
    assert loader_pin([batch, batch]) == [batch, batch] and len(calls) == 3


@pytest.mark.skipif(not torch.cuda.is_available(), reason="this torch build cannot pin memory (no CUDA)")
def test_real_pinning():
    pinned = compact_collate(_samples()).pin_memory()
    assert all(t.is_pinned() for t in pinned.tensors())


class _Indexed(Dataset):
    def __len__(self):
        return 24

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return (torch.randint(0, 256, (3, 5, 5), dtype=torch.uint8, generator=g),
                torch.rand(5, 5, generator=g) < 0.5, i)


def _shared_flag_collate(samples):
    batch = compact_collate(samples)
    return batch, batch.data[0].is_shared()


@pytest.mark.parametrize("workers,context,persistent", [(0, None, False), (2, "fork", False),
                                                         (2, "spawn", True)])
def test_dataloader_workers_give_complete_ordered_shared_batches(workers, context, persistent):
    loader = DataLoader(_Indexed(), batch_size=5, num_workers=workers, multiprocessing_context=context,
                        persistent_workers=persistent, collate_fn=_shared_flag_collate)
    for _epoch in range(2 if persistent else 1):
        seen = []
        for batch, shared in loader:
            assert isinstance(batch, CompactBatch)
            assert shared == (workers > 0)  # written into shared memory inside the worker
            images, masks, labels = batch.expand(scale=1.0)
            for j, i in enumerate(labels.tolist()):
                ref = _Indexed()[i]
                assert torch.equal(images[j], ref[0].float()) and torch.equal(masks[j], ref[1])
            seen += labels.tolist()
        assert seen == list(range(24))


class _Images(torch.utils.data.Dataset):
    def __len__(self):
        return 48

    def __getitem__(self, i):
        return torch.full((3, 16, 16), i, dtype=torch.uint8), torch.arange(20) % (i + 2) == 0, i


@pytest.mark.parametrize("start", ["fork", "spawn"])
def test_reuse_in_workers_refills_shared_slots_once_released(start):
    """DataLoader workers refill their shared-memory slots once batches are released, and the
    batches stay equal to fresh ones."""
    ds = _Images()
    want = list(DataLoader(ds, batch_size=4, collate_fn=compact_collate))
    loader = DataLoader(ds, batch_size=4, num_workers=2, collate_fn=CompactCollate(reuse=True),
                        multiprocessing_context=start, persistent_workers=True, prefetch_factor=2)
    fresh = []
    for _ in range(2):  # two epochs over the same workers: 24 batches
        for got, ref in zip(loader, want, strict=True):
            assert all(torch.equal(a, b) for a, b in zip(got.expand(), ref.expand(), strict=True))
            fresh.append(got._pool.fresh)
            got.release()
    # Each worker needs at most prefetch_factor + 1 slots; every other batch refills one.
    assert fresh.count(True) <= 2 * 3, fresh
    moved = [b.expand() for b in fastprep.DevicePrefetcher(loader, "cpu", release=True)]
    assert all(torch.equal(a[0], b.expand()[0]) for a, b in zip(moved, want, strict=True))


class _RecordingPool:
    def __init__(self):
        self.calls = []

    def give_batch(self, tensors):
        self.calls.append(list(tensors))


def test_release_hands_the_whole_batch_back_in_one_call():
    """A slot pool frees its slot on the call: one call per batch, or a worker could claim the slot
    between two calls and have it freed under its next batch (seen as batch 9 inside batch 7)."""
    pool = _RecordingPool()
    batch = CompactCollate()([_Images()[i] for i in range(4)])
    batch = CompactBatch(batch.data, batch.spec, pool=pool)
    tensors = batch.tensors()
    batch.release()
    batch.release()
    assert len(pool.calls) == 1 and len(pool.calls[0]) == len(tensors) == 3
    assert all(a is b for a, b in zip(pool.calls[0], tensors, strict=True))


def test_reuse_in_workers_falls_back_to_fresh_memory_when_nothing_is_released():
    got = list(DataLoader(_Images(), batch_size=4, num_workers=1, collate_fn=CompactCollate(reuse=True)))
    want = list(DataLoader(_Images(), batch_size=4, collate_fn=compact_collate))
    assert all(torch.equal(a.data[0], b.data[0]) for a, b in zip(got, want, strict=True))  # none overwritten


def _batch(side, n=2, label=0):
    return [(torch.full((3, side, side), k, dtype=torch.uint8), label) for k in range(n)]


# Batches whose shapes vary (a short last batch, images of several sizes): the buffers kept for
# reuse must stay about one batch's worth, not one per shape ever seen.
VARYING = {
    "sizes growing": [_batch(side) for side in range(8, 72, 2)],
    "a big batch, then small ones": [_batch(96)] + [_batch(side) for side in range(4, 36)],
    "short last batches": [_batch(32, n) for n in (8, 3, 8, 5, 8, 1, 8, 7)],
}


@pytest.mark.parametrize("case", list(VARYING))
def test_reuse_in_process_keeps_a_bounded_pool(case):
    collate = CompactCollate(reuse=True)
    sizes = []
    for samples in VARYING[case]:
        batch = collate(samples)
        sizes.append(batch.nbytes)
        batch.release()
        assert collate.pool.nbytes <= 2 * max(sizes[-collate.pool.RECENT:])
    again = collate(VARYING[case][-1])  # the shape just released is reused, not allocated
    assert collate.pool.nbytes < 2 * max(sizes[-collate.pool.RECENT:])
    assert torch.equal(again.data[0], compact_collate(VARYING[case][-1]).data[0])


@pytest.mark.parametrize("case", list(VARYING))
def test_reuse_in_a_worker_keeps_one_batch_per_slot(case):
    """A worker's slot keeps the buffers of its latest batch only (driven here as a worker drives
    it: claim, collate, keep_only_taken, release)."""
    from fastprep.batch._shared_slots import SharedSlots

    slots, collate = SharedSlots(), CompactCollate()
    for samples in VARYING[case]:
        pool = slots.claim(0)
        collate._batch_pool = pool
        data, _ = collate._collate(samples, "sample", top=True)
        pool.keep_only_taken()
        held = slots._buffers[(0, pool.slot)]
        assert sorted(t.nbytes for t in held.values()) == sorted(t.nbytes for t in (data[0], data[1]))
        pool.give_batch([])


class _Held(TensorHolder):
    """A field holding one tensor, whose to() gives a view of it (another tensor, the same memory)."""

    def __init__(self, t):
        self.t = t

    def tensors(self):
        return [self.t]

    def map(self, fn):
        return _Held(fn(self.t))

    @property
    def nbytes(self):
        return self.t.numel() * self.t.element_size() + 1000  # its own count, not its tensor's

    def to(self, device, non_blocking=False):
        return self.t.to(device, non_blocking=non_blocking)[1:]


def test_a_tensor_holder_field_is_listed_mapped_counted_and_linked_by_storage():
    """CompactBatch's one leaf protocol (WindowBatch's window cuts use it): a TensorHolder's tensors
    are the batch's; to() makes a plain CompactBatch of what the holder gives, released with the
    batch when it shares memory with it, though no tensor of it is one of the batch's objects."""
    held = torch.arange(6, dtype=torch.uint8)
    batch = CompactBatch((_Held(held), "a name"), (Leaf("image"), Leaf("other")))
    assert [t is held for t in batch.tensors()] == [True] and batch.nbytes == 6 + 1000
    cloned = batch.clone()
    assert type(cloned) is CompactBatch and isinstance(cloned.data[0], _Held) and cloned.data[0].t is not held
    moved = batch.to("cpu")
    assert type(moved) is CompactBatch and moved.data[0].tolist() == [1, 2, 3, 4, 5]
    batch.release()
    assert moved.released and not cloned.released


def test_a_label_column_in_process_is_the_narrowed_array_itself(monkeypatch):
    # one torch call (from_numpy) where torch.empty + copy_ each gave the GIL up: behind a Loader's
    # busy threads, each waited up to the switch interval to take it back
    import fastprep.batch._collate as collate  # noqa: PLC0415

    def refused(*args, **kwargs):
        raise AssertionError("a label column in-process needs no buffer of its own")

    monkeypatch.setattr(collate, "_alloc", refused)
    column, leaf = CompactCollate().collate_field([3, 200, 7], "field 1", "label")
    assert leaf.role == "label" and column.dtype == torch.uint8 and column.tolist() == [3, 200, 7]
    column[0] = 9  # writable, its own memory
    assert CompactCollate().collate_field([-1, 2**40], "f", "label")[0].tolist() == [-1, 2**40]


def test_every_pool_a_batch_hands_back_to_is_a_declared_batch_pool():
    """The hand-off is one declared interface (compact.BatchPool), not a duck type found by getattr."""
    from fastprep.batch._collate import BufferPool
    from fastprep.batch._compact import BatchPool
    from fastprep.batch._shared_slots import SlotBuffers
    from fastprep.batch._slots import _SlotReturn

    for pool in (BufferPool, SlotBuffers, _SlotReturn):
        assert BatchPool in pool.__mro__ and isinstance(pool.release_after_copy, bool)  # declared, not duck-typed
    assert SlotBuffers.release_after_copy and not BufferPool.release_after_copy
