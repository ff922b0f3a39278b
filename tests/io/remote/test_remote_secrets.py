"""Credentials never show, in any error's text or its chain's: every remote failure with a token in
the URL (user info, query string), in the endpoint URL, in storage_options or in the environment is
raised, its full traceback formatted (causes and contexts) and searched for the token. Access
refused (401, 403) names the URL and says to check credentials; a missing client library is one
immediate error naming what to install; an http(s) URL's query string (a token, a signature) is
kept on every object's URL."""

import logging
import os
import shutil
import uuid

import pytest
import torch

import fastprep.io as fio
from fastprep.errors import RemoteAccessError
from fastprep.io.remote import Retry

from helpers.jpeg_photos import grey_jpeg, needs_decoder, packed_tree, photo_jpeg
from helpers.pack_http_server import S3_DENIED, PackServer
from helpers.remote_guard import hang_guard, text_of  # noqa: F401 (hang_guard: autouse, a hang fails with every thread's stack)
from helpers.s3_server import free_port

pytestmark = [needs_decoder, pytest.mark.one_backend]

FILES = {"a/1.jpg": lambda: photo_jpeg("coffee", "4:2:0", False, (301, 333)),
         "b/2.jpg": lambda: grey_jpeg(False, (91, 130))}
FAST = Retry(tries=2, backoff=0.0, max_backoff=0.0, timeout=5, outage=0.5)  # an unreachable store: waited for, briefly
TOKEN = f"tok{uuid.uuid4().hex}"  # made here, so no source line a traceback prints holds it
KEY_ID = f"AKIA{uuid.uuid4().hex[:16].upper()}"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A folder with a pack ("pack") and the same pack without its first shard ("holed")."""
    root = tmp_path_factory.mktemp("secrets")
    packed_tree(root, FILES)
    shutil.copytree(root / "pack", root / "holed")
    (root / "holed" / "shard-00000.fpk").unlink()
    return root


def failure(fn) -> BaseException:
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 (the test looks at whatever it is)
        return exc
    raise AssertionError("expected the read to fail")


def open_remote(url, tmp_path, **kw):
    return fio.PackedDataset(url, cache_dir=tmp_path / "cache", retry=kw.pop("retry", FAST), **kw)


def http_cases(srv_url, tmp_path):
    host = srv_url.split("://", 1)[1]
    return {
        "user info, server error": lambda: open_remote(f"http://user:{TOKEN}@{host}/pack", tmp_path),
        "user info, missing shard": lambda: open_remote(f"http://user:{TOKEN}@{host}/holed", tmp_path,
                                                        fetch="shards")[0],
        "query, missing shard": lambda: open_remote(f"{srv_url}/holed?token={TOKEN}", tmp_path, fetch="shards")[0],
        "query, missing shard by range": lambda: open_remote(f"{srv_url}/holed?token={TOKEN}", tmp_path,
                                                             fetch="ranges")[0],
        "query, nothing there": lambda: open_remote(f"{srv_url}/nowhere?token={TOKEN}", tmp_path),
    }


@pytest.mark.parametrize("case", ["user info, server error", "user info, missing shard", "query, missing shard",
                                  "query, missing shard by range", "query, nothing there"])
def test_no_http_failure_shows_the_token(served, tmp_path, case):
    status = 500 if case == "user info, server error" else None
    with PackServer(str(served), status=status, body=f"failed for {TOKEN}".encode()) as srv:
        exc = failure(http_cases(srv.url, tmp_path)[case])
    assert TOKEN not in text_of(exc), text_of(exc)
    assert "127.0.0.1" in str(exc)  # the URL is named, without the token


def test_a_refused_http_read_names_the_url_and_says_check_credentials(served, tmp_path):
    with PackServer(str(served), token=TOKEN) as srv:
        exc = failure(lambda: open_remote(f"{srv.url}/pack?token=wrong{TOKEN}", tmp_path, retry=Retry(tries=5)))
        refused = len(srv.log)
    assert isinstance(exc, RemoteAccessError) and isinstance(exc, PermissionError)
    assert f"{srv.url}/pack/index.fpi" in str(exc) and "access denied: check credentials" in str(exc)
    assert TOKEN not in text_of(exc)
    assert refused <= 2  # HEAD, then GET: fsspec's own lookup; never retried


@pytest.fixture
def s3_env(monkeypatch):
    pytest.importorskip("s3fs", reason="the s3:// cases need s3fs: pip install 'fastprep[remote]'")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", TOKEN)
    monkeypatch.setenv("AWS_SESSION_TOKEN", TOKEN[::-1])
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")


def test_an_s3_403_names_the_url_and_says_check_credentials(served, tmp_path, s3_env):
    with PackServer(str(served), status=403, body=S3_DENIED) as srv:
        exc = failure(lambda: open_remote("s3://bucket/train.packed", tmp_path,
                                          storage_options={"endpoint_url": srv.url}))
    assert isinstance(exc, RemoteAccessError), repr(exc)
    assert "s3://bucket/train.packed/index.fpi" in str(exc) and "access denied: check credentials" in str(exc)
    assert all(s not in text_of(exc) for s in (TOKEN, TOKEN[::-1], KEY_ID))


@pytest.mark.parametrize("case", ["credentials before the bucket", "endpoint query", "endpoint user info",
                                  "options, nothing listening"])
def test_no_s3_failure_shows_a_credential(tmp_path, s3_env, case, caplog):
    port = free_port()  # nothing listens there
    cases = {
        "credentials before the bucket": lambda: open_remote(f"s3://{KEY_ID}:{TOKEN}@bucket/p", tmp_path),
        "endpoint query": lambda: open_remote("s3://bucket/p", tmp_path, storage_options={
            "endpoint_url": f"http://127.0.0.1:{port}/?token={TOKEN}"}),
        "endpoint user info": lambda: open_remote("s3://bucket/p", tmp_path, storage_options={
            "endpoint_url": f"http://{KEY_ID}:{TOKEN}@127.0.0.1:{port}/"}),
        "options, nothing listening": lambda: open_remote("s3://bucket/p", tmp_path, storage_options={
            "endpoint_url": f"http://127.0.0.1:{port}", "key": KEY_ID, "secret": TOKEN}),
    }
    with caplog.at_level(logging.WARNING, logger="fastprep"):
        exc = failure(cases[case])
    assert all(s not in text_of(exc) for s in (TOKEN, TOKEN[::-1], KEY_ID)), text_of(exc)
    assert "s3://bucket/p" in str(exc)
    logged = "\n".join(r.getMessage() for r in caplog.records)  # an unreachable store's outage lines too
    assert all(s not in logged for s in (TOKEN, TOKEN[::-1], KEY_ID)), logged


@pytest.mark.parametrize(("url", "install"), [("gs://bucket/p", "pip install gcsfs"),
                                              ("az://container/p", "pip install adlfs"),
                                              ("s3://bucket/p", "pip install 'fastprep[remote]'")])
def test_a_missing_client_library_is_one_immediate_error_naming_what_to_install(tmp_path, monkeypatch, url,
                                                                                 install):
    fsspec = pytest.importorskip("fsspec")
    calls = []

    def missing(*args, **kw):
        calls.append(args)
        raise ImportError("Install the client library to access this store")

    monkeypatch.setattr(fsspec.core, "url_to_fs", missing)
    exc = failure(lambda: open_remote(url, tmp_path, retry=Retry(tries=5, backoff=10.0)))
    assert isinstance(exc, ImportError) and install in str(exc) and url in str(exc)
    assert len(calls) == 1  # not retried (a backoff of 10 s would have been slept four times)


def test_a_query_string_url_is_read_with_its_query_on_every_object(served, tmp_path):
    local = fio.PackedDataset(served / "pack")
    with PackServer(str(served), token=TOKEN) as srv:
        for fetch in ("shards", "ranges"):
            ds = open_remote(f"{srv.url}/pack?token={TOKEN}", tmp_path / fetch, fetch=fetch)
            for i in range(len(local)):
                assert torch.equal(ds.load_raw(i)[0].decode((0, 0, 40, 50)), local.load_raw(i)[0].decode((0, 0, 40, 50)))
            assert TOKEN not in repr(ds) + ds.path + ds.where(0)
        log = list(srv.log)
    assert log and all(path.split("?")[0].startswith("/pack/") and path.endswith(f"?token={TOKEN}")
                       for _, path in log), log
    assert not any(os.path.exists(p) and TOKEN in p for p in map(str, tmp_path.rglob("*")))


def test_a_stand_in_chain_keeps_type_names_and_places_but_no_secret():
    from fastprep.io.remote._redaction import Redacted, secrets_of, stand_in

    secrets = secrets_of(f"https://user:{TOKEN}@host/p?sig={TOKEN[::-1]}", {"client_kwargs": {"token": KEY_ID}}, {})
    try:
        try:
            raise KeyError(f"bucket {KEY_ID}:{TOKEN}@b")
        except KeyError as err:
            raise ConnectionError(f"GET https://user:{TOKEN}@host/p/x?sig={TOKEN[::-1]} failed") from err
    except ConnectionError as exc:
        copy = stand_in(exc, secrets)
    text = text_of(copy)
    assert isinstance(copy, Redacted) and isinstance(copy.__cause__, Redacted) and copy.__cause__.__cause__ is None
    assert "KeyError: 'bucket ***:***@b'" in str(copy.__cause__)
    assert "ConnectionError: GET https://host/p/x failed" in str(copy) and "test_remote_secrets.py" in text
    assert all(s not in text for s in (TOKEN, TOKEN[::-1], KEY_ID))
