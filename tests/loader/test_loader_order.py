"""fastprep.Loader's order and lifecycle: iterable datasets (seeds by position), samplers that take
set_epoch, resume from what the consumer received, deterministic= for code that is not fastprep's,
and threads that start on the first batch and stop with the iteration."""

import gc
import itertools
import subprocess
import sys
import threading
import time

import pytest
import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler, IterableDataset, RandomSampler

import fastprep
from fastprep import transforms as T
from fastprep.tools.bench._pipelines import SyntheticImages

pytestmark = pytest.mark.one_backend


def _tf():
    return T.seed_workload(24, layout="HWC")


def _threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("fastprep-loader")]


def _images(n=20):
    return SyntheticImages(n, None, pool=3, size=40)


class Stream(IterableDataset):
    """The items of a map-style dataset, read in order (a WebDataset-style reader's shape)."""

    def __init__(self, items):
        self.items, self.epochs = items, []

    def __iter__(self):
        return (self.items.load_raw(i) for i in range(len(self.items)))

    def set_epoch(self, epoch):
        self.epochs.append(epoch)


class SizedStream(Stream):
    def __len__(self):
        return len(self.items)


def _flat(batches):
    return [(b.data[0].clone(), b.data[1].clone()) for b in batches]


def _equal(a, b):
    return len(a) == len(b) and all(torch.equal(x[0], y[0]) and torch.equal(x[1], y[1]) for x, y in zip(a, b))


@pytest.mark.parametrize("threads", [1, 2])
def test_an_iterable_dataset_gives_the_map_style_samples_by_position(threads):
    items = _images(21)
    want = _flat(fastprep.Loader(items, 4, transform=_tf(), seed=3, threads=threads))
    stream = SizedStream(items)
    loader = fastprep.Loader(stream, 4, transform=_tf(), seed=3, threads=threads)
    assert len(loader) == 6 and _equal(_flat(loader), want)
    loader.set_epoch(2)
    assert stream.epochs == [2]
    assert len(_flat(fastprep.Loader(stream, 4, transform=_tf(), seed=3, drop_last=True))) == 5


def test_an_iterable_dataset_without_a_length_and_what_it_cannot_do():
    stream = Stream(_images(6))
    loader = fastprep.Loader(stream, 4, transform=_tf(), seed=0)
    with pytest.raises(TypeError, match="len\\(\\) needs a dataset with a length; Stream has none"):
        len(loader)
    assert [len(b.data[1]) for b in loader] == [4, 2]
    with pytest.raises(TypeError, match="an iterable dataset cannot be resumed mid-epoch"):
        loader.state_dict()
    for kwargs in ({"shuffle": True}, {"sampler": [0, 1]}):
        with pytest.raises(ValueError, match="an iterable dataset \\(Stream\\) sets its own order"):
            fastprep.Loader(stream, 4, **kwargs)


class _Broken(IterableDataset):
    def __iter__(self):
        yield from _images(6).pool
        raise OSError("shard 3 is gone")


class _Tagged(Dataset):
    """Image i is filled with i."""

    def __len__(self):
        return 8

    def __getitem__(self, i):
        return torch.full((3, 8, 8), i, dtype=torch.uint8)


def test_the_error_raised_is_the_first_bad_samples_in_batch_order_whichever_thread_fails_first():
    def bad(img):
        i = int(img.flatten()[0])
        if i == 0:
            time.sleep(0.3)  # sample 0's thread fails last
        raise RuntimeError(f"bad sample {i}")

    for _ in range(3):
        with pytest.raises(RuntimeError, match=r"^bad sample 0\b") as info:
            list(fastprep.Loader(_Tagged(), 4, transform=bad, seed=0, threads=4))
        assert any("sample 0 (dataset index) in transform" in n for n in info.value.__notes__)
    assert not _threads()


def test_a_batch_job_waits_for_earlier_chunks_before_it_fails():
    from fastprep.batch._slots import BatchJob, SlotRing

    job = BatchJob([0, 1, 2], SlotRing(2, 3, pin=False))
    chunks = [job.add_chunk() for _ in range(3)]
    assert chunks == [0, 1, 2]
    job.chunk_done(RuntimeError("third"), 2)
    assert not job._done.is_set()  # chunks 0 and 1 still run: one of them may fail first in order
    job.chunk_done(None, 0)
    job.chunk_done(RuntimeError("second"), 1)
    with pytest.raises(RuntimeError, match="second"):
        job.wait()


def test_errors_of_an_iterable_name_the_position():
    def bad(img):
        raise RuntimeError("no")

    with pytest.raises(RuntimeError, match="no") as info:
        list(fastprep.Loader(Stream(_images(6)), 2, transform=bad, seed=0, threads=2))
    assert any("sample 0 (position in the epoch) in transform" in n for n in info.value.__notes__)
    with pytest.raises(OSError, match="shard 3 is gone"):
        list(fastprep.Loader(_Broken(), 2, seed=0))
    assert not _threads()


def test_set_epoch_reaches_a_distributed_sampler_and_orders_the_epoch():
    items = _images(12)
    sampler = DistributedSampler(items, num_replicas=2, rank=1, shuffle=True, seed=5)
    loader = fastprep.Loader(items, 3, transform=_tf(), sampler=sampler, seed=0)
    loader.set_epoch(3)
    assert sampler.epoch == 3
    assert [int(x) for b in loader for x in b.data[1]] == [i % 1000 for i in sampler]


