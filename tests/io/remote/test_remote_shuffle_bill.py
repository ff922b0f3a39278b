"""shuffle=True over a remote pack larger than its cache (issue 43): a sample-level shuffle would
fetch the pack several times an epoch, so the Loader takes the shard-aware order instead, says so
once at WARNING with the bytes it saves, and its repr shows the bytes each epoch fetched against
the pack's size; shuffle="global" keeps the sample-level shuffle (and its bill), logged at INFO.
The pack is a file:// URL: remote to the dataset (fetched through the store, every byte counted)."""

import logging

import pytest
import torch

import fastprep
import fastprep.io as fio
from fastprep.loader._shard_order import refetch_factor

pytestmark = [pytest.mark.one_backend]

ITEMS = 96


@pytest.fixture(scope="module")
def pack(tmp_path_factory):
    pytest.importorskip("fsspec")
    root = tmp_path_factory.mktemp("bill")
    items = [(torch.full((3, 16, 16), i % 251, dtype=torch.uint8), i) for i in range(ITEMS)]
    fio.pack(items, root / "p", non_jpeg="raw", shard_bytes=1 << 12, progress=False)
    return root / "p"


def remote(pack, tmp_path, share=4):
    """The pack over file://, with a cache of 1/share of its shards' bytes."""
    local = fio.PackedDataset(pack)
    limit = sum(local.shard_sizes) // share
    return fio.PackedDataset(f"file://{pack}", cache_dir=tmp_path / "cache", cache_limit=limit, workers=1)


def one_epoch(loader):
    """Every label of one epoch, and the bytes the dataset fetched for it."""
    before = loader.dataset.bytes_fetched
    labels = sorted(int(y) for batch in loader for y in batch.data[1])
    return labels, loader.dataset.bytes_fetched - before


def warnings_of(caplog):
    return [r.getMessage() for r in caplog.records if r.name == "fastprep" and r.levelno == logging.WARNING]


def test_shuffle_true_over_a_pack_four_times_the_cache_fetches_it_about_once(pack, tmp_path, caplog):
    ds = remote(pack, tmp_path)
    pack_bytes = sum(ds.shard_sizes)
    assert len(ds.shard_sizes) >= 16 and refetch_factor(ds) > 2
    with caplog.at_level(logging.INFO, logger="fastprep"):
        loader = fastprep.Loader(ds, 8, shuffle=True, seed=0, threads=1)
    said = warnings_of(caplog)
    assert len(said) == 1 and "shuffle=True" in said[0] and "shard-aware" in said[0] and "saving ~" in said[0]
    assert "shuffle='global'" in said[0]  # how to keep the sample-level shuffle
    assert loader.shuffle == "shards" and 1 <= loader.order.window <= ds.cache_limit // 2 // max(ds.shard_sizes)
    assert "no whole epoch fetched yet" in repr(loader)
    labels, moved = one_epoch(loader)
    assert labels == list(range(ITEMS))  # every sample once
    assert moved <= 1.2 * pack_bytes
    assert loader.epoch_fetched == (0, moved)
    assert f"shuffle='shards', fetched {moved / 1e3:.3g} kB in epoch 0, {moved / pack_bytes:.1f}x the" in repr(loader)
    caplog.clear()
    loader.set_epoch(1)
    labels, moved = one_epoch(loader)
    assert labels == list(range(ITEMS)) and moved <= 1.2 * pack_bytes and not warnings_of(caplog)  # said once


def test_shuffle_global_keeps_the_sample_level_order_and_says_what_it_costs(pack, tmp_path, caplog):
    ds = remote(pack, tmp_path)
    pack_bytes = sum(ds.shard_sizes)
    with caplog.at_level(logging.INFO, logger="fastprep"):
        loader = fastprep.Loader(ds, 8, shuffle="global", seed=0, threads=1)
    assert loader.shuffle is True and not warnings_of(caplog)
    info = [r.getMessage() for r in caplog.records if r.name == "fastprep" and r.levelno == logging.INFO]
    assert len(info) == 1 and "shuffle='global'" in info[0] and f"{refetch_factor(ds):.1f}x the pack" in info[0]
    labels, moved = one_epoch(loader)
    assert labels == list(range(ITEMS))
    assert moved > 1.2 * pack_bytes  # the bill the shard-aware order spares
    assert f"shuffle=True, fetched {moved / 1e3:.3g} kB in epoch 0, {moved / pack_bytes:.1f}x the" in repr(loader)


