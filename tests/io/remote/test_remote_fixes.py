"""Remote packs over file:// URLs (no server): the staging folder is safe from the cache's
eviction, a record whose restart index outgrows the first range read is read by range, a forked
child uses its own prefetcher and locks, missing shards and failed downloads are named, credentials
never show, leftovers of killed downloads are removed, deterministic failures are not retried."""

import errno
import os
import shutil

import numpy as np
import pytest
import torch

import fastprep.io as fio
from fastprep.io.remote import RemoteStore, Retry
from fastprep.io.remote._pack_source import default_cache_dir, default_staging_dir
from fastprep.io.remote._retry import describe, redact

from helpers.jpeg_photos import encode, grey_jpeg, needs_decoder, packed_tree, photo, photo_jpeg, write_tree
from helpers.remote_guard import hang_guard  # noqa: F401 (autouse: a hang fails with every thread's stack)

pytestmark = [needs_decoder, pytest.mark.one_backend]

FILES = {"a/1.jpg": lambda: photo_jpeg("coffee", "4:2:0", False, (301, 333)),
         "b/2.jpg": lambda: grey_jpeg(False, (91, 130))}
FAST = Retry(tries=3, backoff=0.0, max_backoff=0.0, timeout=5)


@pytest.fixture(scope="module")
def pack(tmp_path_factory):
    root = tmp_path_factory.mktemp("fixes")
    return packed_tree(root, FILES)


def remote(path, tmp_path, **kw):
    return fio.PackedDataset(f"file://{path}", cache_dir=tmp_path / "cache", retry=kw.pop("retry", FAST), **kw)