def test_iterators_never_advanced_start_no_threads_and_ended_ones_leave_none():
    loader = fastprep.Loader(_images(40), 4, transform=_tf(), seed=0, threads=2)
    for _ in range(5):
        list(zip([], loader))
        list(itertools.islice(loader, 0))
        iter(loader)
    assert not _threads()
    it = iter(loader)
    next(it)
    assert len(_threads()) == 2
    it.close()
    assert not _threads()
    next(iter(loader))  # dropped at once: collected, its threads stopped
    gc.collect()
    assert not _threads()


def test_resume_at_the_end_of_an_epoch_of_a_partial_last_batch():
    loader = fastprep.Loader(_images(10), 4, transform=_tf(), seed=1)
    assert [len(b.data[1]) for b in loader] == [4, 4, 2]
    state = loader.state_dict()
    assert state["position"] == 10
    resumed = fastprep.Loader(_images(10), 4, transform=_tf())
    resumed.load_state_dict(state)
    assert list(resumed) == []
    with pytest.raises(ValueError, match="resume position 3 is not a batch boundary"):
        resumed.load_state_dict({**state, "position": 3, "consumed": 3})
        iter(resumed)


def test_resume_with_a_random_sampler_continues_the_pass_being_iterated():
    items = _images(16)
    sampler = RandomSampler(items, generator=torch.Generator().manual_seed(0))
    loader = fastprep.Loader(items, 4, transform=_tf(), sampler=sampler, seed=2)
    it = iter(loader)
    first = [next(it).clone() for _ in range(2)]
    state = loader.state_dict()
    rest = [b.clone() for b in it]
    resumed = fastprep.Loader(_images(16), 4, transform=_tf(), sampler=[0], seed=9)
    resumed.load_state_dict(state)
    got = [b.clone() for b in resumed]
    assert _equal(_flat(got), _flat(rest))
    seen = [int(x) for b in first + got for x in b.data[1]]
    assert sorted(seen) == list(range(16))  # every sample once: no fresh pass of the sampler


def test_a_one_shot_sampler_is_not_consumed_by_len():
    loader = fastprep.Loader(_images(8), 4, transform=_tf(), sampler=iter(range(8)), seed=0)
    with pytest.raises(TypeError, match="len\\(\\) needs a sampler with a length"):
        len(loader)
    assert sum(len(b.data[1]) for b in loader) == 8


class _Foreign(Dataset):
    """Items whose loading and (foreign) transform draw from torch's generator."""

    def __len__(self):
        return 12

    def __getitem__(self, i):
        return torch.rand(3) + i, i


def _noisy(x):
    return x + torch.rand(3)


def test_deterministic_gives_seed_by_index_bits_for_code_that_is_not_fastprep():
    ref = list(DataLoader(T.SeedByIndex(_Transformed(), seed=4), batch_size=3, collate_fn=fastprep.compact_collate))
    for threads in (1, 2):
        got = [b.clone() for b in fastprep.Loader(_Foreign(), 3, transform=_noisy, seed=4, threads=threads,
                                                  deterministic=True)]
        assert len(got) == len(ref) == 4 and all(torch.equal(a.data[0], b.data[0]) for a, b in zip(got, ref))
    with pytest.raises(ValueError, match="expected deterministic to be a bool, got 1"):
        fastprep.Loader(_Foreign(), 3, deterministic=1)


class _Transformed(_Foreign):
    def __getitem__(self, i):
        x, label = super().__getitem__(i)
        return _noisy(x), label


class _DrawsWhileLoading(Dataset):
    """load_raw draws through fastprep (a random choice of source): the transform's draws follow."""

    def __init__(self):
        self.items = _images(12)

    def __len__(self):
        return 12

    def load_raw(self, i):
        pick = fastprep.draw_seed() % 3
        return self.items.pool[pick], i

    def __getitem__(self, i):
        return _tf()(self.load_raw(i))


def test_draws_made_while_loading_shift_the_transforms_as_in_seed_by_index():
    ref = list(DataLoader(T.SeedByIndex(_DrawsWhileLoading(), seed=6), batch_size=4,
                          collate_fn=fastprep.compact_collate))
    got = [b.clone() for b in fastprep.Loader(_DrawsWhileLoading(), 4, transform=_tf(), seed=6, threads=2)]
    assert all(torch.equal(a.data[0], b.data[0]) for a, b in zip(got, ref)) and len(got) == len(ref) == 3


@pytest.mark.slow  # a fresh process: .ci/slow
def test_a_script_that_ends_with_a_live_iterator_exits_cleanly():
    """Its threads are stopped at interpreter exit, before teardown (they used to abort it); the
    iterator here is in a reference cycle, so only the exit handler can stop them in time."""
    code = ("import fastprep; from fastprep import transforms as T; from fastprep.tools.bench._pipelines import "
            "SyntheticImages\n"
            "tf = T.seed_workload(24, layout='HWC')\n"
            "it = iter(fastprep.Loader(SyntheticImages(4000, None, pool=3, size=64), 8, transform=tf, threads=2, "
            "seed=0))\nnext(it)\nit.cycle = [it]\n")
    for _ in range(2):
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr[-2000:]
