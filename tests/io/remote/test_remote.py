"""Remote packs (fastprep.io.remote) against each store's real server on loopback (tests/helpers/store_servers.py:
moto's S3, a GCS emulator, Azurite, nginx; tests/helpers/s3_server.py says how to point the s3 run at MinIO, S3
or GCS): reads equal local reads bit
for bit (JPEG and raw packs, windows and whole images, by shard and by range), a window read by
range moves only its rows, the cache evicts past its limit, two processes share one download per
shard, pack to s3:// resumes, faults are retried or named (tests/io/remote/test_remote_faults.py)."""

import gc
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch

import fastprep.io as fio
from fastprep.errors import RemoteAccessError
from fastprep.io.remote import Retry

from helpers.jpeg_photos import encode, grey_jpeg, needs_decoder, photo, photo_jpeg, write_tree
from helpers.remote_guard import hang_guard, text_of  # noqa: F401 (hang_guard: autouse, a hang fails with every thread's stack)
from helpers.store_servers import store  # noqa: F401 (the session's server fixture, one per kind of store)

pytestmark = [needs_decoder, pytest.mark.one_backend]

FILES = {
    "a/444.jpg": lambda: photo_jpeg("astronaut", "4:4:4", False, (131, 157)),
    "a/422p.jpg": lambda: photo_jpeg("chelsea", "4:2:2", True, (150, 203)),
    "b/420.jpg": lambda: photo_jpeg("coffee", "4:2:0", False, (301, 333)),
    "c/grey.jpg": lambda: grey_jpeg(False, (91, 130)),
}
FAST = Retry(tries=4, backoff=0.01, max_backoff=0.05, timeout=30)  # generous: CI machines are loaded


@pytest.fixture(scope="module")
def packs(tmp_path_factory, store):  # noqa: F811
    root = tmp_path_factory.mktemp("remote")
    (root / "src").mkdir()
    write_tree(root / "src", FILES)
    for mode in ("jpeg", "raw"):
        fio.pack(root / "src", root / mode, mode=mode, progress=False, shard_bytes=1 << 14, threads=2)
        store.pack(root / "src", mode, root / mode, mode=mode, progress=False)
    return root


def remote(store, name, tmp_path, **kw):  # noqa: F811
    return fio.PackedDataset(store.url(name), cache_dir=tmp_path / "cache", storage_options=store.options(),
                             retry=kw.pop("retry", FAST), **kw)


