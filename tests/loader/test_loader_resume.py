"""Resume is a position, not an epoch number (issue 31): load_state_dict, then set_epoch of the
checkpoint's epoch keeps the position; another epoch drops it with a warning. The README's epoch loop
and docs/loader.md's checkpoint example run as written over a loader that records what it delivers,
and a table of call orders x loader settings compares every resumed epoch with a fresh Loader's."""

import re
import types
import warnings
from pathlib import Path

import pytest
import torch
from torch.utils.data import DistributedSampler

import fastprep
from fastprep import transforms as T
from fastprep.loader import ResumePositionDropped
from fastprep.tools.bench._pipelines import SyntheticImages

pytestmark = pytest.mark.one_backend

ROOT = Path(__file__).resolve().parents[2]
N = 13  # 13 samples in batches of 3: a partial last batch (drop_last matters)


def _tf():
    return T.seed_workload(24, layout="HWC")


def _images(n=N):
    return SyntheticImages(n, None, pool=3, size=40)  # labels: the dataset index


class Recording(fastprep.Loader):
    """A Loader that logs (epoch, labels, images) of every batch it hands to the loop."""

    log: list = []

    def __iter__(self):
        epoch = self.epoch
        for batch in super().__iter__():
            self.log.append((epoch, [int(x) for x in batch.data[1]], batch.data[0].clone()))
            yield batch


def _block(page: str, starts: str) -> str:
    """The ```python block of `page` whose code starts with `starts`, as written."""
    blocks = re.findall(r"^```python\n(.*?)^```", (ROOT / page).read_text(), re.S | re.M)
    found = [b for b in blocks if starts in b]
    assert found, f"{page} has no python block with {starts!r}"
    return found[0]


def _epoch_samples(log, epoch):
    return [x for e, labels, _ in log if e == epoch for x in labels]


def test_the_readme_epoch_loop_after_load_state_dict_continues_the_interrupted_epoch():
    block = _block("README.md", "loader.set_epoch(epoch)")
    loop = block[block.index("for epoch in range("):]  # the loop, verbatim (its Loader is made below)
    Recording.log = []
    loader = Recording(_images(12), 4, transform=_tf(), shuffle=True, seed=3)
    it = iter(loader)
    next(it)
    next(it)  # 8 of epoch 0's 12 samples received, then the job stops
    state = loader.state_dict()
    it.close()
    resumed = Recording(_images(12), 4, transform=_tf(), shuffle=True)
    resumed.load_state_dict(state)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # set_epoch(0) keeps the position: no warning
        exec(compile(loop, "README.md", "exec"), {"loader": resumed})
    assert sorted(_epoch_samples(Recording.log, 0)) == list(range(12))  # each once: 8 + 4, not 8 + 12
    assert sorted(_epoch_samples(Recording.log, 1)) == list(range(12))
    fresh = fastprep.Loader(_images(12), 4, transform=_tf(), shuffle=True, seed=3)
    want = [b.data[0].clone() for b in fresh]
    got = [images for e, _, images in Recording.log if e == 0]
    assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))


def test_the_docs_checkpoint_example_delivers_each_sample_of_the_interrupted_epoch_once(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    block = _block("docs/loader.md", "def train(loader, first_epoch")
    Recording.log = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        exec(compile(block, "docs/loader.md", "exec"),
             {"fastprep": types.SimpleNamespace(Loader=Recording), "dataset": _images(12), "train_tf": _tf()})
    assert sorted(_epoch_samples(Recording.log, 0)) == list(range(12))
    assert sorted(_epoch_samples(Recording.log, 1)) == list(range(12))  # 4 before the checkpoint, 8 after
    assert len(Recording.log) == 3 + 1 + 2


def _loader(settings, seed=None):
    threads, order, drop_last = settings
    items = _images()
    sampler = DistributedSampler(items, num_replicas=2, rank=1, shuffle=True, seed=5) if order == "sampler" else None
    return fastprep.Loader(items, 3, transform=_tf(), shuffle=order == "shuffle", sampler=sampler,
                           drop_last=drop_last, threads=threads, seed=seed)


def _batches(loader):
    return [(b.data[0].clone(), [int(x) for x in b.data[1]]) for b in loader]


def _same(a, b):
    return len(a) == len(b) and all(x[1] == y[1] and torch.equal(x[0], y[0]) for x, y in zip(a, b))


SETTINGS = [(threads, order, drop_last) for threads in (1, 2) for order in ("in order", "shuffle", "sampler")
            for drop_last in (False, True)]


@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: f"threads={s[0]}-{s[1]}-drop_last={s[2]}")
def test_every_order_of_calls_resumes_or_restarts_as_a_fresh_loader(settings):
    source = _loader(settings, seed=11)
    source.set_epoch(4)
    whole = _batches(source)  # epoch 4, whole (the sampler's pass for epoch 4)
    source.set_epoch(4)
    it = iter(source)
    head = _batches(next(it) for _ in range(2))
    state = source.state_dict()  # mid-epoch: 2 batches received
    it.close()
    assert state["position"] == 6 and _same(head, whole[:2])
    other = _loader(settings, seed=11)
    other.set_epoch(6)
    epoch6 = _batches(other)

    def resumed(*calls):
        loader = _loader(settings, seed=99)
        for call, arg in calls:
            getattr(loader, call)(arg)
        return loader

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _same(_batches(resumed(("load_state_dict", state))), whole[2:])  # load, then iterate
        assert _same(_batches(resumed(("load_state_dict", state), ("set_epoch", 4))), whole[2:])
        assert _same(_batches(resumed(("set_epoch", 6), ("load_state_dict", state))), whole[2:])
        loaded = resumed(("load_state_dict", state), ("set_epoch", 4))
        assert loaded.state_dict() == state  # a checkpoint before iterating keeps the position (and pass)
    if whole[2:]:  # samples of epoch 4 were left: dropping them is said
        with pytest.warns(ResumePositionDropped, match=r"at sample 6 of epoch 4 .* epoch 6 starts from its start"):
            restarted = resumed(("load_state_dict", state), ("set_epoch", 6))
    else:  # the checkpoint was at the epoch's end (the sampler's 7 samples, drop_last): nothing is lost
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            restarted = resumed(("load_state_dict", state), ("set_epoch", 6))
    assert _same(_batches(restarted), epoch6)
    assert sorted(x for _, labels in head + whole[2:] for x in labels) == sorted(x for _, ls in whole for x in ls)


def test_a_checkpoint_at_the_end_of_an_epoch_moves_to_the_next_without_a_warning():
    loader = fastprep.Loader(_images(), 3, transform=_tf(), seed=1)
    _batches(loader)
    state = loader.state_dict()
    resumed = fastprep.Loader(_images(), 3, transform=_tf())
    resumed.load_state_dict(state)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        resumed.set_epoch(1)  # nothing of epoch 0 was left
    fresh = fastprep.Loader(_images(), 3, transform=_tf(), seed=1)
    fresh.set_epoch(1)
    assert _same(_batches(resumed), _batches(fresh))
