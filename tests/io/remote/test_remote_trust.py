"""Remote trust: a pack replaced at its URL by another of the same shape (same type, length,
options and item 0; a sync tool that keeps modification times) is never served from the cache
with the old pixels and labels: a new open says the pack changed and fetches it again, an open
dataset refuses the new shards by name. pack(B, url) over such a pack A uploads every shard that
differs (compared by their records, not size and id) and the pack at the URL reads as B; an
upload that the store does not hold fails naming the shard, and no index of it goes up."""

import os
import shutil

import numpy as np
import pytest

import fastprep.io as fio
import fastprep.io._pack_format as fmt
from fastprep.errors import PackWriteError
from fastprep.io.packed._upload import upload_pack
from fastprep.io.remote import Retry
from fastprep.io.remote._store import RemoteStore

from helpers.jpeg_photos import needs_decoder
from helpers.remote_guard import hang_guard  # noqa: F401 (autouse: a hang fails with every thread's stack)
from helpers.store_servers import store  # noqa: F401 (the session's server fixture, one per kind of store)

pytestmark = [needs_decoder, pytest.mark.one_backend]

FAST = Retry(tries=3, backoff=0.0, max_backoff=0.0, timeout=30)
OPTS = {"mode": "raw", "progress": False, "shard_bytes": 4096}


class Items:
    def __init__(self, items):
        self.items = items

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def items(seed):
    """12 items of one shape; item 0 the same for every seed, the rest (pixels and labels) not."""
    rng = np.random.default_rng(seed)
    first = (np.full((24, 24, 3), 7, np.uint8), 0)
    return Items([first] + [(rng.integers(0, 256, (24, 24, 3), dtype=np.uint8), 1 + (i + seed) % 5)
                            for i in range(11)])


def same_items(ds, want):
    assert len(ds) == len(want.items)
    for i, (image, label) in enumerate(want.items):
        got = ds[i]
        assert got[1] == label and np.array_equal(got[0].permute(1, 2, 0).numpy(), image), i


def replace_keeping_times(src, dest):
    """What a sync tool that keeps modification times does: dest's files become src's, same mtimes."""
    times = {n: os.stat(dest / n).st_mtime_ns for n in os.listdir(dest)}
    for n in os.listdir(src):
        shutil.copyfile(src / n, dest / n)
        if n in times:
            os.utime(dest / n, ns=(times[n], times[n]))


def test_a_pack_replaced_under_the_cache_is_fetched_again(tmp_path):
    a, b = items(1), items(2)
    fio.pack(a, tmp_path / "url", **OPTS)
    fio.pack(b, tmp_path / "b", **OPTS)
    assert (tmp_path / "url" / fmt.INDEX_NAME).stat().st_size == (tmp_path / "b" / fmt.INDEX_NAME).stat().st_size
    url = f"file://{tmp_path / 'url'}"
    same_items(fio.PackedDataset(url, cache_dir=tmp_path / "cache", retry=FAST, fetch="shards"), a)
    replace_keeping_times(tmp_path / "b", tmp_path / "url")
    with pytest.warns(UserWarning, match=r"the pack at file://.*url changed since it was cached in .*cache.*: its "
                                         r"index is another .*fetching it again"):
        ds = fio.PackedDataset(url, cache_dir=tmp_path / "cache", retry=FAST, fetch="shards")
    same_items(ds, b)
    same_items(fio.PackedDataset(url, cache_dir=tmp_path / "cache", retry=FAST, fetch="shards"), b)  # no warning


def test_an_open_dataset_refuses_the_shards_of_a_replaced_pack_by_name(tmp_path):
    fio.pack(items(1), tmp_path / "url", **OPTS)
    fio.pack(items(2), tmp_path / "b", **OPTS)
    url = f"file://{tmp_path / 'url'}"
    ds = fio.PackedDataset(url, cache_dir=tmp_path / "cache", retry=FAST, fetch="shards")  # nothing cached yet
    replace_keeping_times(tmp_path / "b", tmp_path / "url")
    with pytest.raises(fio.ShardFormatError, match=r"the pack at file://.*url changed since it was cached in "
                                                   r".*cache.*: shard-00000.fpk is shard 0 of another pack.*open "
                                                   r"it again"):
        ds[0]


@pytest.mark.parametrize("how", ["another staging", "overwrite"])
def test_pack_over_a_pack_of_the_same_shape_uploads_what_differs(store, tmp_path, how):  # noqa: F811
    store.needs_writable()
    url, opts = store.url(f"same-shape-{how.replace(' ', '-')}"), {"storage_options": store.options(), "retry": FAST}
    a, b = items(1), items(2)
    fio.pack(a, url, staging=tmp_path / "a", **opts, **OPTS)
    same_items(fio.PackedDataset(url, cache_dir=tmp_path / "c1", fetch="shards", **opts), a)
    if how == "overwrite":
        fio.pack(b, url, staging=tmp_path / "a", overwrite=True, **opts, **OPTS)
    else:
        fio.pack(b, url, staging=tmp_path / "b", **opts, **OPTS)
    same_items(fio.PackedDataset(url, cache_dir=tmp_path / "c2", fetch="shards", **opts), b)
    with pytest.warns(UserWarning, match=rf"the pack at {store.kind}://.* changed since it was cached in .*c1"):
        warm = fio.PackedDataset(url, cache_dir=tmp_path / "c1", fetch="shards", **opts)  # A's index cached
    same_items(warm, b)
    staging = tmp_path / ("a" if how == "overwrite" else "b")
    assert upload_pack(staging, url, **opts) == 0  # now the store's shards are B's


def test_an_upload_the_store_does_not_hold_fails_and_sends_no_index(store, tmp_path, monkeypatch):  # noqa: F811
    store.needs_writable()
    url, opts = store.url("lost-upload"), {"storage_options": store.options(), "retry": FAST}
    fio.pack(items(1), url, staging=tmp_path / "a", **opts, **OPTS)
    fio.pack(items(2), tmp_path / "b", **OPTS)
    real = RemoteStore.upload

    def lossy(self, local, name):  # a store that reports success but keeps shard 3 as it was
        if name != "shard-00003.fpk":
            real(self, local, name)

    monkeypatch.setattr(RemoteStore, "upload", lossy)
    with pytest.raises(PackWriteError, match=r"upload_pack: .*lost-upload/shard-00003.fpk does not hold what was "
                                             r"uploaded: its header says shard 3 of pack [0-9a-f]+, not shard 3 of "
                                             rf"[0-9a-f]+\. The pack at {store.kind}://.* is not complete: run the upload again"):
        upload_pack(tmp_path / "b", url, **opts)
    objects = RemoteStore(url, store.options(), FAST)
    assert objects.size(fmt.INDEX_NAME) is None  # A's index went (another pack's), B's never came
    monkeypatch.setattr(RemoteStore, "upload", real)
    assert upload_pack(tmp_path / "b", url, **opts) == 1
    same_items(fio.PackedDataset(url, cache_dir=tmp_path / "c", fetch="shards", **opts), items(2))
