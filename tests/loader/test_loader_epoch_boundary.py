"""What a fastprep.Loader does at an epoch boundary (issue 40): the batch made ahead for the next
pass is handed off (its label column collated) before that pass's threads start, so its torch calls
do not wait for the GIL behind them; an epoch's shuffled order, drawn for the batch made ahead, is
not drawn again by its pass, and each caller gets keys of its own."""

import threading

import pytest
import torch

import fastprep
import fastprep.batch._slots as slots
from fastprep import transforms as T
from fastprep.tools.bench._pipelines import SyntheticImages

pytestmark = pytest.mark.one_backend


def _loader(n, threads=2, **kwargs):
    return fastprep.Loader(SyntheticImages(n, None, pool=3, size=40), 4,
                           transform=T.seed_workload(24, layout="HWC"), threads=threads, seed=7, **kwargs)


def _pass(loader):
    return [(b.data[0].clone(), b.data[1].clone()) for b in loader]


def _loader_threads_alive():
    return any(t.name.startswith("fastprep-loader") for t in threading.enumerate())


@pytest.mark.parametrize("threads", [1, 2])
def test_the_batch_made_ahead_is_handed_off_before_its_pass_starts_threads(monkeypatch, threads):
    hand_offs = []
    data = slots.BatchJob.data

    def recorded(job):
        hand_offs.append(_loader_threads_alive())
        return data(job)

    monkeypatch.setattr(slots.BatchJob, "data", recorded)
    loader = _loader(4, threads, shuffle=True)  # one batch an epoch
    got = []
    for epoch in range(3):
        loader.set_epoch(epoch)
        got.append(_pass(loader))
    # epoch 0 made its batch itself (threads running); epochs 1 and 2 took the batch made ahead
    assert hand_offs == [True, False, False]
    fresh = _loader(4, threads, shuffle=True)
    fresh.set_epoch(2)
    want = _pass(fresh)
    assert all(torch.equal(a, b) for a, b in zip(got[2][0], want[0]))


def test_a_pass_that_does_not_take_the_batch_made_ahead_hands_off_its_own():
    loader = _loader(4, shuffle=True)
    loader.set_epoch(0)
    _pass(loader)
    loader.set_epoch(5)  # not the epoch made ahead (1): its own first batch, made afresh
    got = _pass(loader)
    fresh = _loader(4, shuffle=True)
    fresh.set_epoch(5)
    want = _pass(fresh)
    assert len(got) == 1 and torch.equal(got[0][0], want[0][0]) and torch.equal(got[0][1], want[0][1])


def test_an_epochs_shuffle_drawn_for_the_batch_made_ahead_is_not_drawn_again(monkeypatch):
    draws = []
    randperm = torch.randperm

    def counted(n, *args, **kwargs):
        draws.append(n)
        return randperm(n, *args, **kwargs)

    monkeypatch.setattr(torch, "randperm", counted)
    loader = _loader(12, shuffle=True)
    for epoch in range(3):
        loader.set_epoch(epoch)
        _pass(loader)
    # epoch 0's pass; then each pass draws the next epoch's order for its batch made ahead, which
    # that epoch's pass reuses: 0, 1, 2, 3 (6 draws before)
    assert len(draws) == 4


def test_each_caller_gets_keys_of_its_own():
    loader = _loader(12, shuffle=True)
    keys = loader.indices(1)
    again = loader.indices(1)
    assert keys == again and keys is not again
    keys.reverse()
    assert loader.indices(1) == again
    other = _loader(12, shuffle=True)
    assert other.indices(1) == again and loader.indices(2) == other.indices(2)
