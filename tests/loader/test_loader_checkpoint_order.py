"""A checkpoint is self-contained (loader/_checkpoint.py): everything the epoch's order depends on
(shard window, shard table, world size, seed, epoch, position) is in state_dict, and a job resumed
under other settings replays the saved order or refuses by name. Exactly-once accounting over a
local PackedDataset of 60 numbered samples: every sample once across the ranks of a job and across
a resume at the same or another world size, with another cache_limit or shard_window; ranks whose
nodes have different caches agree on the order; set_epoch during a pass leaves that pass's position
alone."""

import collections
import itertools

import pytest
import torch

import fastprep
import fastprep.io as fio
from fastprep import transforms as T
from fastprep.tools.bench._pipelines import SyntheticImages

pytestmark = pytest.mark.one_backend

N, BATCH, STEPS = 60, 4, 2  # 2 steps of 4 on 1-4 ranks leave a rest every resumed world size below splits evenly


@pytest.fixture(scope="module")
def pack(tmp_path_factory):
    """60 samples, label i: sample i, in 20 shards of 3."""
    path = tmp_path_factory.mktemp("packs") / "numbers.packed"
    items = [(torch.full((3, 24, 24), i, dtype=torch.uint8), i) for i in range(N)]
    fio.pack(items, path, non_jpeg="raw", shard_bytes=1 << 12, progress=False)
    assert len(set(fio.PackedDataset(path).item_shards.tolist())) == 20
    return path


class Cached(fio.PackedDataset):
    """A local pack that says a node's cache_limit, as a remote one does: one whose half holds
    `windows` of the pack's largest shards (sized from the pack, whose shard bytes follow its format)."""

    def __init__(self, path, windows):
        super().__init__(path)
        self._limit = int(2 * windows * max(self.shard_sizes))

    @property
    def cache_limit(self):
        return self._limit


def cache_for(window):
    """A cache (Cached's argument) whose half holds `window` of the pack's shards."""
    return window


def _dataset(pack, cache_limit=None):
    return fio.PackedDataset(pack) if cache_limit is None else Cached(pack, cache_limit)


def _take(loader, batches=None):
    return [int(y) for b in itertools.islice(loader, batches) for y in b.data[1]]


def _job(pack, world, state=None, caches=None, **kwargs):
    """A job's ranks, one Loader each (`caches`: each node's cache_limit), the state loaded into each."""
    caches = caches or [None] * world
    loaders = [fastprep.Loader(_dataset(pack, caches[r]), BATCH, shuffle="shards", seed=3, threads=1, rank=r,
                               world_size=world, **kwargs) for r in range(world)]
    for loader in loaders:
        if state is not None:
            loader.load_state_dict(state)
        loader.set_epoch(1)
    return loaders


def _once(delivered):
    counts = collections.Counter(delivered)
    missing = sorted(set(range(N)) - set(counts))
    repeated = sorted(k for k, c in counts.items() if c > 1)
    assert (missing, repeated) == ([], []) and len(delivered) == N


CHANGES = {  # (the saved job's Loader arguments, the resumed job's), the window changing between them
    "shard_window": (dict(shard_window=2), dict(shard_window=5)),
    "cache_limit": (dict(caches=cache_for(8)), dict(caches=cache_for(12))),  # 8 and 12 shards once sized from it
    "cache_limit and shard_window": (dict(caches=cache_for(8)), dict(caches=cache_for(3), shard_window=3)),
}


@pytest.mark.parametrize("change", CHANGES)
@pytest.mark.parametrize("before, after", [(1, 1), (2, 2), (2, 1), (3, 2), (1, 4), (4, 2)])
def test_every_sample_once_across_a_resume_under_another_window(pack, before, after, change):
    saved, resumed = ({**k, "caches": [k["caches"]] * w} if "caches" in k else k
                      for k, w in zip(CHANGES[change], (before, after)))
    first = _job(pack, before, **saved)
    delivered = [y for loader in first for y in _take(loader, STEPS)]
    state = first[-1].state_dict()
    delivered += [y for loader in _job(pack, after, state, **resumed) for y in _take(loader)]
    _once(delivered)


@pytest.mark.parametrize("change", CHANGES)
def test_a_resume_under_another_window_replays_the_saved_order(pack, change):
    saved, resumed = ({**k, "caches": [k["caches"]]} if "caches" in k else k for k in CHANGES[change])
    whole = _take(_job(pack, 1, **saved)[0])
    cut = _job(pack, 1, **saved)[0]
    head = _take(cut, STEPS)
    again = _job(pack, 1, cut.state_dict(), **resumed)[0]
    assert head + _take(again) == whole  # the uninterrupted pass, exactly
    state = again.state_dict()  # the resumed pass's checkpoint keeps the saved window: a third job replays it too
    assert state["shard_window"] == cut.state_dict()["shard_window"] == cut.order.window


def test_ranks_whose_nodes_have_different_caches_agree_on_the_order(pack):
    loaders = _job(pack, 2, caches=[cache_for(8), cache_for(12)])
    assert loaders[0].order.window == loaders[1].order.window
    _once([y for loader in loaders for y in _take(loader)])


