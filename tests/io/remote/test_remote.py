"""Remote packs (fastprep.io.remote) against a real S3-API server on loopback (moto, started by the
tests; tests/s3_server.py says how to point them at MinIO, S3 or GCS): reads equal local reads bit
for bit (JPEG and raw packs, windows and whole images, by shard and by range), a window read by
range moves only its rows, the cache evicts past its limit, two processes share one download per
shard, pack to s3:// resumes, faults are retried or named (tests/io/remote/test_remote_faults.py)."""

import gc
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch
from remote_guard import hang_guard  # noqa: F401 (autouse: a hang fails with every thread's stack)

import fastprep.io as fio
from fastprep.io.remote import Retry

from jpeg_photos import encode, grey_jpeg, needs_decoder, photo, photo_jpeg, write_tree
from s3_server import s3  # noqa: F401 (the session's server fixture)

pytestmark = [needs_decoder, pytest.mark.one_backend]

FILES = {
    "a/444.jpg": lambda: photo_jpeg("astronaut", "4:4:4", False, (131, 157)),
    "a/422p.jpg": lambda: photo_jpeg("chelsea", "4:2:2", True, (150, 203)),
    "b/420.jpg": lambda: photo_jpeg("coffee", "4:2:0", False, (301, 333)),
    "c/grey.jpg": lambda: grey_jpeg(False, (91, 130)),
}
FAST = Retry(tries=4, backoff=0.01, max_backoff=0.05, timeout=30)  # generous: CI machines are loaded


@pytest.fixture(scope="module")
def packs(tmp_path_factory, s3):  # noqa: F811
    root = tmp_path_factory.mktemp("remote")
    (root / "src").mkdir()
    write_tree(root / "src", FILES)
    for mode in ("jpeg", "raw"):
        fio.pack(root / "src", root / mode, mode=mode, progress=False, shard_bytes=1 << 14, threads=2)
        fio.pack(root / "src", s3.url(mode), mode=mode, storage_options=s3.options(), staging=root / mode,
                 progress=False)
    return root


def remote(s3, name, tmp_path, **kw):  # noqa: F811
    return fio.PackedDataset(s3.url(name), cache_dir=tmp_path / "cache", storage_options=s3.options(),
                             retry=kw.pop("retry", FAST), **kw)