def test_staging_is_outside_the_cache_and_eviction_spares_other_folders(pack, tmp_path, monkeypatch):
    monkeypatch.setenv("FASTPREP_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("FASTPREP_STAGING", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert not os.path.commonpath([default_staging_dir(), default_cache_dir()]) == default_cache_dir()
    # a folder under the cache root not named as a pack key (a staging folder of an older version,
    # someone's pack): neither counted nor evicted
    foreign = tmp_path / "cache" / "staging-0123456789abcdef"
    foreign.mkdir(parents=True)
    (foreign / "shard-00000.fpk").write_bytes(b"x" * 10_000)
    ds = remote(pack, tmp_path, fetch="shards", cache_limit=1)
    for i in range(len(ds)):
        ds[i]
    assert (foreign / "shard-00000.fpk").exists()
    assert ds._source.cache.used_bytes() < 10_000


def test_a_record_whose_restart_index_outgrows_the_first_read_is_read_by_range(tmp_path):
    arr = np.ascontiguousarray(np.tile(photo("astronaut"), (3, 4, 1))[:1400, :1800])
    (tmp_path / "src" / "a").mkdir(parents=True)
    (tmp_path / "src" / "a" / "big.jpg").write_bytes(encode(arr, quality=50))
    fio.pack(tmp_path / "src", tmp_path / "pack", progress=False, restart=1)
    local = fio.PackedDataset(tmp_path / "pack")
    ds = remote(tmp_path / "pack", tmp_path, fetch="ranges")
    a, b = local.load_raw(0)[0], ds.load_raw(0)[0]
    for crop in [(700, 900, 64, 80), (0, 0, 16, 16)]:
        assert torch.equal(a.decode(crop), b.decode(crop)), crop


def test_a_forked_child_prefetches_with_its_own_threads_and_locks(pack, tmp_path):
    ds = remote(pack, tmp_path, fetch="shards")
    assert len(ds._shards) >= 2
    ds.prefetch([0])  # the parent's pool: its threads are not in a forked child
    assert ds._source.wait(10)
    ds._source._heads_lock.acquire()  # held by a parent thread at the fork
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        try:
            ds.prefetch()
            ok = ds._source.wait(10) and all(ds._source.cache.cached(k) for k in range(len(ds._shards)))
            ok = ok and ds._source._heads_lock.acquire(timeout=5)
        except BaseException:
            ok = False
        os._exit(0 if ok else 1)
    ds._source._heads_lock.release()
    assert os.waitpid(pid, 0)[1] == 0


def test_a_shard_missing_at_the_url_is_named(pack, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(pack, copy)
    (copy / "shard-00001.fpk").unlink()
    ds = remote(copy, tmp_path, fetch="shards")
    ds[0]
    with pytest.raises(fio.ShardFormatError, match=r"record 1 \(b/2.jpg\).*shard-00001.fpk is missing at file://") \
            as info:
        ds[1]
    assert isinstance(info.value.__cause__, FileNotFoundError)


def test_a_failed_download_names_the_record(pack, tmp_path, monkeypatch):
    ds = remote(pack, tmp_path, fetch="shards")

    def refuse(*args, **kw):
        raise ConnectionError("connection reset")

    monkeypatch.setattr(ds._source.store.fs, "get_file", refuse)
    with pytest.raises(fio.RemoteReadError, match=r"record 1 \(b/2.jpg\).*after 3 tries"):
        ds[1]


@pytest.mark.parametrize(("url", "shown"), [
    ("https://user:SECRET@host/p/train.packed", "https://host/p/train.packed"),
    ("https://host/p?sig=SECRET&x=1", "https://host/p"),
    ("s3://bucket/p#SECRET", "s3://bucket/p"),
    ("file:///data/p", "file:///data/p"),
])
def test_redact(url, shown):
    assert redact(url) == shown
    assert "SECRET" not in repr(RemoteStore(url)) and "SECRET" not in describe(OSError(f"no '{url}'"))


def test_credentials_in_the_url_never_show(pack, tmp_path):
    signed = tmp_path / "pack?sig=SECRET"
    shutil.copytree(pack, signed)
    (signed / "shard-00001.fpk").unlink()
    ds = remote(signed, tmp_path, fetch="shards")
    assert "SECRET" not in repr(ds) + ds.where(0) + ds.path
    with pytest.raises(fio.ShardFormatError) as info:
        ds[1]
    assert "SECRET" not in str(info.value)
    with pytest.raises(FileNotFoundError) as info:
        fio.PackedDataset("file:///nowhere/p?sig=SECRET", cache_dir=tmp_path / "cache", retry=FAST)
    assert "SECRET" not in str(info.value)


def test_a_killed_downloads_part_files_are_removed(pack, tmp_path):
    ds = remote(pack, tmp_path, fetch="shards")
    folder = ds._source.cache.folder
    stale = os.path.join(folder, "shard-00000.fpk.12345.678.part")
    with open(stale, "wb") as f:
        f.write(b"half a shard")
    ds[0]
    assert not os.path.exists(stale)


def test_a_killed_index_downloads_part_file_is_removed(pack, tmp_path):
    remote(pack, tmp_path)  # its cache key: the one index part file name a second open would use
    ((key, _),) = {tuple(n.split(".", 1)) for n in os.listdir(tmp_path / "cache") if n.endswith(".index.lock")}
    os.remove(tmp_path / "cache" / f"{key}.index.json")  # the cached index forgotten: the next open downloads
    stale = tmp_path / "cache" / f"{key}.12345.678.index.part"
    stale.write_bytes(b"half an index")
    remote(pack, tmp_path)
    assert not stale.exists()


def test_another_packs_shard_is_not_downloaded_again(pack, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(pack, copy)
    os.replace(copy / "shard-00000.fpk", copy / "shard-00001.fpk")  # same size? not needed: header first
    ds = remote(copy, tmp_path, fetch="shards", retry=Retry(tries=5, backoff=0.0, max_backoff=0.0))
    ds._shards[1] = ("shard-00001.fpk", os.path.getsize(copy / "shard-00001.fpk"))
    ds._source.cache.shards[1] = ds._shards[1]
    calls = []
    get = ds._source.store.fs.get_file
    ds._source.store.fs.get_file = lambda *a, **kw: (calls.append(a), get(*a, **kw))[1]
    with pytest.raises(fio.ShardFormatError, match=r"shard-00001.fpk is shard 0 of this pack, not shard 1"):
        ds[1]
    assert len(calls) == 1


def test_a_full_local_disk_is_named_and_not_retried():
    calls = []

    def full():
        calls.append(1)
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError, match="local disk is full") as info:
        Retry(tries=4, backoff=0.0).call("downloading shard 0", "s3://b/p/shard-00000.fpk", full)
    assert info.value.errno == errno.ENOSPC and len(calls) == 1


def test_the_index_is_parsed_once_per_open(pack, tmp_path, monkeypatch):
    import fastprep.io._pack_format as fmt

    calls = []
    read = fmt.read_index
    monkeypatch.setattr(fmt, "read_index", lambda p: (calls.append(p), read(p))[1])
    remote(pack, tmp_path)  # downloaded
    remote(pack, tmp_path)  # the cached copy
    assert len(calls) == 2


def test_pack_to_a_signed_url_reports_it_without_the_signature(tmp_path):
    (tmp_path / "src").mkdir()
    write_tree(tmp_path / "src", {"b/2.jpg": FILES["b/2.jpg"]})
    dest = tmp_path / "out?sig=SECRET"
    summary = fio.pack(tmp_path / "src", f"file://{dest}", staging=tmp_path / "staging", progress=False)
    assert "SECRET" not in repr(summary) and (dest / "index.fpi").exists()


def test_a_server_that_ignores_byte_ranges_is_named_at_once(pack, tmp_path):
    """python -m http.server answers a ranged GET with the whole file: named, not retried as a cut body."""
    import functools
    import threading
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(pack.parent)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}/{pack.name}"
    try:
        whole = fio.PackedDataset(url, cache_dir=tmp_path / "shards", fetch="shards", retry=FAST)
        assert torch.equal(whole.load_raw(0)[0].decode(), fio.PackedDataset(pack).load_raw(0)[0].decode())
        ranged = fio.PackedDataset(url, cache_dir=tmp_path / "ranges", fetch="ranges", retry=Retry(tries=5, backoff=5.0))
        with pytest.raises(fio.RemoteReadError, match="the server ignores byte ranges; read by shard"):
            ranged.load_raw(0)[0].decode((0, 0, 8, 8))  # at once: a backoff of 5 s would show
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_gcsfs_keeps_its_sync_and_static_methods_with_its_retries_off():
    """single_try unwraps only gcsfs's retrying coroutines: unwrapping every wrapped method also
    turned fs.call (a sync wrapper) into a coroutine and bound close_session (static), whose
    finalizer then failed at exit and left the session unclosed."""
    gcsfs = pytest.importorskip("gcsfs")
    from fastprep.io.remote._clients import single_try

    fs = gcsfs.GCSFileSystem(token="anon", skip_instance_cache=True)
    single_try(fs, "gs", {})
    unwrapped = {name for name in vars(fs) if callable(vars(fs)[name])}
    assert {"_request", "_get_file_request", "_get_file_concurrent"} <= unwrapped
    assert not unwrapped & {"call", "rm", "mkdir", "close_session"}
    assert fs._request.__func__ is type(fs)._request.__wrapped__
