"""Presigned URLs: a pack read from one presigned URL per file (sign_pack on moto's S3, read over
plain HTTP through the fault proxy: each request carries its own file's signature), a shared query
(a token, a folder-wide SAS) put after every file's name and sent as it was given (percent escapes
such as X-Amz-Credential's %2F kept), the index's own URL naming its folder, and what is refused at
once: a mapping without the index or with a non-http URL, a shard missing from the mapping (named),
packing or uploading to http(s):// or to a mapping."""

import os
from urllib.parse import parse_qs, urlsplit

import pytest
import torch

import fastprep.io as fio
from fastprep.errors import RemoteAccessError
from fastprep.io import upload_pack
from fastprep.io.remote import Retry, sign_pack

from helpers.jpeg_photos import grey_jpeg, needs_decoder, packed_tree, photo_jpeg
from helpers.pack_http_server import PackServer
from helpers.remote_guard import hang_guard, text_of  # noqa: F401 (hang_guard: autouse, a hang fails with every thread's stack)
from helpers.s3_server import s3  # noqa: F401 (the session's server fixture)

pytestmark = [needs_decoder, pytest.mark.one_backend]

FILES = {"a/1.jpg": lambda: photo_jpeg("coffee", "4:2:0", False, (301, 333)),
         "b/2.jpg": lambda: grey_jpeg(False, (91, 130))}
FAST = Retry(tries=2, backoff=0.0, max_backoff=0.0, timeout=10, outage=0)
# what S3 presigning puts in a query: "/" in the credential escaped, as a signature needs it kept
SIGNED = ("X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIDEXAMPLE%2F20261129%2Fus-east-1%2Fs3%2Faws4_request"
          "&X-Amz-Date=20261129T000000Z&X-Amz-Expires=3600&X-Amz-SignedHeaders=host&X-Amz-Signature=5eb0c9d7e1f2")


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    root = tmp_path_factory.mktemp("presigned")
    packed_tree(root, FILES)
    return root


def same(ds, local):
    assert len(ds) == len(local)
    for i in range(len(local)):
        assert torch.equal(ds.load_raw(i)[0].decode(), local.load_raw(i)[0].decode()), i


def test_a_pack_reads_from_one_presigned_url_per_file(packed, s3, tmp_path):  # noqa: F811
    if s3.proxy is None:
        pytest.skip("needs the loopback proxy (an http:// endpoint)")
    upload_pack(packed / "pack", s3.url("signed"), storage_options=s3.options())
    urls = sign_pack(s3.url("signed"), expires=600, storage_options=s3.options())
    local = fio.PackedDataset(packed / "pack")
    assert sorted(urls) == sorted(["index.fpi", *(name for name, _ in local._shards)])
    assert all(u.startswith("http://127.0.0.1") and "Signature=" in u for u in urls.values())  # s3fs: SigV2 style
    s3.proxy.clear()
    for fetch in ("shards", "ranges"):
        ds = fio.PackedDataset(urls, cache_dir=tmp_path / fetch, fetch=fetch, retry=FAST)
        same(ds, local)
        shown = repr(ds) + ds.path + ds.where(0)
        assert "Signature" not in shown and ds.path.endswith("/signed"), shown
    sent = [line.split()[1] for line in s3.proxy.log]
    assert sent and all(p.rsplit("/", 1)[1] in urls for p in sent), s3.proxy.log  # each file at its own URL
    assert not any("Signature" in str(p) for p in tmp_path.rglob("*"))  # no signature in a cache name


def test_a_shared_query_goes_after_every_file_as_it_was_given(packed, tmp_path):
    local = fio.PackedDataset(packed / "pack")
    with PackServer(str(packed)) as srv:
        for url in (f"{srv.url}/pack?{SIGNED}", f"{srv.url}/pack/index.fpi?{SIGNED}"):  # the folder, the index
            ds = fio.PackedDataset(url, cache_dir=tmp_path / "cache", fetch="shards", retry=FAST)
            same(ds, local)
            assert ds.path == f"{srv.url}/pack"
        log = list(srv.log)
    for _, path in log:
        where, _, query = path.partition("?")
        assert where.startswith("/pack/") and where.count("/") == 2 and query == SIGNED, path  # never mangled
    assert parse_qs(urlsplit(log[0][1]).query)["X-Amz-Credential"] == ["AKIDEXAMPLE/20261129/us-east-1/s3/aws4_request"]


def test_a_mapping_is_checked_and_a_missing_shard_named(packed, tmp_path):
    with PackServer(str(packed)) as srv:
        base = f"{srv.url}/pack"
        urls = {name: f"{base}/{name}?{SIGNED}" for name in os.listdir(packed / "pack")}
        with pytest.raises(ValueError, match="must name the index, 'index.fpi'"):
            fio.PackedDataset({k: v for k, v in urls.items() if k != "index.fpi"}, cache_dir=tmp_path)
        with pytest.raises(ValueError, match="file names .* to http\\(s\\):// URLs; got 'index.fpi': 's3://b/p'"):
            fio.PackedDataset({**urls, "index.fpi": "s3://b/p"}, cache_dir=tmp_path)
        with pytest.raises(ValueError, match="got 'sub/x'"):
            fio.PackedDataset({**urls, "sub/x": urls["index.fpi"]}, cache_dir=tmp_path)
        ds = fio.PackedDataset({k: v for k, v in urls.items() if k != "shard-00000.fpk"}, cache_dir=tmp_path,
                               fetch="shards", retry=FAST)
        with pytest.raises(fio.ShardFormatError, match="shard-00000.fpk is missing") as info:
            ds.load_raw(0)[0].decode()
    assert "X-Amz" not in text_of(info.value)


@pytest.mark.parametrize("dest", ["https://host/bucket/pack?sig=1", "http://host/pack", {"index.fpi": "https://h/i"}])
def test_packing_or_uploading_to_a_read_only_url_is_refused_before_any_work(packed, tmp_path, dest):
    with pytest.raises(ValueError, match="is read-only here .*upload to the store's own URL"):
        fio.pack(tmp_path / "never-read", dest, staging=tmp_path / "staging")
    assert not (tmp_path / "staging").exists()
    with pytest.raises(ValueError, match="upload_pack: .* is read-only"):
        upload_pack(packed / "pack", dest)


def test_a_refused_signed_query_says_each_file_needs_its_own_signature(packed, tmp_path):
    with PackServer(str(packed), token="right") as srv:
        with pytest.raises(RemoteAccessError, match="access denied: check credentials.*a presigned URL signs one "
                                                        "object.*pass {file name: URL} for every file") as info:
            fio.PackedDataset(f"{srv.url}/pack/index.fpi?{SIGNED}", cache_dir=tmp_path, retry=FAST)
        assert "5eb0c9d7e1f2" not in text_of(info.value)
        with pytest.raises(RemoteAccessError) as info:  # a token: no such hint
            fio.PackedDataset(f"{srv.url}/pack?token=wrong", cache_dir=tmp_path, retry=FAST)
        assert "presigned" not in str(info.value)
