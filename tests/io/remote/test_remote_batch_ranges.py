"""A batch's windows read by range together (PackedDataset.fetch_ahead, which the Loader calls per
chunk): the same bits as local reads for every window, the requests of a batch issued together
(counted in waves of RemoteStore.read_spans, not timed), a corrupt byte read ahead fetched again,
a sample that cannot be read skipped without sinking its batch, and fetch="auto"'s choice said."""

import logging

import pytest
import torch

import fastprep
import fastprep.io as fio
from fastprep import transforms as T
from fastprep.io.remote import Retry

from helpers.jpeg_photos import grey_jpeg, needs_decoder, photo_jpeg, write_tree
from helpers.remote_guard import hang_guard  # noqa: F401 (autouse: a hang fails with every thread's stack)
from helpers.store_servers import store  # noqa: F401 (the session's server fixture)

pytestmark = [needs_decoder, pytest.mark.one_backend]

FILES = {
    "a/444.jpg": lambda: photo_jpeg("astronaut", "4:4:4", False, (131, 157)),
    "a/422p.jpg": lambda: photo_jpeg("chelsea", "4:2:2", True, (150, 203)),
    "b/420.jpg": lambda: photo_jpeg("coffee", "4:2:0", False, (301, 333)),
    "b/420b.jpg": lambda: photo_jpeg("astronaut", "4:2:0", False, (256, 240)),
    "c/grey.jpg": lambda: grey_jpeg(False, (91, 130)),
}
FAST = Retry(tries=3, backoff=0.01, max_backoff=0.05, timeout=30)


@pytest.fixture(scope="module")
def packs(tmp_path_factory, store):  # noqa: F811
    root = tmp_path_factory.mktemp("batch-ranges")
    (root / "src").mkdir()
    write_tree(root / "src", FILES)
    fio.pack(root / "src", root / "jpeg", progress=False, shard_bytes=1 << 14, threads=2)
    store.pack(root / "src", "jpeg", root / "jpeg", progress=False)
    return root


class Recorded:
    """Counts a dataset's store calls: read_spans (one per wave of a batch's requests) and the
    reads of one sample at a time (read_ranges: a head, rows)."""

    def __init__(self, ds, monkeypatch):
        self.waves, self.alone = [], []
        backend = ds._source.store
        spans, ranges = backend.read_spans, backend.read_ranges
        monkeypatch.setattr(backend, "read_spans", lambda s: self.waves.append(len(s)) or spans(s))
        monkeypatch.setattr(backend, "read_ranges", lambda *a, **k: self.alone.append(a[0]) or ranges(*a, **k))


def remote(store, tmp_path, **kw):  # noqa: F811
    return fio.PackedDataset(store.url("jpeg"), cache_dir=tmp_path / "cache", storage_options=store.options(),
                             retry=FAST, **{"fetch": "ranges", **kw})


