"""Outages that heal (issue 43): a store that cannot be reached for a few seconds mid-epoch is
waited for (Retry.outage: one budget per outage, shared by the process's threads, backoff with
jitter), said at WARNING when the wait starts and when the store answers again, and the epoch
carries on where it was: every sample exactly once. Past the budget, a RemoteReadError saying so;
outage=0 keeps the old bound (the last try raises). Errors of a store that answers (503, a body cut
short) are not an outage: their tries bound them as before."""

import errno
import logging
import threading
import time

import pytest
import torch

import fastprep
import fastprep.io as fio
from fastprep.io.remote import Retry
from fastprep.io.remote._outage import OUTAGE, unreachable

from helpers.pack_http_server import PackServer
from helpers.remote_guard import hang_guard  # noqa: F401 (autouse: a hang fails with every thread's stack)

pytestmark = [pytest.mark.one_backend]

ITEMS = 96


def said(caplog):
    return [r.getMessage() for r in caplog.records if r.name == "fastprep" and r.levelno == logging.WARNING]


class Chained(Exception):
    pass


def chained(cause):
    try:
        raise cause
    except OSError as exc:
        try:
            raise Chained("wrapped") from exc
        except Chained as outer:
            return outer


@pytest.mark.parametrize("exc, expected", [
    (ConnectionRefusedError(errno.ECONNREFUSED, "refused"), True),
    (OSError(errno.EHOSTUNREACH, "no route to host"), True),
    (type("EndpointConnectionError", (Exception,), {})("Could not connect to the endpoint URL"), True),
    (chained(ConnectionRefusedError(errno.ECONNREFUSED, "refused")), True),  # a client's error around it
    (ConnectionResetError(errno.ECONNRESET, "reset mid-body"), False),  # the server answered
    (TimeoutError("cut off at the deadline"), False),
    (OSError(errno.ENOSPC, "disk full"), False),
    (ValueError("503 SlowDown"), False),
])
def test_what_counts_as_unreachable(exc, expected):
    assert unreachable(exc) is expected


def flaky(down_for):
    """fn for Retry.call: refused for `down_for` seconds from the first call, then b"ok"."""
    start = []

    def fn():
        start.append(start[0] if start else time.monotonic())
        if time.monotonic() - start[0] < down_for:
            raise ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused")
        return b"ok"
    return fn


def test_a_read_waits_out_an_outage_within_the_budget_said_twice(caplog):
    retry = Retry(tries=2, backoff=0.01, max_backoff=0.05, outage=10)
    with caplog.at_level(logging.WARNING, logger="fastprep"):
        assert retry.call("reading x", "http://127.0.0.1:1/p/x", flaky(0.5)) == b"ok"
    start, back = said(caplog)
    assert "cannot reach http://127.0.0.1:1/p/x (ConnectionRefusedError" in start and "10 s (Retry.outage)" in start
    assert "answers again after" in back and OUTAGE.began is None


def test_threads_share_one_outage_and_its_budget(caplog):
    retry = Retry(tries=1, backoff=0.01, max_backoff=0.05, outage=10)
    fns = [flaky(0.5) for _ in range(4)]
    out = [None] * 4
    with caplog.at_level(logging.WARNING, logger="fastprep"):
        threads = [threading.Thread(target=lambda j=j: out.__setitem__(j, retry.call("r", "u", fns[j])))
                   for j in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)
    assert out == [b"ok"] * 4
    assert sum("cannot reach" in m for m in said(caplog)) == 1  # one outage, not one per thread


@pytest.mark.parametrize("outage, match", [(0, r"failed after 2 tries: ConnectionRefusedError"),
                                           (0.3, r"failed after \d+ tries, the store unreachable for the outage "
                                                 r"budget of 0.3 s \(Retry.outage\)")])
def test_past_the_budget_or_without_one_the_read_raises(outage, match, caplog):
    retry = Retry(tries=2, backoff=0.01, max_backoff=0.05, outage=outage)
    began = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="fastprep"), pytest.raises(fio.RemoteReadError, match=match):
        retry.call("reading x", "u", flaky(60))
    assert time.monotonic() - began < 5 and OUTAGE.began is None
    assert any("giving up" in m for m in said(caplog)) == (outage > 0)


def test_a_long_outage_with_no_backoff_neither_spins_nor_overflows():
    retry = Retry(tries=1, backoff=0.0, max_backoff=0.0, outage=1)
    assert retry.wait(5000) == 0.0 and 0.025 <= retry.outage_wait(5000) <= 0.05  # 2**5000 is no float
    assert 0.5 <= Retry(backoff=1.0, max_backoff=1.0).outage_wait(5000) <= 1.0


@pytest.mark.parametrize("outage", [-1, "5", True])
def test_a_bad_outage_is_named(outage):
    with pytest.raises(ValueError, match=f"expected outage to be a number >= 0, got {outage!r}"):
        Retry(outage=outage)


@pytest.fixture(scope="module")
def pack(tmp_path_factory):
    pytest.importorskip("fsspec")
    pytest.importorskip("aiohttp")
    root = tmp_path_factory.mktemp("outage")
    items = [(torch.full((3, 16, 16), i % 251, dtype=torch.uint8), i) for i in range(ITEMS)]
    fio.pack(items, root / "p", non_jpeg="raw", shard_bytes=1 << 12, progress=False)
    return root


# 3 s in the quick run; the 20 s of issue 43's user report in .ci/slow.
@pytest.mark.parametrize("down_s", [3.0, pytest.param(20.0, marks=pytest.mark.slow)])
def test_an_epoch_carries_on_through_a_store_outage_every_sample_once(pack, tmp_path, caplog, down_s):
    server = PackServer(str(pack)).__enter__()
    port = server.httpd.server_address[1]
    restarted = []

    def restart():  # the same data, at the same address
        restarted.append(PackServer(str(pack), port=port).__enter__())

    try:
        limit = sum(fio.PackedDataset(pack / "p").shard_sizes) // 4  # shards are fetched all epoch long
        ds = fio.PackedDataset(f"{server.url}/p", cache_dir=tmp_path / "cache", cache_limit=limit, fetch="shards",
                               retry=Retry(tries=3, backoff=0.05, max_backoff=0.5, timeout=2, outage=3 * down_s + 10))
        loader = fastprep.Loader(ds, 8, shuffle=True, seed=0, threads=2)  # the shard order (issue 43)
        labels, timer = [], threading.Timer(down_s, restart)
        with caplog.at_level(logging.WARNING, logger="fastprep"):
            for b, batch in enumerate(loader):
                labels += [int(y) for y in batch.data[1]]
                if b == 1:  # mid-epoch: the store goes away for down_s seconds
                    server.stop()
                    timer.start()
        timer.join()
        assert restarted and sorted(labels) == list(range(ITEMS))  # every sample, exactly once
        messages = said(caplog)
        assert any("cannot reach" in m and "Retry.outage" in m for m in messages)
        assert any("answers again after" in m for m in messages)
    finally:
        for s in restarted:
            s.stop()