def test_the_state_dict_holds_everything_the_order_depends_on(pack):
    loader = _job(pack, 2, shard_window=2)[1]
    _take(loader, STEPS)
    state = loader.state_dict()
    assert state["seed"] == 3 and state["epoch"] == 1 and state["position"] == STEPS * BATCH
    assert (state["world_size"], state["order_world"], state["consumed"]) == (2, 2, 2 * STEPS * BATCH)
    assert (state["shuffle"], state["samples"], state["shard_window"]) == ("shards", N, 2)
    assert state["shard_table"].startswith("20 shards, crc32 ")


def test_a_state_dict_whose_order_cannot_be_made_again_is_refused_by_name(pack, tmp_path):
    loader = _job(pack, 1)[0]
    _take(loader, STEPS)
    state = loader.state_dict()
    assert state["epoch"] == 1
    items = [(torch.full((3, 24, 24), i, dtype=torch.uint8), i) for i in range(N)]
    fio.pack(items, tmp_path / "repacked", non_jpeg="raw", shard_bytes=1 << 13, progress=False)  # 12 shards of 5
    repacked = fastprep.Loader(fio.PackedDataset(tmp_path / "repacked"), BATCH, shuffle="shards", world_size=1, seed=8)
    with pytest.raises(ValueError, match=r"made with shard_table='20 shards, crc32 \w+'; this Loader has "
                                         r"shard_table='12 shards, crc32 \w+'"):
        repacked.load_state_dict(state)
    shuffled = fastprep.Loader(fio.PackedDataset(pack), BATCH, shuffle=True, world_size=1, seed=8)
    with pytest.raises(ValueError, match=r"made with shuffle='shards'; this Loader has shuffle=True"):
        shuffled.load_state_dict(state)
    shorter = fastprep.Loader(list(range(N - 1)), BATCH, world_size=1)
    with pytest.raises(ValueError, match=r"made with samples=60; this Loader has samples=59"):
        shorter.load_state_dict({**state, "shuffle": False})
    for refused in (repacked, shuffled):  # a refusal changes nothing: still at the start of epoch 0, its own seed
        assert (refused.epoch, refused.state_dict()["position"], refused.seed) == (0, 0, refused.state_dict()["seed"])
        assert refused.seed != state["seed"]


def test_a_cache_that_cannot_hold_the_window_is_refused_by_name(pack):
    small = Cached(pack, cache_for(3))
    largest = max(small.shard_sizes)
    with pytest.raises(ValueError, match=rf"shard_window=8 \(the default\).*cache_limit={small.cache_limit} holds 3: "
                                         r"pass shard_window=3 on every rank"):
        fastprep.Loader(small, BATCH, shuffle="shards", world_size=1)
    with pytest.raises(ValueError, match=rf"shard_window=4 shards.*holds 0: pass a cache_limit of at least {8 * largest}"):
        fastprep.Loader(Cached(pack, 0.5), BATCH, shuffle="shards", shard_window=4, world_size=1)


# set_epoch during a pass


def _loader(**kwargs):
    return fastprep.Loader(SyntheticImages(N, None, pool=3, size=40), 6, transform=T.seed_workload(24, layout="HWC"),
                           shuffle=True, seed=5, threads=1, **kwargs)


def _batches(iterator, count=None):
    return [(b.data[0].clone(), [int(x) for x in b.data[1]]) for b in itertools.islice(iterator, count)]


def _labels(batches):
    return [x for _, labels in batches for x in labels]


@pytest.mark.parametrize("during", [1, 0])  # set_epoch(e + 1), set_epoch(e) again
def test_set_epoch_during_a_pass_leaves_its_position_alone(during):
    loader = _loader()
    it = iter(loader)
    head = _batches(it, 5)
    loader.set_epoch(during)
    head += _batches(it, 2)
    state = loader.state_dict()  # 42 of epoch 0's 60 received, whatever set_epoch said meanwhile
    assert (state["epoch"], state["position"], state["consumed"]) == (0, 42, 42)
    resumed = _loader()
    resumed.load_state_dict(state)
    resumed.set_epoch(0)  # the usual loop, from the checkpoint's epoch
    assert sorted(_labels(head) + _labels(_batches(resumed))) == list(range(N))  # each once
    rest = _batches(it)  # the first job goes on: its pass is still epoch 0's
    assert sorted(_labels(head + rest)) == list(range(N))
    assert loader.state_dict() == {**state, "epoch": during, "position": 0, "consumed": 0}  # the next pass's start
    fresh = _loader()
    fresh.set_epoch(during)
    assert _labels(_batches(loader)) == _labels(_batches(fresh))  # the next pass: epoch `during`, whole


def test_a_pass_made_before_set_epoch_keeps_its_epochs_order_and_bits():
    fresh = _batches(_loader())  # epoch 0
    loader = _loader()
    it = iter(loader)
    loader.set_epoch(1)  # before its first batch: the pass is epoch 0's already
    got = _batches(it)
    assert [labels for _, labels in got] == [labels for _, labels in fresh]
    assert all(torch.equal(a, b) for (a, _), (b, _) in zip(got, fresh, strict=True))


def test_a_state_dict_loaded_during_a_pass_is_not_moved_by_it():
    source = _loader()
    _batches(source, 3)
    state = source.state_dict()
    loader = _loader()
    it = iter(loader)
    _batches(it, 2)
    loader.load_state_dict(state)
    _batches(it, 2)  # the old pass goes on: it no longer counts
    assert loader.state_dict() == state