def windows(h, w):
    return [None, (0, 0, 1, 1), (h // 3, w // 4, h // 3, w // 2), (h - 5, w - 7, 5, 7), (0, 0, h, w // 3)]


@pytest.mark.parametrize(("mode", "fetch"), [("jpeg", "shards"), ("jpeg", "ranges"), ("raw", "ranges")])
def test_remote_reads_equal_local_reads(packs, s3, tmp_path, mode, fetch):  # noqa: F811
    local = fio.PackedDataset(packs / mode)
    ds = remote(s3, mode, tmp_path, fetch=fetch)
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


def test_the_index_is_fetched_once_while_it_is_unchanged(packs, s3, tmp_path):  # noqa: F811
    if s3.proxy is None:
        pytest.skip("counting requests needs the loopback proxy (an http:// endpoint)")
    s3.proxy.clear()
    for _ in range(3):  # three ranks opening the pack
        assert len(remote(s3, "jpeg", tmp_path)) == len(fio.PackedDataset(packs / "jpeg"))
    # the index whole once; each later open reads its 64-byte header to check the copy is the store's
    whole = [r for r in s3.proxy.log if r.startswith("GET") and "bytes=" not in r]
    assert len(whole) == 1 and s3.proxy.requests("GET") == 3 and s3.proxy.requests("HEAD") == 3
    index = next(tmp_path.glob("cache/*/index.fpi"))
    data = bytearray(index.read_bytes())
    data[70] ^= 1  # a damaged local copy (its table): fetched again
    index.write_bytes(bytes(data))
    assert len(remote(s3, "jpeg", tmp_path)) == len(fio.PackedDataset(packs / "jpeg"))
    assert s3.proxy.requests("GET") == 4


def test_auto_reads_by_range_until_an_order_is_known(packs, s3, tmp_path):  # noqa: F811
    local = fio.PackedDataset(packs / "jpeg")
    total = sum(s for _, s in local._shards)
    small = remote(s3, "jpeg", tmp_path / "small", cache_limit=total - 1)  # the pack does not fit: ranges
    assert torch.equal(small.load_raw(1)[0].decode((0, 0, 16, 16)), local.load_raw(1)[0].decode((0, 0, 16, 16)))
    assert not list((tmp_path / "small").glob("*/shard-*.fpk"))
    small.prefetch([1, 0])  # an epoch's order: whole shards, ahead of use
    assert small._remote.wait(30)
    assert torch.equal(small.load_raw(1)[0].decode(), local.load_raw(1)[0].decode())
    assert small._remote.cache.cached(int(local._entries["shard"][1]))
    fits = remote(s3, "jpeg", tmp_path / "fits", cache_limit=10 * total)  # it fits: whole shards
    fits.load_raw(2)[0].decode((0, 0, 16, 16))
    assert fits._remote.cache.cached(int(local._entries["shard"][2]))


def test_a_window_read_by_range_moves_only_its_rows(s3, tmp_path):  # noqa: F811
    from PIL import Image

    big = np.asarray(Image.fromarray(photo("astronaut")).resize((1024, 1024), Image.LANCZOS))
    (tmp_path / "src" / "a").mkdir(parents=True)
    (tmp_path / "src" / "a" / "big.jpg").write_bytes(encode(big))
    fio.pack(tmp_path / "src", s3.url("big"), storage_options=s3.options(), staging=tmp_path / "big",
             progress=False)
    local = fio.PackedDataset(tmp_path / "big")
    ds = remote(s3, "big", tmp_path, fetch="ranges")
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


def test_the_cache_evicts_least_recently_used_past_its_limit(packs, s3, tmp_path):  # noqa: F811
    local = fio.PackedDataset(packs / "jpeg")
    sizes = [s for _, s in local._shards]
    assert len(sizes) >= 3
    limit = sum(sizes) - 1  # not all of them
    ds = remote(s3, "jpeg", tmp_path, cache_limit=limit, fetch="shards")
    for _ in range(2):
        for i in range(len(local)):
            assert torch.equal(ds.load_raw(i)[0].decode(), local.load_raw(i)[0].decode())
            assert ds._remote.cache.used_bytes() <= limit
    cache = ds._remote.cache
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
def test_threads_share_a_small_cache(packs, s3, tmp_path, mode):  # noqa: F811
    local = fio.PackedDataset(packs / mode)
    want = [local[i][0] for i in range(len(local))]
    limit = sum(s for _, s in local._shards) - 1  # shards are dropped, evicted and fetched again while in use
    ds = remote(s3, mode, tmp_path, cache_limit=limit, fetch="shards")
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda i: ds[i % len(ds)][0], range(4 * len(ds))))
    assert all(torch.equal(g, want[i % len(want)]) for i, g in enumerate(got))


def test_prefetch_downloads_in_first_use_order_within_the_budget(packs, s3, tmp_path):  # noqa: F811
    local = fio.PackedDataset(packs / "jpeg")
    order = list(reversed(range(len(local))))
    ds = remote(s3, "jpeg", tmp_path, fetch="shards")
    shards = ds.prefetch(order)
    assert shards == list(dict.fromkeys(int(local._entries["shard"][i]) for i in order))
    assert ds._remote.wait(30)
    assert all(ds._remote.cache.cached(k) for k in shards)
    small = remote(s3, "jpeg", tmp_path / "small", fetch="shards", cache_limit=2 * max(s for _, s in local._shards))
    small.prefetch(order)
    assert small._remote.wait(30)
    assert small._remote.cache.cached(shards[0]) and not small._remote.cache.cached(shards[-1])


