"""fastprep.Loader from one epoch to the next (issue 32 item 2): a whole pass hands its slot ring to
the next (slots already paged in, the layout not collated again), with the bits of a fresh Loader
for every epoch; a batch of the last pass is stale once the next pass asks for its first; samples of
another layout in the next epoch (progressive resizing) get slots of their own; a batch's chunks are
all counted before any runs (else a fast first chunk marked a batch done half written)."""

import threading

import pytest
import torch

import fastprep
import fastprep.batch._slots as slots
from fastprep import transforms as T
from fastprep.loader._pool import ThreadPool
from fastprep.tools.bench._pipelines import SyntheticImages

pytestmark = pytest.mark.one_backend


def _tf(size=24):
    return T.seed_workload(size, layout="HWC")


def _images(n=12):
    return SyntheticImages(n, None, pool=3, size=40)


def _pass(loader):
    return [(b.data[0].clone(), b.data[1].clone()) for b in loader]


def _same(a, b):
    return len(a) == len(b) and all(torch.equal(x[0], y[0]) and torch.equal(x[1], y[1]) for x, y in zip(a, b))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize(("n", "shuffle", "drop_last"), [(4, False, False), (12, True, False), (13, True, True)])
def test_epochs_back_to_back_reuse_the_slots_with_a_fresh_loaders_bits(threads, n, shuffle, drop_last):
    loader = fastprep.Loader(_images(n), 4, transform=_tf(), shuffle=shuffle, drop_last=drop_last, threads=threads,
                             seed=5)
    storage = None
    for epoch in range(3):
        loader.set_epoch(epoch)
        got = _pass(loader)
        ring = loader.spare_ring.ring
        if storage is None:
            storage = [t.data_ptr() for t in ring.storage(0) if t is not None]
        assert [t.data_ptr() for t in ring.storage(0) if t is not None] == storage  # the same slots
        fresh = fastprep.Loader(_images(n), 4, transform=_tf(), shuffle=shuffle, drop_last=drop_last, seed=5)
        fresh.set_epoch(epoch)
        assert _same(got, _pass(fresh))


def test_the_last_batch_of_a_pass_is_stale_once_the_next_pass_asks_for_its_first():
    loader = fastprep.Loader(_images(8), 4, transform=_tf(), seed=0, threads=1)
    last = list(loader)[-1]
    assert last.data[0].shape[0] == 4  # valid until the next batch is asked for
    it = iter(loader)
    first = next(it)
    with pytest.raises(RuntimeError, match="this batch was released"):
        last.data  # noqa: B018 (reading it is the test)
    last.release()  # a late release of a stale batch frees nothing the new pass uses
    second = next(it)
    assert first.released and not second.released
    assert not loader.spare_ring and sum(1 for _ in it) == 0


def test_a_stale_lease_does_not_free_a_slot_in_use():
    ring = slots.SlotRing(2, 4, pin=False)
    slot = ring.take()
    stale = ring.lease(slot)
    ring.give(slot, stale)
    again = ring.take()
    assert again == 1 and ring.take() == slot  # both taken: slot 0 by its new lease
    ring.give(slot, stale)  # the old batch's release, late
    assert not ring.has_free()


def test_another_layout_in_the_next_epoch_gets_slots_of_its_own():
    tf = _tf(24)
    loader = fastprep.Loader(_images(8), 4, transform=tf, seed=3, threads=2)
    assert _pass(loader)[0][0].shape[-1] == 24
    loader.transform = _tf(16)  # progressive resizing between epochs
    loader.set_epoch(1)
    got = _pass(loader)
    fresh = fastprep.Loader(_images(8), 4, transform=_tf(16), seed=3)
    fresh.set_epoch(1)
    assert got[0][0].shape[-1] == 16 and _same(got, _pass(fresh))


