"""fastprep.Loader over ranks, simulated in one process (explicit rank= / world_size=): each epoch's
global order split in lock-step, every rank as many batches, and a state_dict written at world size N
resumed at world size M with every sample of the epoch delivered exactly once overall (padding
aside: fewer than M samples repeated to even the last step, or cut with drop_last)."""

import itertools

import numpy as np
import pytest
import torch

import fastprep

pytestmark = pytest.mark.one_backend

ITEMS, PER_SHARD, BATCH = 53, 5, 3


class Sharded:
    """Item i is (a tiny image, i), in shard i // PER_SHARD (the item_shards protocol)."""

    def __init__(self, n=ITEMS):
        self.n = n
        self.item_shards = np.arange(n) // PER_SHARD
        self.prefetched = []

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return torch.full((2, 2, 3), i % 251, dtype=torch.uint8), i

    def prefetch(self, order):
        self.prefetched.append(list(order))


def _loaders(dataset, world, shuffle, drop_last):
    return [fastprep.Loader(dataset, BATCH, shuffle=shuffle, drop_last=drop_last, seed=7, threads=1, rank=r,
                            world_size=world, shard_window=2 if shuffle == "shards" else None) for r in range(world)]


def _take(loader, batches):
    """The labels of the first `batches` batches of the loader's pass (all when None)."""
    return [int(y) for b in itertools.islice(loader, batches) for y in b.data[1]]


@pytest.mark.parametrize("shuffle", [False, True, "shards"])
@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("before, after", [(2, 3), (4, 2), (3, 1), (1, 4)])
def test_a_checkpoint_at_world_size_n_resumes_at_m_with_every_sample_once(before, after, shuffle, drop_last):
    dataset = Sharded()
    first = _loaders(dataset, before, shuffle, drop_last)
    for loader in first:
        loader.set_epoch(2)
    counts = {len(loader) for loader in first}
    assert len(counts) == 1  # every rank as many batches: DDP's lock-step
    steps = 2
    delivered = [y for loader in first for y in _take(loader, steps)]
    states = [loader.state_dict() for loader in first]
    assert len({s["consumed"] for s in states}) == 1 and states[0]["consumed"] == steps * BATCH * before
    second = _loaders(dataset, after, shuffle, drop_last)
    for rank, loader in enumerate(second):
        loader.load_state_dict(states[rank % before])  # any rank's checkpoint
        loader.set_epoch(2)
    parts = [_take(loader, None) for loader in second]
    assert len({len(p) for p in parts}) == 1  # equal batches at M too
    delivered += [y for p in parts for y in p]
    rest = ITEMS - steps * BATCH * before
    if drop_last:  # each sample at most once; only the cut tail (< M) and the last incomplete batches are left out
        assert len(set(delivered)) == len(delivered)
        assert ITEMS - len(delivered) < after * BATCH
    else:  # every sample; the pad to a multiple of M repeats fewer than M
        assert set(delivered) == set(range(ITEMS))
        assert len(delivered) - ITEMS == (-rest) % after


@pytest.mark.parametrize("shuffle", [False, True, "shards"])
def test_resumed_at_the_same_world_size_a_rank_gets_the_rest_of_its_own_pass(shuffle):
    whole = _loaders(Sharded(), 3, shuffle, False)
    uninterrupted = [_take(loader, None) for loader in whole]
    cut = _loaders(Sharded(), 3, shuffle, False)
    heads = [_take(loader, 2) for loader in cut]
    states = [loader.state_dict() for loader in cut]
    resumed = _loaders(Sharded(), 3, shuffle, False)
    for loader, state in zip(resumed, states):
        loader.load_state_dict(state)
    assert [h + _take(loader, None) for h, loader in zip(heads, resumed)] == uninterrupted
    every = [y for p in uninterrupted for y in p]
    assert set(every) == set(range(ITEMS)) and len(every) == ITEMS + (-ITEMS) % 3


def test_an_old_state_dict_resumes_over_ranks():
    """A state_dict from before ranks ({seed, epoch, position}: one process) resumes split over 2 ranks."""
    single = fastprep.Loader(Sharded(), BATCH, shuffle=True, seed=7, threads=1)
    head = _take(single, 4)
    old = {k: single.state_dict()[k] for k in ("seed", "epoch", "position")}
    ranks = _loaders(Sharded(), 2, True, False)
    for loader in ranks:
        loader.load_state_dict(old)
    delivered = head + [y for loader in ranks for y in _take(loader, None)]
    assert set(delivered) == set(range(ITEMS)) and len(delivered) - ITEMS == (ITEMS - 12) % 2


