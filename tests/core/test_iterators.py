"""fastprep.core._iterators: a consumer that stops early stops its loader's workers or threads now
(DevicePrefetcher, fastprep.monitor and the tools' measurements all call it), but keeps the workers
a DataLoader keeps across epochs (persistent_workers)."""

import multiprocessing

import pytest
from torch.utils.data import DataLoader

import fastprep
from fastprep.core._iterators import stop_iterator

from helpers.dataloaders import Keeping

pytestmark = pytest.mark.one_backend


def _workers():
    return [p for p in multiprocessing.active_children() if p.is_alive()]


@pytest.mark.parametrize("how", ["stop_iterator", "monitor"])
def test_a_dataloaders_workers_stop_when_the_consumer_stops(how):
    loader = DataLoader(list(range(100)), batch_size=2, num_workers=2)
    if how == "stop_iterator":
        it = iter(loader)
        next(it)
        workers = _workers()
        stop_iterator(it)  # `it` is still referenced: only the explicit stop can have ended them
    else:
        keeping = Keeping(loader)  # held here: the monitor dropped after the break cannot drop its iterator
        for _batch in fastprep.monitor(keeping, live=False, report=None):
            workers = _workers()
            break
    assert len(workers) == 2
    assert not any(w.is_alive() for w in workers)


def test_persistent_workers_are_kept_for_the_next_epoch():
    loader = DataLoader(list(range(8)), batch_size=2, num_workers=2, persistent_workers=True)
    it = iter(loader)
    next(it)
    workers = _workers()
    stop_iterator(it)
    assert len(workers) == 2 and all(w.is_alive() for w in workers)
    assert [int(b[0]) for b in loader] == [0, 2, 4, 6]  # the next epoch runs on the same workers


def test_a_generator_based_loader_is_closed():
    closed = []

    def batches():
        try:
            yield from range(10)
        finally:
            closed.append(True)

    it = batches()
    next(it)
    stop_iterator(it)
    assert closed == [True]