def test_a_batch_is_done_only_when_every_chunk_ran():
    class Job:
        def __init__(self):
            self.pending, self.done = 0, threading.Event()

        def add_chunk(self):
            self.pending += 1
            return self.pending - 1

        def chunk_done(self, error=None, chunk=None):
            self.pending -= 1
            if self.pending == 0:
                self.done.set()

    pool, job, first_ran, go = ThreadPool(1), Job(), threading.Event(), threading.Event()
    try:
        pool.submit_all(job, [first_ran.set, go.wait])
        assert first_ran.wait(5)
        assert not job.done.wait(0.05)  # the first chunk ran, the second is pending: not done
        go.set()
        assert job.done.wait(5)
    finally:
        go.set()
        pool.shutdown()


def test_the_bench_reports_one_batch_epochs_against_long_ones():
    import fastprep.tools.bench._loaders as bench_loader

    rates = bench_loader.epoch_rates(4, [1], T.seed_workload(layout="HWC"), 0.01, 2, rounds=1, step_s=0.001)
    assert rates["one-batch epochs"][1] > 0 and rates["long epochs"][1] > 0
    own = {**rates, "fastprep": {1: 10.0}, "batch op by hand": {1: 20.0}}
    aims = bench_loader.aims([], [], 1.0, "fused", own)
    value, aim = aims[f"one-batch epochs: share of {bench_loader.LONG_EPOCH}-batch epochs' rate, t=1"]
    assert value == rates["one-batch epochs"][1] / rates["long epochs"][1] and aim == ">= 90%"
    assert aims["  t=1, counting: share of the batch op called by hand"] == (0.5, ">= 90%")


def _counted(monkeypatch):
    """The keys every chunk of every Loader ran, in order."""
    import fastprep.loader._apply as apply

    ran, call = [], apply.ChunkRunner.__call__

    def counting(self, job, a, b, stopping):
        ran.extend((self.epoch, k) for k in job.indices[a:b])
        return call(self, job, a, b, stopping)

    monkeypatch.setattr(apply.ChunkRunner, "__call__", counting)
    return ran


def _fresh(epoch, **kwargs):
    loader = fastprep.Loader(_images(12), 4, transform=kwargs.pop("transform", None) or _tf(), seed=2, **kwargs)
    loader.set_epoch(epoch)
    return _pass(loader)


@pytest.mark.parametrize("threads", [1, 2])
def test_the_next_epochs_first_batch_is_made_ahead_and_used_once(threads, monkeypatch):
    ran = _counted(monkeypatch)
    loader = fastprep.Loader(_images(12), 4, transform=_tf(), shuffle=True, seed=2, threads=threads)
    got = []
    for epoch in range(3):  # the README's loop
        loader.set_epoch(epoch)
        got.append(_pass(loader))
    ahead = loader.spare_ring.ahead
    assert ahead is not None and ahead.indices == loader.indices(3)[:4]  # made while epoch 2 ended
    assert sorted(ran) == sorted([(e, k) for e in range(3) for k in range(12)] + [(3, k) for k in ahead.indices])
    for epoch in range(3):
        assert _same(got[epoch], _fresh(epoch, shuffle=True))


@pytest.mark.parametrize("change", ["another epoch", "another transform", "another seed", "resume", "no set_epoch"])
def test_a_pass_other_than_the_one_made_ahead_drops_it_and_matches_a_fresh_loader(change, monkeypatch):
    loader = fastprep.Loader(_images(12), 4, transform=_tf(), shuffle=True, seed=2)
    loader.set_epoch(0)
    head = _pass(loader)
    assert loader.spare_ring.ahead is not None
    epoch, kwargs = 1, {"shuffle": True}
    if change == "another epoch":
        epoch = 5
    elif change == "another transform":
        loader.transform = kwargs["transform"] = _tf(16)
    elif change == "another seed":
        loader.seed = 3
    elif change == "resume":
        source = fastprep.Loader(_images(12), 4, transform=_tf(), shuffle=True, seed=2)
        source.set_epoch(1)
        it = iter(source)
        next(it)
        loader.load_state_dict(source.state_dict())
        it.close()
    ran = _counted(monkeypatch)
    if change != "no set_epoch":
        loader.set_epoch(epoch)
    else:
        epoch = 0  # iterated again without set_epoch: epoch 0 again
    got = _pass(loader)
    if change == "another seed":
        want = fastprep.Loader(_images(12), 4, transform=_tf(), shuffle=True, seed=3)
        want.set_epoch(1)
        want = _pass(want)
    else:
        want = _fresh(epoch, **kwargs)
    assert _same(got, want[1:] if change == "resume" else want)
    assert len(ran) >= 12 - 4 * (change == "resume")  # every batch made in this pass: nothing taken from ahead
    assert change != "no set_epoch" or _same(got, head)