def windows(h, w):
    return [None, (0, 0, 1, 1), (h // 3, w // 4, h // 3, w // 2), (h - 5, w - 7, 5, 7), (0, 0, h, w // 3),
            (h // 2, 0, h - h // 2, w)]


@pytest.mark.parametrize("kind", range(6))
def test_batch_reads_equal_local_reads_for_every_window(packs, store, tmp_path, monkeypatch, kind):  # noqa: F811
    local, ds = fio.PackedDataset(packs / "jpeg"), remote(store, tmp_path)
    calls = Recorded(ds, monkeypatch)
    keys = list(range(len(local)))
    crops = [windows(local.record_image(i).height, local.record_image(i).width)[kind] for i in keys]
    waves = ds.fetch_ahead(keys, lambda j: ds.load_raw(keys[j])[0].decode(crops[j]))
    assert 1 <= waves <= 2 and len(calls.waves) == waves  # every record's requests in one or two waves
    assert calls.waves[0] >= len(keys)  # the first wave asks for every record at once
    for j, i in enumerate(keys):
        assert torch.equal(ds.load_raw(i)[0].decode(crops[j]), local.load_raw(i)[0].decode(crops[j])), (i, kind)
        assert ds.load_raw(i)[0].cut(crops[j]) == local.load_raw(i)[0].cut(crops[j])  # (read alone: not ahead)
    assert ds.fetch_ahead(keys, lambda j: ds.load_raw(keys[j])[0].decode(crops[j])) == 1  # heads in memory: one wave


def test_a_loader_reads_each_chunk_in_waves_not_sample_by_sample(packs, store, tmp_path, monkeypatch):  # noqa: F811
    local, ds = fio.PackedDataset(packs / "jpeg", layout="HWC"), remote(store, tmp_path, layout="HWC")
    calls = Recorded(ds, monkeypatch)
    tf = T.Compose([T.RandomResizedCrop(48, layout="HWC"), T.RandomHorizontalFlip()])
    want = [b[0] for b in fastprep.Loader(local, 5, transform=tf, threads=1, seed=3)]
    got = [b[0] for b in fastprep.Loader(ds, 5, transform=tf, threads=1, seed=3)]
    assert all(torch.equal(a, b) for a, b in zip(want, got)) and len(got) == len(want)
    assert calls.alone == []  # every window came from its batch's reads: none fetched on its own
    assert 1 <= len(calls.waves) <= 2  # one batch of 5: the heads with a guess at the rows, then what it missed


def test_a_corrupt_byte_read_ahead_is_fetched_again(packs, store, tmp_path, monkeypatch):  # noqa: F811
    if store.proxy is None:
        pytest.skip("flipping a byte needs the loopback proxy")
    local, ds = fio.PackedDataset(packs / "jpeg"), remote(store, tmp_path)
    keys = list(range(len(local)))
    crops = [(0, 0, local.record_image(i).height, local.record_image(i).width // 2) for i in keys]
    store.proxy.clear()
    store.proxy.inject("flip", 1, match="shard-")  # the first range request of the batch comes back changed
    try:
        ds.fetch_ahead(keys, lambda j: ds.load_raw(keys[j])[0].decode(crops[j]))
    finally:
        store.proxy.clear()
    calls = Recorded(ds, monkeypatch)
    for j, i in enumerate(keys):
        assert torch.equal(ds.load_raw(i)[0].decode(crops[j]), local.load_raw(i)[0].decode(crops[j]))
    assert len(calls.alone) >= 1  # the changed record's bytes, fetched again on their own


def test_a_sample_that_cannot_be_read_is_skipped_and_its_batch_goes_on(packs, store, tmp_path,  # noqa: F811
                                                                       monkeypatch):
    local, ds = fio.PackedDataset(packs / "jpeg", layout="HWC"), remote(store, tmp_path, layout="HWC")
    e = ds._entries[2]
    shard, start, end = ds._shards[int(e["shard"])][0], int(e["offset"]), int(e["offset"] + e["length"])
    store_ = ds._source.store
    spans, ranges = store_.read_spans, store_.read_ranges

    def spans_failing(s):  # record 2's spans fail in the batch's reads...
        return [None if n == shard and start <= a < end else p for (n, a, _), p in zip(s, spans(s))]

    def ranges_failing(name, rs, what=None):  # ...and in its own, retried
        if name == shard and any(start <= a < end for a, _ in rs):
            raise ConnectionError("the store is down for this record")
        return ranges(name, rs, what)

    monkeypatch.setattr(store_, "read_spans", spans_failing)
    monkeypatch.setattr(store_, "read_ranges", ranges_failing)
    tf = T.RandomCrop(32, layout="HWC")
    loader = fastprep.Loader(ds, len(ds), transform=tf, threads=1, seed=1, on_error="skip")
    batches = list(loader)
    assert len(batches) == 1 and batches[0][0].shape[0] == len(ds) and loader.bad_samples.count == 1
    want = next(iter(fastprep.Loader(local, len(ds), transform=tf, threads=1, seed=1)))[0]
    same = [torch.equal(a, b) for a, b in zip(batches[0][0], want)]
    assert same[:2] + same[3:] == [True] * (len(ds) - 1)  # the others: their own windows, read with the batch


def test_auto_says_what_it_chose(packs, store, tmp_path, caplog):  # noqa: F811
    with caplog.at_level(logging.INFO, logger="fastprep"):
        ds = remote(store, tmp_path, fetch="auto", cache_limit=1 << 12)  # the pack is larger than the cache
        ds.load_raw(0)[0].decode((0, 0, 8, 8))
    mode, why = ds.fetch_mode
    assert mode == "ranges" and "cache_limit" in why
    said = [r.getMessage() for r in caplog.records if "fetch='auto'" in r.getMessage()]
    assert len(said) == 1 and "by range" in said[0] and "cache_limit" in said[0]  # said once
    assert "ranges" in repr(ds)
    big = remote(store, tmp_path / "big", fetch="auto")
    big.load_raw(0)[0].decode((0, 0, 8, 8))
    assert big.fetch_mode[0] == "shards"
    assert remote(store, tmp_path / "s", fetch="shards").fetch_mode == ("shards", "fetch='shards'")


def test_one_record_alone_gets_its_head_and_a_guess_at_its_rows_together(packs, store, tmp_path,  # noqa: F811
                                                                         monkeypatch):
    local, ds = fio.PackedDataset(packs / "jpeg"), remote(store, tmp_path)
    calls = Recorded(ds, monkeypatch)
    i = 2  # 301 x 333: the guess is a span of its own, past the head
    crop = (150, 100, 40, 60)
    waves = ds.fetch_ahead([i], lambda j: ds.load_raw(i)[0].decode(crop))
    assert calls.waves[0] == 2 and waves == len(calls.waves)  # wave 1: the head and the guessed rows, together
    assert torch.equal(ds.load_raw(i)[0].decode(crop), local.load_raw(i)[0].decode(crop))
    assert calls.alone == []


def test_fetch_ranges_downloads_no_shard_of_jpeg_records_behind_a_loader(packs, store, tmp_path):  # noqa: F811
    ds = remote(store, tmp_path, layout="HWC")
    assert ds.prefetch() == []  # nothing but JPEG records: no shard to download
    for _ in fastprep.Loader(ds, 2, transform=T.RandomCrop(16, layout="HWC"), threads=2, seed=0):
        pass
    assert not list((tmp_path / "cache").glob("*/shard-*.fpk"))


def test_a_pickled_dataset_reads_ahead_in_its_new_process(packs, store, tmp_path):  # noqa: F811
    import pickle

    local, ds = fio.PackedDataset(packs / "jpeg"), remote(store, tmp_path)
    ds.fetch_ahead([0, 1], lambda j: ds.load_raw(j)[0].decode((0, 0, 8, 8)))
    copy = pickle.loads(pickle.dumps(ds))  # a DataLoader worker's: no head, no part read ahead comes along
    assert copy._source.cached_head(copy._shards[int(copy._entries["shard"][0])][0],
                                    int(copy._entries["offset"][0])) is None
    assert copy.fetch_ahead([0, 1], lambda j: copy.load_raw(j)[0].decode((0, 0, 8, 8))) >= 1
    assert torch.equal(copy.load_raw(1)[0].decode((0, 0, 8, 8)), local.load_raw(1)[0].decode((0, 0, 8, 8)))