CHILD = """
import sys, fastprep.io as fio
from fastprep.io.remote import Retry
print("ready", flush=True)
sys.stdin.readline()
ds = fio.PackedDataset(sys.argv[1], cache_dir=sys.argv[2], storage_options={"endpoint_url": sys.argv[3]},
                       fetch="shards", retry=Retry(tries=4, backoff=0.01))
print(sum(int(ds.load_raw(i)[0].decode().sum()) for i in range(len(ds))))
"""


def test_two_processes_sharing_a_cache_download_each_shard_once(packs, s3, tmp_path):  # noqa: F811
    if s3.proxy is None:
        pytest.skip("counting requests needs the loopback proxy (an http:// endpoint)")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    args = [sys.executable, "-c", CHILD, s3.url("jpeg"), str(tmp_path / "cache"), s3.endpoint]
    kid = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True)  # rank 1
    try:
        assert kid.stdout.readline().strip() == "ready"
        s3.proxy.clear()
        s3.proxy.latency, s3.proxy.bandwidth = 0.3, 100_000  # slow downloads overlap: one waits on the other's lock
        kid.stdin.write("go\n")
        kid.stdin.flush()
        ds = remote(s3, "jpeg", tmp_path, fetch="shards")  # rank 0: this process
        here = sum(int(ds.load_raw(i)[0].decode().sum()) for i in range(len(ds)))
        out, _ = kid.communicate(timeout=120)
    finally:
        s3.proxy.latency, s3.proxy.bandwidth = 0.0, None
        kid.kill()
    assert kid.returncode == 0 and int(out) == here
    for name, _ in fio.PackedDataset(packs / "jpeg")._shards:
        gets = [line for line in s3.proxy.log if line.startswith("GET") and f"/{name}" in line]
        assert len(gets) == 1, gets


def test_dataloader_workers_read_a_remote_pack(packs, s3, tmp_path, capfd):  # noqa: F811
    local = fio.PackedDataset(packs / "jpeg")
    ds = remote(s3, "jpeg", tmp_path, fetch="shards")
    ds.load_raw(0)[0].decode()  # the parent's client in use before the workers fork
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2, collate_fn=lambda x: x, timeout=60)
    assert all(torch.equal(a[0], local[i][0]) for i, a in enumerate(loader))
    assert "loop" not in capfd.readouterr().err  # no worker closes its parent's connections


def test_pack_to_s3_resumes_and_uploads_only_what_is_missing(packs, s3, tmp_path):  # noqa: F811
    from fastprep.io.remote.upload import upload_pack

    assert upload_pack(packs / "jpeg", s3.url("jpeg"), storage_options=s3.options()) == 0
    s3_fs = fio.PackedDataset(s3.url("jpeg"), cache_dir=tmp_path, storage_options=s3.options())._remote.store.fs
    shard = f"{s3.bucket}/{s3.prefix}/jpeg/shard-00001.fpk"
    s3_fs.rm_file(shard)
    assert upload_pack(packs / "jpeg", s3.url("jpeg"), storage_options=s3.options()) == 1
    assert s3_fs.size(shard) == os.path.getsize(packs / "jpeg" / "shard-00001.fpk")
    with pytest.raises(FileNotFoundError, match="no index.fpi at s3://"):
        remote(s3, "nothing-here", tmp_path)


def test_bad_arguments_are_named(packs, s3, tmp_path):  # noqa: F811
    for kw, text in [({"fetch": "some"}, "fetch"), ({"cache_limit": 0}, "cache_limit"), ({"workers": 0}, "workers")]:
        with pytest.raises(ValueError, match=text):
            remote(s3, "jpeg", tmp_path, **kw)
    with pytest.raises(ValueError, match="tries"):
        Retry(tries=0)
    keys = {**s3.options(), "key": "testing", "secret": "hush-1234"}
    ds = fio.PackedDataset(s3.url("jpeg"), cache_dir=tmp_path, storage_options=keys)
    assert "hush" not in repr(ds) + repr(ds._remote.store)

