"""A server that trickles bytes (a few every 50 ms: never quiet long enough for a per-request
timeout) cannot keep a download alive past Retry.deadline: the reader gets a RemoteReadError naming
the URL and the deadline, every reader waiting on that shard's download gives up with it, and
nothing partial is left in the cache. The trickling server is on 127.0.0.1 and stops by itself."""

import threading

import pytest

import fastprep.io as fio
from fastprep.io.remote import Retry

from helpers.jpeg_photos import grey_jpeg, needs_decoder, packed_tree, photo_jpeg
from helpers.pack_http_server import PackServer
from helpers.remote_guard import hang_guard  # noqa: F401 (autouse: a hang fails with every thread's stack)

pytestmark = [needs_decoder, pytest.mark.one_backend]

FILES = {"a/1.jpg": lambda: photo_jpeg("coffee", "4:2:0", False, (301, 333)),
         "b/2.jpg": lambda: grey_jpeg(False, (91, 130))}
DEADLINE = 1.5
SLOW = Retry(tries=3, backoff=0.0, max_backoff=0.0, timeout=5, deadline=DEADLINE)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("deadline")
    packed_tree(root, FILES)
    return root


def leftovers(folder):
    return sorted(p.name for p in folder.rglob("*") if p.suffix in (".part", ".fpk"))


@pytest.mark.parametrize("fetch", ["shards", "ranges"])
def test_a_trickling_download_ends_at_the_deadline_with_a_named_error(served, tmp_path, fetch):
    with PackServer(str(served), trickle=".fpk") as srv:
        ds = fio.PackedDataset(f"{srv.url}/pack", cache_dir=tmp_path, retry=SLOW, fetch=fetch)
        with pytest.raises(fio.RemoteReadError) as info:
            ds.load_raw(0)[0].decode()
    text = str(info.value)
    assert f"{srv.url}/pack/shard-00000.fpk" in text and f"deadline of {DEADLINE:g} s" in text, text
    assert "record 0 (a/1.jpg)" in text or fetch == "ranges"
    assert not any(n.endswith(".part") for n in leftovers(tmp_path)) and "shard-00000.fpk" not in leftovers(tmp_path)


def test_readers_waiting_on_a_trickling_download_give_up_with_it(served, tmp_path):
    errors, done = [], []

    def read(ds):
        try:
            ds[0]
            done.append(True)
        except fio.RemoteReadError as exc:
            errors.append(str(exc))

    with PackServer(str(served), trickle=".fpk") as srv:
        readers = [fio.PackedDataset(f"{srv.url}/pack", cache_dir=tmp_path, retry=SLOW, fetch="shards")
                   for _ in range(3)]  # one downloads, two wait on its lock (own datasets: own lock files)
        threads = [threading.Thread(target=read, args=(ds,), daemon=True) for ds in readers]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)  # a hang guard only: each ends near the deadline
        assert not any(t.is_alive() for t in threads)
    assert not done and len(errors) == 3, errors
    assert all(f"{srv.url}/pack/shard-00000.fpk" in e and f"deadline of {DEADLINE:g} s" in e for e in errors), errors


@pytest.mark.parametrize("bad", [0, -1, "5", True, float("nan")])
def test_a_bad_deadline_is_named(bad):
    with pytest.raises(ValueError, match="deadline"):
        Retry(deadline=bad)