def windows(h, w):
    return [None, (0, 0, 1, 1), (h // 3, w // 4, h // 3, w // 2), (h - 5, w - 7, 5, 7), (0, 0, h, w // 3)]


@pytest.mark.parametrize(("mode", "fetch"), [("jpeg", "shards"), ("jpeg", "ranges"), ("raw", "ranges")])
def test_remote_reads_equal_local_reads(packs, store, tmp_path, mode, fetch):  # noqa: F811
    local = fio.PackedDataset(packs / mode)
    ds = remote(store, mode, tmp_path, fetch=fetch)
    assert len(ds) == len(local) and ds.targets == local.targets
    for i in range(len(local)):
        a, b = local.load_raw(i)[0], ds.load_raw(i)[0]
        for crop in windows(a.height, a.width):
            assert torch.equal(a.decode(crop), b.decode(crop)), (i, crop)
            if mode == "jpeg":
                assert a.cut(crop) == b.cut(crop)
    assert ds.bytes_fetched > 0
    cached = list((tmp_path / "cache").glob("*/shard-*.fpk"))
    assert len(cached) == (0 if (mode, fetch) == ("jpeg", "ranges") else len(local._shards))  # raw: never by range


def test_the_index_is_fetched_once_while_it_is_unchanged(packs, store, tmp_path):  # noqa: F811
    if store.proxy is None:
        pytest.skip("counting requests needs the loopback proxy (an http:// endpoint)")
    store.proxy.clear()
    for _ in range(3):  # three ranks opening the pack
        assert len(remote(store, "jpeg", tmp_path)) == len(fio.PackedDataset(packs / "jpeg"))
    # the index whole once; each later open reads its 64-byte header to check the copy is the store's
    whole = [r for r in store.proxy.log if r.startswith(store.data) and not r.endswith(" bytes=0-63")]
    data = store.proxy.requests(store.data)
    assert len(whole) == 1 and data == 3
    index = next(tmp_path.glob("cache/*/index.fpi"))
    data = bytearray(index.read_bytes())
    data[70] ^= 1  # a damaged local copy (its table): fetched again
    index.write_bytes(bytes(data))
    assert len(remote(store, "jpeg", tmp_path)) == len(fio.PackedDataset(packs / "jpeg"))
    assert store.proxy.requests(store.data) == 4


def test_auto_reads_by_range_until_an_order_is_known(packs, store, tmp_path):  # noqa: F811
    local = fio.PackedDataset(packs / "jpeg")
    total = sum(s for _, s in local._shards)
    small = remote(store, "jpeg", tmp_path / "small", cache_limit=total - 1)  # the pack does not fit: ranges
    assert torch.equal(small.load_raw(1)[0].decode((0, 0, 16, 16)), local.load_raw(1)[0].decode((0, 0, 16, 16)))
    assert not list((tmp_path / "small").glob("*/shard-*.fpk"))
    small.prefetch([1, 0])  # an epoch's order: whole shards, ahead of use
    assert small._source.wait(30)
    assert torch.equal(small.load_raw(1)[0].decode(), local.load_raw(1)[0].decode())
    assert small._source.cache.cached(int(local._entries["shard"][1]))
    fits = remote(store, "jpeg", tmp_path / "fits", cache_limit=10 * total)  # it fits: whole shards
    fits.load_raw(2)[0].decode((0, 0, 16, 16))
    assert fits._source.cache.cached(int(local._entries["shard"][2]))


def test_a_window_read_by_range_moves_only_its_rows(store, tmp_path):  # noqa: F811
    from PIL import Image

    big = np.asarray(Image.fromarray(photo("astronaut")).resize((1024, 1024), Image.LANCZOS))
    (tmp_path / "src" / "a").mkdir(parents=True)
    (tmp_path / "src" / "a" / "big.jpg").write_bytes(encode(big))
    store.pack(tmp_path / "src", "big", tmp_path / "big", progress=False)
    local = fio.PackedDataset(tmp_path / "big")
    ds = remote(store, "big", tmp_path, fetch="ranges")
    record = int(local._entries["length"][0])
    crop = (384, 384, 256, 256)
    before = ds.bytes_fetched
    assert torch.equal(ds.load_raw(0)[0].decode(crop), local.load_raw(0)[0].decode(crop))
    moved = ds.bytes_fetched - before
    assert moved <= 0.40 * record, f"{moved} of {record} bytes"
    before = ds.bytes_fetched
    assert ds.load_raw(0)[0].cut(crop) == local.load_raw(0)[0].cut(crop)
    assert 0 < ds.bytes_fetched - before < moved  # the GPU split's cut: the same rows, the head kept
    before = ds.bytes_fetched
    assert torch.equal(ds.load_raw(0)[0].decode(), local.load_raw(0)[0].decode())
    assert record - 8192 < ds.bytes_fetched - before < record  # a whole image: the rest of the record, once


def test_the_cache_evicts_least_recently_used_past_its_limit(packs, store, tmp_path):  # noqa: F811
    local = fio.PackedDataset(packs / "jpeg")
    sizes = [s for _, s in local._shards]
    assert len(sizes) >= 3
    limit = sum(sizes) - 1  # not all of them
    ds = remote(store, "jpeg", tmp_path, cache_limit=limit, fetch="shards")
    for _ in range(2):
        for i in range(len(local)):
            assert torch.equal(ds.load_raw(i)[0].decode(), local.load_raw(i)[0].decode())
            assert ds._source.cache.used_bytes() <= limit
    cache = ds._source.cache
    assert cache.downloads > len(sizes)  # evicted shards came back
    del ds  # its maps' holds end with it
    gc.collect()
    held = cache.acquire(0)  # in use: never evicted, even when the cache must make room
    cache.make_room(10 * limit)
    assert os.path.exists(held.path) and not any(cache.cached(k) for k in range(1, len(sizes)))
    cache.release(held)
    cache.make_room(10 * limit)
    assert not cache.cached(0)


@pytest.mark.parametrize("mode", ["jpeg", "raw"])
def test_threads_share_a_small_cache(packs, store, tmp_path, mode):  # noqa: F811
    local = fio.PackedDataset(packs / mode)
    want = [local[i][0] for i in range(len(local))]
    limit = sum(s for _, s in local._shards) - 1  # shards are dropped, evicted and fetched again while in use
    ds = remote(store, mode, tmp_path, cache_limit=limit, fetch="shards")
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda i: ds[i % len(ds)][0], range(4 * len(ds))))
    assert all(torch.equal(g, want[i % len(want)]) for i, g in enumerate(got))