@pytest.mark.parametrize("kwargs", [{"prestart": False}, {"sampler": list(range(12))}])
def test_nothing_is_made_ahead_without_prestart_or_with_a_sampler(kwargs, monkeypatch):
    ran = _counted(monkeypatch)
    loader = fastprep.Loader(_images(12), 4, transform=_tf(), seed=2, **kwargs)
    for epoch in range(2):
        loader.set_epoch(epoch)
        _pass(loader)
    assert loader.spare_ring.ahead is None and len(ran) == 24


class _FailsOnce(SyntheticImages):
    """Raises on its `at`-th load only (the batch made ahead for the next epoch, when `at` is one
    past an epoch's items)."""

    def __init__(self, n, at):
        super().__init__(n, None, pool=3, size=40)
        self.calls, self.at = 0, at

    def load_raw(self, i):
        self.calls += 1
        if self.calls == self.at:
            raise KeyError(f"load {self.at} fails")
        return super().load_raw(i)


def test_a_batch_made_ahead_that_fails_is_made_again_by_its_pass_and_no_thread_outlives_a_pass():
    loader = fastprep.Loader(_FailsOnce(12, at=13), 4, transform=_tf(), seed=2, threads=1)
    got = []
    for epoch in range(2):
        loader.set_epoch(epoch)
        got.append(_pass(loader))  # epoch 0 ends without the error of the batch made ahead
        assert not [t for t in threading.enumerate() if t.name.startswith("fastprep-loader")]
    assert _same(got[1], _fresh(1))
    assert loader.dataset.calls == 12 + 1 + 12 + 4  # the failed batch made again by epoch 1, then epoch 2's ahead


def _scheduled(change, prestart):
    """Two epochs, the crop's parameter changed in place between them (an augmentation schedule)."""
    loader = fastprep.Loader(_images(12), 4, transform=_tf(), shuffle=True, seed=2, prestart=prestart)
    loader.set_epoch(0)
    _pass(loader)
    assert (loader.spare_ring.ahead is not None) == prestart  # made ahead: the transform is fastprep's
    crop = loader.transform.transforms[0]
    if change == "padding":
        crop.padding = (3, 3, 3, 3)
    else:
        crop.size = (16, 16)
    loader.set_epoch(1)
    return loader


@pytest.mark.parametrize("change", ["padding", "size"])
def test_a_fastprep_transform_changed_in_place_between_epochs_drops_the_batch_made_ahead(change, monkeypatch):
    """The next epoch's first batch has the transform's new parameters: prestart changes no bits."""
    want = _pass(_scheduled(change, False))
    loader = _scheduled(change, True)
    ran = _counted(monkeypatch)
    got = _pass(loader)
    assert sum(e == 1 for e, _ in ran) == 12  # epoch 1 made whole: nothing taken from ahead
    assert _same(got, want)


class _Foreign(torch.nn.Module):
    """A transform fastprep cannot see into (it may change between epochs)."""

    def forward(self, sample):
        return sample


class _WithEpochs(SyntheticImages):
    def set_epoch(self, epoch):
        self.epoch = epoch


@pytest.mark.parametrize("case", ["foreign transform", "dataset with set_epoch"])
def test_nothing_is_made_ahead_when_a_change_between_epochs_could_go_unseen(case, monkeypatch):
    ran = _counted(monkeypatch)
    if case == "foreign transform":
        loader = fastprep.Loader(_images(12), 4, transform=_Foreign(), seed=2)
    else:
        loader = fastprep.Loader(_WithEpochs(12, None, pool=3, size=40), 4, transform=_tf(), seed=2)
    for epoch in range(2):
        loader.set_epoch(epoch)
        _pass(loader)
    assert loader.spare_ring.ahead is None and len(ran) == 24
