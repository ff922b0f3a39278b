"""The remote shard cache (fastprep/io/remote/_cache.py) under threads and processes, over a file://
pack with many small shards and a cache of three: a thread that waited for a download is never
blocked by the downloader's hold of the shard (the interleaving behind a rare hang of
test_threads_share_a_small_cache), and threads of two processes downloading, holding, evicting and
prefetching the same shards at once never hang, never read a wrong byte. Hangs fail, in child
processes with a watchdog, or by tests/helpers/remote_guard.py in this one."""

import fcntl
import itertools
import os
import subprocess
import sys
import threading
from types import SimpleNamespace

import numpy as np
import pytest

import fastprep.io as fio
import fastprep.io.remote._cache as cache_module
from fastprep.io.remote import Retry

from helpers.jpeg_photos import encode, needs_decoder, photo
from helpers.remote_guard import hang_guard  # noqa: F401 (autouse: a hang fails with every thread's stack)

pytestmark = [needs_decoder, pytest.mark.one_backend]


@pytest.fixture(scope="module")
def pack(tmp_path_factory):
    """A pack of 16 small images, about one per 4 KiB shard."""
    root = tmp_path_factory.mktemp("cache")
    (root / "src" / "a").mkdir(parents=True)
    camera = photo("camera")
    for j in range(16):
        (root / "src" / "a" / f"{j:02}.jpg").write_bytes(encode(np.ascontiguousarray(camera[8 * j:8 * j + 200, :200])))
    fio.pack(root / "src", root / "pack", progress=False, shard_bytes=1 << 12)
    assert len(fio.PackedDataset(root / "pack")._shards) >= 8
    return root / "pack"


def test_a_thread_waiting_for_a_download_is_not_blocked_by_the_downloaders_hold(pack, tmp_path, monkeypatch):
    # Two threads find shard 0 missing; one downloads it and holds it (as a dataset does while the
    # shard is mapped: maybe for ever); the other starts waiting for the download only then (a thread
    # the system wakes late). It must get the shard while the first still holds it.
    cache = fio.PackedDataset(f"file://{pack}", cache_dir=tmp_path, fetch="shards", retry=Retry(tries=1))._source.cache
    both_missing, first_held, turn = threading.Barrier(2, timeout=10), threading.Event(), itertools.count()

    def flock(fd, op):
        if op == fcntl.LOCK_EX:  # a blocking wait for a download: both threads found the shard missing
            both_missing.wait()
            if next(turn) == 1:
                first_held.wait(10)
        return fcntl.flock(fd, op)

    locks = {name: getattr(fcntl, name) for name in ("LOCK_SH", "LOCK_EX", "LOCK_NB", "LOCK_UN")}
    monkeypatch.setattr(cache_module, "fcntl", SimpleNamespace(**locks, flock=flock))
    held = {}

    def take(name):
        held[name] = cache.acquire(0)
        first_held.set()

    threads = [threading.Thread(target=take, args=(name,), daemon=True) for name in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    got = len(held)
    for _ in range(2):  # a blocked thread goes on once the hold ends: release what it takes then
        for h in list(held.values()):
            cache.release(h)
        for t in threads:
            t.join(10)
    assert got == 2, "the thread that waited for shard 0's download is blocked by the downloader's hold"
    assert cache.downloads == 1 and not any(t.is_alive() for t in threads)


def test_release_twice_closes_the_lock_file_once(pack, tmp_path):
    cache = fio.PackedDataset(f"file://{pack}", cache_dir=tmp_path, fetch="shards", retry=Retry(tries=1))._source.cache
    held = cache.acquire(0)
    cache.release(held)
    other = os.open(os.devnull, os.O_RDONLY)  # the number the released lock file had, most likely
    try:
        cache.release(held)
        os.fstat(other)  # still open: the second release closed nothing
    finally:
        os.close(other)


HAMMER = """
import faulthandler, os, random, sys, threading, time
from concurrent.futures import ThreadPoolExecutor
import fastprep.io as fio
from fastprep.io.remote import Retry

def hung():  # this process's flocks and every thread's stack, then out
    mine = [line for line in open("/proc/locks") if f" {os.getpid()} " in line]
    sys.stderr.write("hung; this process's flocks:\\n" + "".join(mine))
    faulthandler.dump_traceback(sys.stderr, all_threads=True)
    os._exit(3)

watchdog = threading.Timer(40, hung)
watchdog.daemon = True
watchdog.start()
pack, cache, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
local = fio.PackedDataset(pack)
want = [bytes(local.record(i)) for i in range(len(local))]
limit = 3 * max(size for _, size in local._shards)  # room for three shards: evictions all the time
rng, reads, end = random.Random(os.getpid()), 0, time.monotonic() + seconds
while time.monotonic() < end:  # rounds: a fresh dataset (its holds end with it), as a test or epoch ends
    ds = fio.PackedDataset("file://" + pack, cache_dir=cache, fetch="shards", cache_limit=limit,
                           retry=Retry(tries=3, backoff=0.0, max_backoff=0.0, timeout=5))
    order = rng.sample(range(len(want)), len(want))
    ds.prefetch(order)  # the prefetcher's threads download and release the same shards meanwhile
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda i: bytes(ds.record(i)), order * 2))
    assert got == [want[i] for i in order * 2]
    assert ds._source.wait(30)
    reads += len(got)
watchdog.cancel()
print(reads)
"""


@pytest.mark.slow  # a stress run of two processes: .ci/slow
def test_threads_of_two_processes_hammer_a_tiny_cache_without_hanging(pack, tmp_path):
    args = [sys.executable, "-c", HAMMER, str(pack), str(tmp_path / "cache"), "1.5"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    kids = [subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True) for _ in range(2)]
    try:
        outs = [kid.communicate(timeout=90) for kid in kids]
    finally:
        for kid in kids:
            kid.kill()
    for kid, (out, err) in zip(kids, outs):
        assert kid.returncode == 0, err[-4000:]
        assert int(out) > 0