def test_prefetch_downloads_in_first_use_order_within_the_budget(packs, store, tmp_path):  # noqa: F811
    local = fio.PackedDataset(packs / "jpeg")
    order = list(reversed(range(len(local))))
    ds = remote(store, "jpeg", tmp_path, fetch="shards")
    shards = ds.prefetch(order)
    assert shards == list(dict.fromkeys(int(local._entries["shard"][i]) for i in order))
    assert ds._source.wait(30)
    assert all(ds._source.cache.cached(k) for k in shards)
    small = remote(store, "jpeg", tmp_path / "small", fetch="shards", cache_limit=2 * max(s for _, s in local._shards))
    small.prefetch(order)
    assert small._source.wait(30)
    assert small._source.cache.cached(shards[0]) and not small._source.cache.cached(shards[-1])


CHILD = """
import json, sys, fastprep.io as fio
from fastprep.io.remote import Retry
print("ready", flush=True)
sys.stdin.readline()
ds = fio.PackedDataset(sys.argv[1], cache_dir=sys.argv[2], storage_options=json.loads(sys.argv[3]),
                       fetch="shards", retry=Retry(tries=4, backoff=0.01))
print(sum(int(ds.load_raw(i)[0].decode().sum()) for i in range(len(ds))))
"""


def test_two_processes_sharing_a_cache_download_each_shard_once(packs, store, tmp_path):  # noqa: F811
    if store.proxy is None:
        pytest.skip("counting requests needs the loopback proxy (an http:// endpoint)")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    args = [sys.executable, "-c", CHILD, store.url("jpeg"), str(tmp_path / "cache"), json.dumps(store.options())]
    kid = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True)  # rank 1
    try:
        assert kid.stdout.readline().strip() == "ready"
        store.proxy.clear()
        store.proxy.latency, store.proxy.bandwidth = 0.3, 100_000  # slow downloads overlap: one waits on the other's lock
        kid.stdin.write("go\n")
        kid.stdin.flush()
        ds = remote(store, "jpeg", tmp_path, fetch="shards")  # rank 0: this process
        here = sum(int(ds.load_raw(i)[0].decode().sum()) for i in range(len(ds)))
        out, _ = kid.communicate(timeout=120)
    finally:
        store.proxy.latency, store.proxy.bandwidth = 0.0, None
        kid.kill()
    assert kid.returncode == 0 and int(out) == here
    for name, _ in fio.PackedDataset(packs / "jpeg")._shards:
        gets = [line for line in store.proxy.log if line.startswith(store.data) and f"/{name}" in line]
        assert len(gets) == 1, gets


def test_dataloader_workers_read_a_remote_pack(packs, store, tmp_path, capfd):  # noqa: F811
    local = fio.PackedDataset(packs / "jpeg")
    ds = remote(store, "jpeg", tmp_path, fetch="shards")
    ds.load_raw(0)[0].decode()  # the parent's client in use before the workers fork
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2, collate_fn=lambda x: x, timeout=60)
    assert all(torch.equal(a[0], local[i][0]) for i, a in enumerate(loader))
    assert "loop" not in capfd.readouterr().err  # no worker closes its parent's connections