def test_a_resumed_pass_checkpoints_again_and_resumes_at_a_third_world_size():
    """2 ranks -> 3 -> 1, a checkpoint on each, over the shard order: still every sample once."""
    first = _loaders(Sharded(), 2, "shards", False)
    delivered = [y for loader in first for y in _take(loader, 2)]
    second = _loaders(Sharded(), 3, "shards", False)
    for loader in second:
        loader.load_state_dict(first[1].state_dict())
    delivered += [y for loader in second for y in _take(loader, 3)]
    state = second[2].state_dict()
    assert state["consumed"] == 2 * BATCH * 2 + 3 * BATCH * 3 and state["order_world"] == 2
    last = _loaders(Sharded(), 1, "shards", False)[0]
    last.load_state_dict(state)
    delivered += _take(last, None)
    assert sorted(delivered) == list(range(ITEMS))
    assert last.state_dict()["consumed"] == ITEMS  # the epoch is over: a resume delivers nothing
    again = _loaders(Sharded(), 4, "shards", False)[0]
    again.load_state_dict(last.state_dict())
    assert _take(again, None) == []


def test_a_state_dict_over_ranks_is_refused_by_a_loader_with_a_sampler():
    state = _loaders(Sharded(), 2, True, False)[0].state_dict()
    with pytest.raises(ValueError, match="written over 2 ranks"):
        fastprep.Loader(Sharded(), BATCH, sampler=list(range(ITEMS))).load_state_dict(state)


@pytest.mark.parametrize("shuffle", [False, True, "shards"])
def test_set_epoch_after_a_resumed_pass_starts_the_next_epoch_from_its_start(shuffle):
    """A resumed pass's base in the global order is not the next epoch's: its state_dict is at 0."""
    first = _loaders(Sharded(), 2, shuffle, False)
    _take(first[0], 1)
    state = first[0].state_dict()
    resumed = _loaders(Sharded(), 2, shuffle, False)[0]
    resumed.load_state_dict(state)
    _take(resumed, None)
    resumed.set_epoch(1)
    state = resumed.state_dict()
    assert {k: state[k] for k in ("seed", "epoch", "position", "consumed", "order_world", "world_size", "rank",
                                  "shuffle", "samples")} == {"seed": 7, "epoch": 1, "position": 0, "consumed": 0,
                                                             "order_world": 2, "world_size": 2, "rank": 0,
                                                             "shuffle": shuffle, "samples": ITEMS}
    assert state.get("shard_window") == (2 if shuffle == "shards" else None)
    again = _loaders(Sharded(), 2, shuffle, False)
    again[0].load_state_dict(resumed.state_dict())
    again[1].load_state_dict(resumed.state_dict())
    fresh = _loaders(Sharded(), 2, shuffle, False)
    for loader in fresh:
        loader.set_epoch(1)
    assert [_take(loader, None) for loader in again] == [_take(loader, None) for loader in fresh]


@pytest.mark.parametrize("shuffle", [False, True, "shards"])
def test_a_chain_of_checkpoints_over_2_1_1_3_ranks_delivers_every_sample_once(shuffle):
    """2 ranks -> 1 -> 1 (a resumed pass saved at world 1 is still at `consumed` of the world-2 order) -> 3."""
    first = _loaders(Sharded(), 2, shuffle, False)
    delivered = [y for loader in first for y in _take(loader, 2)]
    state = first[1].state_dict()
    for steps in (2, 1):
        single = _loaders(Sharded(), 1, shuffle, False)[0]
        single.load_state_dict(state)
        delivered += _take(single, steps)
        state = single.state_dict()
    assert state["world_size"] == 1 and state["order_world"] == 2 and state["consumed"] == 12 + 3 * BATCH
    last = _loaders(Sharded(), 3, shuffle, False)
    for loader in last:
        loader.load_state_dict(state)
    delivered += [y for loader in last for y in _take(loader, None)]
    rest = ITEMS - 12 - 3 * BATCH
    assert set(delivered) == set(range(ITEMS)) and len(delivered) - ITEMS == (-rest) % 3


def test_world_size_1_alone_opts_out_of_the_rank_split(monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    loader = fastprep.Loader(Sharded(), BATCH, threads=1, world_size=1)
    assert (loader.rank, loader.world_size) == (0, 1)
    assert _take(loader, None) == list(range(ITEMS))
    with pytest.raises(ValueError, match="rank and world_size go together"):
        fastprep.Loader(Sharded(), BATCH, world_size=2)


def test_the_automatic_rank_split_is_a_warning_once(monkeypatch, caplog):
    import fastprep.loader._ranks as ranks

    monkeypatch.setattr(ranks, "_told", set())
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "3")
    with caplog.at_level("WARNING", logger="fastprep"):
        for _ in range(2):
            loader = fastprep.Loader(Sharded(), BATCH, threads=1)
    assert (loader.rank, loader.world_size) == (1, 3)
    warned = [r for r in caplog.records if r.name == "fastprep" and r.levelname == "WARNING"]
    assert len(warned) == 1
    message = warned[0].getMessage()
    assert "rank 1 of 3" in message and "RANK / WORLD_SIZE" in message
    assert "world_size=1" in message and "sampler" in message
