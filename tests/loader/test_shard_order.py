"""shuffle="shards", the shard-aware order for data larger than the cache: every index once,
deterministic from (seed, epoch), at most `window` shards open at a time, ranks reading their own
shards; the item_shards protocol (PackedDataset's), refusals by name, prefetch in the pass's
order, and the rank split said once in the log."""

import logging

import numpy as np
import pytest
import torch

import fastprep
import fastprep.io as fio
import fastprep.loader._ranks as ranks
from fastprep.loader._shard_order import shard_order

pytestmark = pytest.mark.one_backend

SIZES = [5, 3, 7, 6, 2, 5, 5, 8, 4, 6, 1, 5]  # samples of each shard: uneven, as real packs' last shards
SHARDS = np.repeat(np.arange(len(SIZES)), SIZES)
MANY = np.repeat(np.arange(4 * len(SIZES)), SIZES * 4)  # four times as many: a few shards a rank


def _open_shards(order):
    """The most shards that are started and not finished at any point of `order`."""
    seen, most = {}, 0
    for i in order:
        seen[SHARDS[i]] = seen.get(SHARDS[i], 0) + 1
        most = max(most, sum(0 < seen[s] < SIZES[s] for s in seen))
    return most


@pytest.mark.parametrize("window, world", [(1, 1), (2, 1), (3, 1), (2, 2), (1, 3), (4, 4)])
def test_shard_order_takes_every_sample_once_a_window_of_shards_at_a_time(window, world):
    shards = SHARDS if world == 1 else MANY
    order = shard_order(shards, 5, 3, window, world)
    assert sorted(order.tolist()) == list(range(len(shards)))
    assert np.array_equal(order, shard_order(shards, 5, 3, window, world))  # from (seed, epoch)
    assert not np.array_equal(order, shard_order(shards, 5, 4, window, world))
    counts = np.bincount(shards)
    for rank in range(world):
        mine = order[rank::world]
        owned = [s for s in np.unique(shards[mine]) if np.sum(shards[mine] == s) == counts[s]]
        assert np.isin(shards[mine], owned).mean() >= 0.8  # a rank reads mostly its own whole shards
        if world == 1:
            assert _open_shards(mine) <= window


def test_window_one_reads_each_shard_whole_in_turn():
    order = shard_order(SHARDS, 0, 0, 1)
    runs = [s for k, s in enumerate(SHARDS[order]) if k == 0 or s != SHARDS[order][k - 1]]
    assert sorted(runs) == list(range(len(SIZES)))


class Sharded:
    def __init__(self, shards, **extra):
        self.item_shards = shards
        self.prefetched = []
        self.__dict__.update(extra)

    def __len__(self):
        return len(self.item_shards)

    def __getitem__(self, i):
        return torch.zeros(2, 2, 3, dtype=torch.uint8), i

    def prefetch(self, order):
        self.prefetched.append(list(order))


def test_the_loader_prefetches_the_pass_order_and_checks_the_window_against_the_cache():
    dataset = Sharded(SHARDS, cache_limit=1600, shard_sizes=[100] * len(SIZES))
    loader = fastprep.Loader(dataset, 4, shuffle="shards", seed=1, threads=1, rank=1, world_size=2)
    assert loader.order.window == 8  # the default, whatever the cache: half of it holds 8 shards here
    labels = [int(y) for b in loader for y in b.data[1]]
    assert dataset.prefetched == [loader.indices()] and labels == loader.indices()
    assert fastprep.Loader(dataset, 4, shuffle="shards", shard_window=2, world_size=1, rank=0).order.window == 2
    small = Sharded(SHARDS, cache_limit=1000, shard_sizes=[100] * len(SIZES))  # half holds 5 shards, not 8
    with pytest.raises(ValueError, match=r"shard_window=8 \(the default\).*cache_limit=1000 holds 5: pass "
                                         r"shard_window=5 on every rank .* cache_limit of at least 1600"):
        fastprep.Loader(small, 4, shuffle="shards", world_size=1)
    assert fastprep.Loader(small, 4, shuffle="shards", shard_window=5, world_size=1).order.window == 5


def test_a_packed_dataset_says_its_shards(tmp_path):
    items = [(torch.full((3, 16, 16), i, dtype=torch.uint8), i) for i in range(24)]
    fio.pack(items, tmp_path / "p", non_jpeg="raw", shard_bytes=1 << 12, progress=False)
    pack = fio.PackedDataset(tmp_path / "p")
    shards = pack.item_shards
    assert shards.dtype == np.int64 and len(shards) == 24 and shards.max() > 1 and not shards.flags.writeable
    assert np.all(np.diff(shards) >= 0)  # pack writes in order
    loader = fastprep.Loader(pack, 5, shuffle="shards", shard_window=2, seed=0, threads=1)
    assert sorted(int(y) for b in loader for y in b.data[1]) == list(range(24))


@pytest.mark.parametrize("make, match", [
    (lambda: fastprep.Loader(list(range(4)), 2, shuffle="shards"), "shuffle='shards' needs a dataset that says"),
    (lambda: fastprep.Loader(list(range(4)), 2, shuffle="yes"), "expected shuffle to be a bool, 'shards' .* or 'global' .*got 'yes'"),
    (lambda: fastprep.Loader(list(range(4)), 2, shard_window=3), "shard_window=3 is for shuffle='shards'"),
    (lambda: fastprep.Loader(Sharded(SHARDS), 2, shuffle="shards", shard_window=0), "shard_window"),
    (lambda: fastprep.Loader(Sharded(SHARDS * 0.5), 2, shuffle="shards"), "item_shards must be a 1-d array of 57"),
    (lambda: fastprep.Loader(list(range(4)), 2, rank=1), "rank and world_size go together"),
    (lambda: fastprep.Loader(list(range(4)), 2, rank=2, world_size=2), "expected rank in"),
    (lambda: fastprep.Loader(list(range(4)), 2, sampler=[0, 1], rank=0, world_size=2), "a sampler"),
])
def test_bad_shard_and_rank_arguments_fail_by_name(make, match):
    with pytest.raises(ValueError, match=match):
        make().indices()


def test_torchrun_variables_split_by_themselves_said_once(monkeypatch, caplog):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "3")
    monkeypatch.setattr(ranks, "_told", set())
    with caplog.at_level(logging.INFO, logger="fastprep"):
        loaders = [fastprep.Loader(list(range(10)), 2, seed=0) for _ in range(2)]
    assert [(lo.rank, lo.world_size) for lo in loaders] == [(1, 3), (1, 3)]
    assert loaders[0].indices() == [1, 4, 7, 0] and len(loaders[0]) == 2  # padded by wrapping: 4 each
    assert len([r for r in caplog.records if "rank 1 of 3" in r.getMessage()]) == 1
    assert fastprep.Loader(list(range(10)), 2, rank=0, world_size=1).indices() == list(range(10))  # opt out
    monkeypatch.setenv("RANK", "x")
    with pytest.raises(ValueError, match="RANK and WORLD_SIZE environment variables to be ints"):
        fastprep.Loader(list(range(10)), 2)