def test_pack_to_a_store_resumes_and_uploads_only_what_is_missing(packs, store, tmp_path):  # noqa: F811
    from fastprep.io.packed._upload import upload_pack
    from fastprep.io.remote._store import RemoteStore

    with pytest.raises(FileNotFoundError, match=f"no index.fpi at {store.kind}://"):
        remote(store, "nothing-here", tmp_path)
    store.needs_writable()
    assert upload_pack(packs / "jpeg", store.url("jpeg"), storage_options=store.options()) == 0
    objects = RemoteStore(store.url("jpeg"), store.options())
    objects.remove("shard-00001.fpk")
    assert objects.size("shard-00001.fpk") is None
    assert upload_pack(packs / "jpeg", store.url("jpeg"), storage_options=store.options()) == 1
    assert objects.size("shard-00001.fpk") == os.path.getsize(packs / "jpeg" / "shard-00001.fpk")


@pytest.mark.parametrize("last", [b"\r", b"\n", b"\r\n", b"-", b"\x00"])
def test_an_upload_keeps_every_last_byte(store, tmp_path, last):  # noqa: F811
    """gcsfs's one-shot upload (files under 5 MiB) ends the body's part with a bare LF, so a server
    that reads CRLF as the delimiter dropped a file's final '\\r' (a 1-in-256 shard did, in CI)."""
    from fastprep.io.remote._store import RemoteStore

    store.needs_writable()
    local = tmp_path / "object.bin"
    local.write_bytes(b"fastprep" * 100 + last)
    objects = RemoteStore(store.url(f"last-byte-{last.hex()}"), store.options())
    objects.upload(str(local), "object.bin")
    size = local.stat().st_size
    assert objects.size("object.bin") == size
    assert objects.read("object.bin", 0, size) == local.read_bytes()


def test_bad_arguments_are_named(packs, store, tmp_path):  # noqa: F811
    for kw, text in [({"fetch": "some"}, "fetch"), ({"cache_limit": 0}, "cache_limit"), ({"workers": 0}, "workers")]:
        with pytest.raises(ValueError, match=text):
            remote(store, "jpeg", tmp_path, **kw)
    with pytest.raises(ValueError, match="tries"):
        Retry(tries=0)
    url, options, secret = store.url("jpeg"), store.options(), store.secret
    if store.kind == "s3":  # moto takes any key: one planted where s3fs takes it
        options, secret = {**options, "key": "testing", "secret": "hush-1234"}, "hush-1234"
    if secret is None:
        pytest.skip(f"{store.kind}:// here has no credential (the emulator checks none)")
    ds = fio.PackedDataset(url, cache_dir=tmp_path, storage_options=options, retry=FAST)
    assert secret not in repr(ds) + repr(ds._source.store) + ds.path + ds.where(0)


def test_a_wrong_credential_is_refused_at_once_and_never_shown(packs, store, tmp_path):  # noqa: F811
    if store.wrong is None:
        pytest.skip(f"the {store.kind}:// server here checks no credential")
    url, options = store.url("jpeg"), store.options()
    if "query" in store.wrong:  # a token in the URL's query string
        url, bad = url.split("?")[0] + "?" + store.wrong["query"], store.wrong["query"]
    else:
        options, bad = store.wrong, next(iter(store.wrong.values()))
    with pytest.raises(RemoteAccessError, match="access denied: check credentials") as info:
        fio.PackedDataset(url, cache_dir=tmp_path, storage_options=options, retry=Retry(tries=5, backoff=5.0))
    assert f"{store.root}/jpeg/index.fpi" in str(info.value)  # named; not retried (a backoff of 5 s would show)
    assert all(s not in text_of(info.value) for s in (bad, store.secret)), text_of(info.value)

