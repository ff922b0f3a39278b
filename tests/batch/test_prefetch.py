"""DevicePrefetcher on CPU (exact passthrough); the CUDA stream path needs a GPU."""

import multiprocessing
from collections import namedtuple

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from fastprep import CompactBatch, DevicePrefetcher, compact_collate

from helpers.dataloaders import Keeping

pytestmark = pytest.mark.one_backend

Pair = namedtuple("Pair", "x y")


def test_passthrough_keeps_every_structure_and_value():
    batches = [torch.arange(3), (torch.ones(2), 5), [torch.zeros(1)], {"a": torch.full((2,), 7)},
               Pair(torch.eye(2), "tag")]
    out = list(DevicePrefetcher(batches, "cpu"))
    assert len(out) == len(batches)
    for got, want in zip(out, batches):
        assert type(got) is type(want)
        flat_got = got if isinstance(got, torch.Tensor) else (list(got.values()) if isinstance(got, dict) else list(got))
        flat_want = want if isinstance(want, torch.Tensor) else (list(want.values()) if isinstance(want, dict) else list(want))
        if isinstance(got, torch.Tensor):
            assert got is want  # .to(cpu) of a cpu tensor is the tensor itself: no copy
        else:
            for g, w in zip(flat_got, flat_want):
                assert (g is w) if isinstance(g, torch.Tensor) else g == w


def test_expand_applied_to_compact_batches():
    samples = [(torch.full((1, 2, 2), 255, dtype=torch.uint8), 3)] * 2
    batches = [compact_collate(samples)] * 3
    out = list(DevicePrefetcher(batches, "cpu", depth=1, expand=True))
    assert len(out) == 3 and torch.equal(out[0][0], torch.ones(2, 1, 2, 2))
    custom = list(DevicePrefetcher(batches, "cpu", expand=lambda b: b.expand(num_classes=4)))
    assert custom[0][1].shape == (2, 4)
    raw = list(DevicePrefetcher(batches, "cpu"))
    assert isinstance(raw[0], CompactBatch)


@pytest.mark.parametrize("expand", [False, None, np.False_])
def test_expand_false_moves_compact_batches_without_expanding(expand):
    samples = [(torch.full((1, 2, 2), 255, dtype=torch.uint8), 3)] * 2
    batches = [compact_collate(samples) for _ in range(3)]
    out = list(DevicePrefetcher(batches, "cpu", expand=expand, release=False))
    assert [type(b) for b in out] == [CompactBatch] * 3
    assert out[0].roles == ("image", "label") and torch.equal(out[0].data[0], batches[0].data[0])
    assert torch.equal(list(DevicePrefetcher(batches, "cpu", expand=np.True_))[0][0], torch.ones(2, 1, 2, 2))


def test_expand_true_names_a_batch_that_is_not_compact():
    with pytest.raises(TypeError, match="expand=True expands CompactBatches .* got a Tensor"):
        list(DevicePrefetcher([torch.zeros(2)], "cpu", expand=True))


def test_len_follows_the_loader():
    assert len(DevicePrefetcher([1, 2, 3], "cpu")) == 3
    with pytest.raises(TypeError):
        len(DevicePrefetcher(iter([1]), "cpu"))


def test_loader_exception_reaches_the_consumer_in_order():
    def failing():
        yield torch.zeros(1)
        yield torch.ones(1)
        raise OSError("disk gone")

    got = []
    with pytest.raises(OSError, match="disk gone"):
        for b in DevicePrefetcher(failing(), "cpu", depth=1):
            got.append(b)
    assert [b.item() for b in got] == [0.0, 1.0]


class _Tracked:
    """An iterable whose iterator records how far it was read and whether it was shut down."""

    def __init__(self):
        self.read = 0
        self.shut = False

    def __iter__(self):
        outer = self

        class It:
            def __next__(self):
                outer.read += 1
                return torch.tensor(outer.read)

            def _shutdown_workers(self):
                outer.shut = True

        return It()


def test_early_stop_cleans_up_and_reads_only_depth_ahead():
    loader = _Tracked()
    pf = iter(DevicePrefetcher(loader, "cpu", depth=3))
    first = next(pf)
    assert first.item() == 1 and loader.read == 3
    pf.close()  # what `break` out of a for loop does once the generator is collected
    assert loader.shut


def test_stops_real_dataloader_workers_early():
    loader = Keeping(DataLoader(list(range(100)), batch_size=2, num_workers=2))
    pf = iter(DevicePrefetcher(loader, "cpu"))
    next(pf)
    workers = multiprocessing.active_children()
    assert len(workers) == 2 and all(w.is_alive() for w in workers)
    pf.close()
    assert not any(w.is_alive() for w in workers)  # stopped by close(), the iterator still referenced

@pytest.mark.parametrize("kwargs,match", [({"depth": 0}, "depth to be an int >= 1, got 0"),
                                          ({"depth": 1.5}, "got 1.5"),
                                          ({"depth": True}, "depth to be an int >= 1, got True"),
                                          ({"expand": "yes"}, "expand to be None, a bool or a callable, got 'yes'"),
                                          ({"expand": 1}, "expand to be None, a bool or a callable, got 1"),
                                          ({"release": "no"}, "expected release to be a bool, got 'no'"),
                                          ({"release": None}, "expected release to be a bool, got None")])
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        DevicePrefetcher([], "cpu", **kwargs)


@pytest.mark.parametrize("device,match", [
    ("gpu", "bad device 'gpu'"),
    (object(), "bad device <object"),
    pytest.param("cuda", "device='cuda' but CUDA is not available", marks=pytest.mark.skipif(
        torch.cuda.is_available(), reason="CUDA is available here")),
    pytest.param("cuda:99", "CUDA", marks=pytest.mark.skipif(
        torch.cuda.device_count() > 99, reason="a machine with 100 GPUs")),
])
def test_bad_device_is_named_before_any_batch_moves(device, match):
    with pytest.raises(ValueError, match=match):
        DevicePrefetcher([1, 2], device)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the stream path needs a CUDA device")
def test_cuda_copies_on_a_side_stream_and_expands_on_device():
    samples = [(torch.randint(0, 256, (3, 8, 8), dtype=torch.uint8), torch.rand(8, 8) < 0.5, 1)] * 4
    batches = [compact_collate(samples).pin_memory() for _ in range(5)]
    for images, masks, labels in DevicePrefetcher(batches, "cuda", expand=True):
        assert images.is_cuda and masks.is_cuda and labels.is_cuda
        torch.testing.assert_close(images.cpu(), torch.stack([s[0] for s in samples]).float() / 255)
        assert torch.equal(masks.cpu(), torch.stack([s[1] for s in samples]))


def test_reuse_recycles_batch_buffers_through_the_prefetcher():
    from fastprep import CompactCollate
    collate = CompactCollate(reuse=True)
    samples = [[(torch.full((1, 2, 2), k, dtype=torch.uint8), k) for _ in range(3)] for k in range(5)]
    seen_ptrs, values = set(), []
    for batch in DevicePrefetcher(map(collate, samples), "cpu", depth=1, release=True):
        seen_ptrs.add(batch.data[0].data_ptr())
        values.append(int(batch.data[0][0, 0, 0, 0]))
    assert values == [0, 1, 2, 3, 4]
    assert len(seen_ptrs) <= 2  # one buffer in flight, one with the consumer: recycled after that


def test_released_batch_cannot_be_used():
    from fastprep import compact_collate
    batch = compact_collate([(torch.zeros(1, 1, 1, dtype=torch.uint8), 1)])
    batch.release()
    with pytest.raises(RuntimeError, match="was released"):
        batch.tensors()
