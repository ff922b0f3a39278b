"""fastprep.io._store: the one store interface, its registry by URL scheme, and the local store
(read in place with pread, counted and rate-limited as a remote store is)."""

import threading

import pytest

import fastprep.io as fio
import fastprep.io._store as st
from fastprep.io.remote import RemoteStore

from helpers.jpeg_photos import photo_jpeg


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "a.bin").write_bytes(bytes(range(256)) * 4)
    (tmp_path / "b.bin").write_bytes(b"hello")
    return tmp_path


@pytest.mark.parametrize(("where", "kind"), [
    ("relative/pack", st.LocalStore),
    ("s3://bucket/train.packed", RemoteStore),
    ("gs://bucket/train.packed", RemoteStore),
    ("az://container/train.packed", RemoteStore),
    ("https://host/pack", RemoteStore),
    ("HTTP://host/pack", RemoteStore),
    ("file:///data/train.packed", RemoteStore),  # fsspec's: the docs' remote reads with no network
    ("memory://pack", RemoteStore),
    ({"index.fpi": "https://host/p/index.fpi?sig=1", "shard-00000.fpk": "https://host/p/s?sig=2"}, RemoteStore),
])
def test_the_registry_picks_the_store_by_scheme(where, kind):
    assert type(st.open_store(where)) is kind
    assert isinstance(st.open_store(where), st.Store)


def test_a_path_object_is_a_local_folder(folder):
    store = st.open_store(folder)
    assert type(store) is st.LocalStore and store.shown == str(folder)


def test_an_unknown_scheme_is_refused_naming_the_url_and_the_schemes_known():
    with pytest.raises(ValueError, match=r"scheme 'nosuch' of 'nosuch://host/p'.*known schemes: '', .*'s3'") as exc:
        st.open_store("nosuch://user:hunter2@host/p?token=secret")
    assert "hunter2" not in str(exc.value) and "secret" not in str(exc.value)


def test_a_scheme_can_be_registered(monkeypatch, folder):
    monkeypatch.setattr(st, "_FACTORIES", dict(st._FACTORIES))  # noqa: SLF001 (restored after the test)
    made = []

    def factory(url, **options):
        made.append((url, options))
        return st.LocalStore(folder)

    st.register_store("mine", factory)
    assert "mine" in st.known_schemes()
    assert st.open_store("mine://x", retry=None).read("b.bin", 0, 5) == b"hello"
    assert made == [("mine://x", {"retry": None})]


@pytest.mark.parametrize(("scheme", "factory", "match"), [
    ("S3", RemoteStore, "lowercase scheme"), ("s3://", RemoteStore, "lowercase scheme"), (3, RemoteStore, "scheme"),
    ("mine", "not callable", "factory to be callable"),
])
def test_a_bad_registration_is_refused(scheme, factory, match):
    with pytest.raises(ValueError, match=match):
        st.register_store(scheme, factory)


@pytest.mark.parametrize("bad", [3, None, b"bytes"])
def test_a_bad_path_is_refused_naming_it(bad):
    with pytest.raises(ValueError, match=r"expected a path, a URL or a mapping"):
        st.open_store(bad)


def test_the_local_store_counts_bytes_and_requests(folder, tmp_path_factory):
    store = st.open_store(folder)
    assert (store.bytes_fetched, store.requests) == (0, 0)
    assert store.read("a.bin", 10, 20) == bytes(range(10, 20))
    assert (store.bytes_fetched, store.requests) == (10, 1)
    assert store.read_ranges("a.bin", [(0, 4), (256, 260), (1020, 1024)]) == [b"\0\1\2\3", b"\0\1\2\3", b"\xfc\xfd\xfe\xff"]
    assert (store.bytes_fetched, store.requests) == (22, 4)
    assert store.size("b.bin") == 5 and store.info("missing") is None
    assert store.requests == 6
    local = tmp_path_factory.mktemp("dl") / "b.copy"
    store.download("b.bin", str(local), 5, check=lambda p: None)
    assert local.read_bytes() == b"hello" and (store.bytes_fetched, store.requests) == (27, 7)


def test_the_local_store_waits_for_its_rate_limit(folder):
    class Limit:
        def __init__(self):
            self.taken = []

        def take(self, requests, nbytes, until):
            self.taken.append((requests, nbytes))
            return 0.0

    limit = Limit()
    store = st.open_store(folder, rate_limit=limit)
    store.read_ranges("a.bin", [(0, 100), (200, 300)])
    store.size("a.bin")
    assert limit.taken == [(2, 200), (1, 0)]
    with pytest.raises(ValueError, match=r"expected rate_limit to be a fastprep.io.remote.RateLimit or None, got 3"):
        st.open_store(folder, rate_limit=3)


def test_the_local_store_reads_from_many_threads_at_once(folder):
    store, wrong = st.open_store(folder), []

    def read(k):
        for _ in range(200):
            a = (k * 37) % 1000
            if store.read("a.bin", a, a + 24) != (bytes(range(256)) * 4)[a:a + 24]:
                wrong.append(k)

    threads = [threading.Thread(target=read, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not wrong and store.requests == 1600  # pread: no file position shared, no count lost


def test_a_local_read_past_the_end_names_the_file(folder):
    with pytest.raises(OSError, match=r"bytes \[3, 9\) of .*b\.bin: the file holds 5 bytes"):
        st.open_store(folder).read("b.bin", 3, 9)


def test_the_local_store_lists_uploads_and_removes(folder, tmp_path_factory):
    dest = tmp_path_factory.mktemp("dest") / "pack"
    store = st.open_store(str(dest))
    store.make_folder()
    assert store.list() == []
    store.upload(str(folder / "b.bin"), "b.bin")
    store.upload(str(dest / "b.bin"), "b.bin")  # itself: nothing to copy
    assert store.list() == ["b.bin"] and store.local_path("b.bin") == str(dest / "b.bin")
    store.remove("b.bin")
    assert store.list() == []


def test_a_remote_store_lists_its_objects(folder):
    pytest.importorskip("fsspec")
    store = st.open_store(f"file://{folder}")
    assert store.list() == ["a.bin", "b.bin"] and store.local_path("a.bin") is None
    assert store.read("b.bin", 1, 3) == b"el" and store.requests == 2  # the listing is a request too


def test_a_local_download_that_fails_its_check_leaves_nothing(folder, tmp_path_factory):
    local = tmp_path_factory.mktemp("dl") / "b.copy"

    def refuse(path):
        raise ValueError("not the object expected")

    with pytest.raises(ValueError, match="not the object expected"):
        st.open_store(folder).download("b.bin", str(local), 5, check=refuse)
    with pytest.raises(OSError, match=r"5 bytes where 6 were expected"):
        st.open_store(folder).download("b.bin", str(local), 6)
    assert not local.exists()


def test_a_pack_uploads_to_a_local_folder_through_the_same_interface(tmp_path):
    items = [(photo_jpeg("astronaut", "4:2:0", False, (40, 48)), k) for k in range(3)]
    fio.pack(items, tmp_path / "a", shard_bytes=4096, progress=False)
    shards = len(fio.PackedDataset(tmp_path / "a").shard_sizes)
    assert fio.upload_pack(tmp_path / "a", str(tmp_path / "b")) == shards
    assert fio.upload_pack(tmp_path / "a", str(tmp_path / "b")) == 0  # each shard there is this pack's
    a, b = fio.PackedDataset(tmp_path / "a"), fio.PackedDataset(tmp_path / "b")
    assert [bytes(a.record(i)) for i in range(3)] == [bytes(b.record(i)) for i in range(3)]