def test_a_pack_that_fits_or_a_local_pack_keeps_shuffle_true(pack, tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="fastprep"):
        fits = fio.PackedDataset(f"file://{pack}", cache_dir=tmp_path / "c", cache_limit=1 << 30)
        unbounded = fio.PackedDataset(f"file://{pack}", cache_dir=tmp_path / "c")
        for ds in (fits, unbounded, fio.PackedDataset(pack)):
            assert refetch_factor(ds) == 1.0
            assert fastprep.Loader(ds, 8, shuffle=True, seed=0, threads=1).shuffle is True
    assert not [r for r in caplog.records if r.name == "fastprep"]
    assert "shuffle=" not in repr(fastprep.Loader(fio.PackedDataset(pack), 8, shuffle=True, threads=1))


def test_the_shard_order_a_checkpoint_of_the_switched_loader_resumes(pack, tmp_path):
    ds = remote(pack, tmp_path)
    loader = fastprep.Loader(ds, 8, shuffle=True, seed=0, threads=1)
    it = iter(loader)
    first = [int(y) for y in next(it).data[1]]
    state = loader.state_dict()
    it.close()
    again = fastprep.Loader(ds, 8, shuffle=True, seed=0, threads=1)
    again.load_state_dict(state)
    rest = [int(y) for batch in again for y in batch.data[1]]
    assert state["shuffle"] == "shards" and sorted(first + rest) == list(range(ITEMS))


def test_a_sample_level_checkpoint_over_a_switched_loader_says_to_resume_with_global(pack, tmp_path):
    ds = remote(pack, tmp_path)
    loader = fastprep.Loader(ds, 8, shuffle="global", seed=0, threads=1)
    it = iter(loader)
    first = [int(y) for y in next(it).data[1]]
    state = loader.state_dict()
    it.close()
    with pytest.raises(ValueError, match=r"shuffle=True; this Loader has shuffle='shards'.*shuffle='global' to resume"):
        fastprep.Loader(ds, 8, shuffle=True, seed=0, threads=1).load_state_dict(state)
    again = fastprep.Loader(ds, 8, shuffle="global", seed=0, threads=1)
    again.load_state_dict(state)
    rest = [int(y) for batch in again for y in batch.data[1]]
    assert sorted(first + rest) == list(range(ITEMS))


@pytest.mark.parametrize("shuffle", ["Global", "random", "shard", 1.0, "", None])
def test_a_bad_shuffle_is_named(shuffle):
    with pytest.raises(ValueError, match=rf"expected shuffle to be a bool, 'shards' .* or 'global' .*got {shuffle!r}"):
        fastprep.Loader(list(range(4)), 2, shuffle=shuffle)


@pytest.mark.parametrize("shuffle, over", [(True, False), ("global", True)])
def test_the_monitor_sets_the_bytes_of_an_epoch_against_the_pack(pack, tmp_path, shuffle, over):
    ds = remote(pack, tmp_path)
    pack_bytes = sum(ds.shard_sizes)
    loader = fastprep.Loader(ds, 8, shuffle=shuffle, seed=0, threads=1)
    mon = fastprep.monitor(loader, live=False, device="cpu")
    for _batch in mon:
        pass
    s = mon.summary()
    assert s.pack_bytes == pack_bytes and s.epoch_samples == ITEMS
    assert s.epoch_fetched == pytest.approx(s.fetched) and (s.epoch_fetched > 1.2 * pack_bytes) == over
    assert f"{s.epoch_fetched / 1e3:.3g} kB per epoch, {s.epoch_fetched / pack_bytes:.1f}x the pack's" in str(s)
    assert s.as_dict()["epoch_fetched"] == s.epoch_fetched
