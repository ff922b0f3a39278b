"""Parallel downloads and a throttle shared by a store's threads, against each store's loopback
server behind the fault proxy (tests/helpers/store_servers.py): a shard downloaded as byte ranges in
parallel is the same bits, one request each; one 503 SlowDown pauses every prefetch thread (the
proxy's log shows no request during the pause); a RateLimit's bytes are those fetched."""

import pytest

import fastprep.io as fio
import fastprep.io.remote._limits as limits_mod
from fastprep.io.remote import RateLimit, RemoteStore, Retry
from fastprep.io.remote._store import PART_PROTOCOLS

from helpers.jpeg_photos import grey_jpeg, needs_decoder, photo_jpeg, write_tree
from helpers.remote_guard import hang_guard  # noqa: F401 (autouse: a hang fails with every thread's stack)
from helpers.store_servers import store  # noqa: F401 (the session's server fixture, one per kind of store)

pytestmark = [needs_decoder, pytest.mark.one_backend]

FILES = {f"{c}/{i}.jpg": (lambda name=name, i=i: photo_jpeg(name, "4:2:0", False, (120 + 8 * i, 160)))
         for i, (c, name) in enumerate([("a", "coffee"), ("a", "chelsea"), ("b", "astronaut"), ("b", "rocket")] * 3)}
FILES["c/grey.jpg"] = lambda: grey_jpeg(False, (91, 130))


@pytest.fixture(scope="module")
def pack(tmp_path_factory, store):  # noqa: F811
    root = tmp_path_factory.mktemp("parallel")
    (root / "src").mkdir()
    write_tree(root / "src", FILES)
    store.pack(root / "src", "parallel", root / "local", progress=False, shard_bytes=1 << 13)
    return root / "local"


def test_a_shard_downloaded_in_parallel_parts_is_the_same_bits(pack, store, tmp_path):  # noqa: F811
    if store.kind not in PART_PROTOCOLS:
        pytest.skip(f"{store.kind}:// downloads whole (a web server may ignore ranges)")
    remote = RemoteStore(store.url("parallel"), store.options(), Retry(tries=3, backoff=0.01))
    remote.part_bytes, remote.parts = 1000, 3
    name, size = fio.PackedDataset(pack)._shards[0]
    assert size > 3 * remote.part_bytes  # several rounds of parts
    if store.proxy is not None:
        store.proxy.clear()
    before = remote.requests
    remote.download(name, str(tmp_path / name), size)
    assert (tmp_path / name).read_bytes() == (pack / name).read_bytes()
    assert remote.requests - before == -(-size // 1000) and remote.bytes_fetched == size
    if store.proxy is not None:
        assert store.proxy.requests(f"/{name}") == -(-size // 1000)


@pytest.mark.parametrize("fault", ["drop", "short", "503"])
def test_a_part_that_fails_is_tried_again(pack, store, tmp_path, fault):  # noqa: F811
    if store.kind not in PART_PROTOCOLS or store.proxy is None:
        pytest.skip("parts and fault injection: an object store behind the loopback proxy")
    remote = RemoteStore(store.url("parallel"), store.options(), Retry(tries=3, backoff=0.01, max_backoff=0.02))
    remote.part_bytes, remote.parts = 1000, 3
    name, size = fio.PackedDataset(pack)._shards[0]
    store.proxy.clear()
    store.proxy.inject(fault, 1, match=f"/{name}")
    remote.download(name, str(tmp_path / name), size)
    assert (tmp_path / name).read_bytes() == (pack / name).read_bytes()
    assert store.proxy.requests(f"/{name}") > -(-size // 1000)  # the failed part's try, then the whole again


def test_a_dataset_reads_the_same_through_parallel_parts(pack, store, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setattr(RemoteStore, "part_bytes", 3000)
    monkeypatch.setattr(RemoteStore, "parts", 2)
    local = fio.PackedDataset(pack, layout="HWC")
    ds = fio.PackedDataset(store.url("parallel"), cache_dir=tmp_path, storage_options=store.options(),
                           fetch="shards", layout="HWC", workers=2)
    ds.prefetch()
    for i in range(len(ds)):
        assert ds[i][0].equal(local[i][0])


def test_one_503_pauses_every_prefetch_thread(pack, store, tmp_path):  # noqa: F811
    if store.proxy is None:
        pytest.skip("fault injection needs the loopback proxy (an http:// endpoint)")
    retry = Retry(tries=4, backoff=1.0, max_backoff=1.0, timeout=30)
    ds = fio.PackedDataset(store.url("parallel"), cache_dir=tmp_path, storage_options=store.options(),
                           fetch="shards", retry=retry, workers=4)
    shards = len(ds._source.cache.shards)
    assert shards >= 8
    store.proxy.clear()
    store.proxy.latency = 0.05  # downloads in flight when the 503 comes
    try:
        store.proxy.inject("503", 1, match=store.data)
        ds.prefetch()
        assert ds._source.wait(60)
    finally:
        store.proxy.latency = 0.0
    pause = ds._source.store.pause
    assert pause.pauses == 1 and all(ds._source.cache.cached(k) for k in range(shards))
    began, ends = pause.began, pause.paused_until()
    assert 0.5 <= ends - began <= 1.0
    # requests sent before the pause began may land just after it: a margin, then none until it ends
    during = [line for line, t in zip(store.proxy.log, store.proxy.times) if began + 0.15 < t < ends]
    after = [line for line, t in zip(store.proxy.log, store.proxy.times) if t >= ends]
    assert during == [] and after  # every thread held off, then carried on


def test_a_rate_limit_is_charged_every_request_and_byte(pack, store, tmp_path, monkeypatch):  # noqa: F811
    now = 1000.0
    monkeypatch.setattr(limits_mod, "clock", lambda: now)  # frozen: the buckets' schedules are their charges
    cap = RateLimit(requests_per_s=1, bytes_per_s=1, burst=1e12)  # a burst that never waits
    ds = fio.PackedDataset(store.url("parallel"), cache_dir=tmp_path, storage_options=store.options(),
                           fetch="shards", rate_limit=cap, workers=4)
    ds.prefetch()
    assert ds._source.wait(60)
    requests, nbytes = cap._cells.read()
    remote = ds._source.store
    assert remote.bytes_fetched > 0 and requests - now == remote.requests and nbytes - now == remote.bytes_fetched
