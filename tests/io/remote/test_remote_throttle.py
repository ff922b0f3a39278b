"""A store's throttle and cap, without a server: the cells a store's processes share (fork, pickle),
what counts as a throttle (503 SlowDown, 429), a pause one request begins and every other honours,
and a RateLimit's bucket, all kept on a recording clock (no wall time is asserted)."""

import errno
import math
import os
import pickle

import pytest

import fastprep.io.remote._limits as limits_mod
import fastprep.io.remote._throttle as throttle_mod
from fastprep.io.remote import RateLimit, RemoteStore, Retry
from fastprep.io.remote._shared import SharedCells
from fastprep.io.remote._throttle import SharedPause, throttled


class Clock:
    """A clock that moves only when slept on; records each sleep."""

    def __init__(self, start: float):
        self.now, self.sleeps = start, []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def clock(monkeypatch):
    import time  # noqa: PLC0415

    c = Clock(time.monotonic())
    for mod in (throttle_mod, limits_mod):
        monkeypatch.setattr(mod, "clock", c)
        monkeypatch.setattr(mod, "sleep", c.sleep)
    return c


def test_cells_are_shared_with_a_forked_child_and_a_pickled_copy():
    cells = SharedCells(2)
    cells.add(5, 1)
    pid = os.fork()
    if pid == 0:  # the child: its own descriptor and lock, the same file
        try:
            cells.add(10, 2)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    copy = pickle.loads(pickle.dumps(cells))  # a spawned worker's copy
    copy.add(100, 4)
    assert cells.read() == [115.0, 7.0]


@pytest.mark.parametrize(("exc", "is_throttle"), [
    (OSError(errno.EBUSY, "SlowDown"), True),  # s3fs's
    (type("ClientError", (Exception,), {"response": {"Error": {"Code": "SlowDown"}}})(), True),  # botocore's
    (type("ClientResponseError", (Exception,), {"status": 429})(), True),  # aiohttp's
    (type("HttpResponseError", (Exception,), {"status_code": 503})(), True),  # azure-core's
    (ValueError("bad"), False), (FileNotFoundError("gone"), False), (ConnectionResetError(), False),
])
def test_what_counts_as_a_throttle(exc, is_throttle):
    assert throttled(exc) is is_throttle
    wrapped = RuntimeError("wrapped")
    wrapped.__cause__ = exc
    assert throttled(wrapped) is is_throttle  # found in the chain


def test_one_throttled_request_pauses_every_other(clock):
    pause = SharedPause(SharedCells(1), 0)
    retry = Retry(tries=3, backoff=1.0, max_backoff=1.0)
    failures = [OSError(errno.EBUSY, "SlowDown")]
    ran_at = []

    def throttled_once():
        ran_at.append(clock())
        if failures:
            raise failures.pop()
        return "ok"

    start = clock()
    assert retry.call("reading x", "s3://b/x", throttled_once, pause=pause) == "ok"
    ends = pause.paused_until()
    assert 0.5 <= ends - start <= 1.0 and pause.pauses == 1  # the backoff, half jittered
    assert ran_at[1] >= ends  # its own retry waited out the pause

    # another thread's (or worker's) request, begun during a pause: it waits, then runs once
    clock.now = start
    pause.pause(2.0)
    others = []
    assert retry.call("reading y", "s3://b/y", lambda: others.append(clock()) or "y", pause=pause) == "y"
    assert len(others) == 1 and others[0] >= start + 2.0


def test_a_pause_never_outlasts_the_deadline(clock):
    pause = SharedPause(SharedCells(1), 0)
    pause.pause(1e6)
    until = clock() + 3.0
    pause.hold(until, spread=0.5)
    assert clock() == pytest.approx(until)  # waited to the deadline, no further


def test_a_store_without_throttling_is_not_paused(clock):
    pause = SharedPause(SharedCells(1), 0)
    failures = [ConnectionResetError("cut")]

    def once():
        if failures:
            raise failures.pop()
        return 1

    Retry(tries=2, backoff=0.0).call("reading", "s3://b/x", once, pause=pause)
    assert pause.pauses == 0 and pause.paused_until() == 0.0


def test_the_rate_limit_spaces_requests(clock):
    cap = RateLimit(requests_per_s=10, burst=1.0)
    start = clock()
    times = []
    for _ in range(40):
        cap.take(1, 0, until=start + 600)
        times.append(clock() - start)
    assert times[9] == 0.0  # a burst: one second's worth at once
    assert times[-1] == pytest.approx(3.0)  # then 10 a second: 30 more in 3 s
    for i in range(len(times)):  # in no window more than rate * window + burst
        for j in range(i, len(times)):
            assert j - i + 1 <= 10 * (times[j] - times[i]) + 10 + 1e-9


def test_the_byte_cap_counts_a_stores_reads(clock, tmp_path):
    (tmp_path / "blob").write_bytes(bytes(range(256)) * 40)  # 10240 bytes
    cap = RateLimit(bytes_per_s=1000, burst=1.0)
    store = RemoteStore(f"file://{tmp_path}", rate_limit=cap)
    start = clock()
    for k in range(10):
        assert store.read("blob", k * 1024, (k + 1) * 1024) == (bytes(range(256)) * 4)
    assert store.bytes_fetched == 10240 and store.requests == 10
    assert clock() - start == pytest.approx(10240 / 1000 - 1.0)  # all but the burst, at 1000 B/s
    assert cap.waited == pytest.approx(clock() - start)


def test_a_forked_worker_shares_the_bucket(clock):
    cap = RateLimit(requests_per_s=10, burst=1.0)
    pid = os.fork()
    if pid == 0:  # a DataLoader worker: it spends the burst
        try:
            for _ in range(10):
                cap.take(1, 0, until=clock() + 600)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    assert cap.take(1, 0, until=clock() + 600) == pytest.approx(0.1)  # the parent waits: one budget


@pytest.mark.parametrize(("kw", "name"), [
    ({"requests_per_s": 0}, "requests_per_s"), ({"requests_per_s": -5}, "requests_per_s"),
    ({"requests_per_s": "100"}, "requests_per_s"), ({"requests_per_s": True}, "requests_per_s"),
    ({"bytes_per_s": math.nan}, "bytes_per_s"), ({"bytes_per_s": math.inf}, "bytes_per_s"),
    ({"requests_per_s": 5, "burst": 0}, "burst"), ({"requests_per_s": 5, "burst": "1"}, "burst"),
    ({}, "requests_per_s or bytes_per_s"),
])
def test_bad_rate_limits_are_named(kw, name):
    with pytest.raises(ValueError, match=name):
        RateLimit(**kw)


def test_stores_of_one_url_share_a_pause_on_the_node(clock, tmp_path):
    a, b = RemoteStore(f"file://{tmp_path}/x"), RemoteStore(f"file://{tmp_path}/x")  # two ranks' stores
    other = RemoteStore(f"file://{tmp_path}/y")
    a.pause.pause(30.0)
    assert b.pause.paused_until() == a.pause.paused_until() == pytest.approx(clock() + 30.0)
    assert other.pause.paused_until() < clock()  # another URL goes on


def test_bad_store_and_cells_arguments_are_named(tmp_path):
    with pytest.raises(ValueError, match="rate_limit.*5"):
        RemoteStore(f"file://{tmp_path}", rate_limit=5)
    with pytest.raises(ValueError, match="n to be an int >= 1, got 0"):
        SharedCells(0)
    with pytest.raises(ValueError, match="name to be letters.*'a/b'"):
        SharedCells(1, name="a/b")


def test_a_chunks_reads_ahead_wait_for_the_pause_and_the_rate_limit(tmp_path, monkeypatch):
    """read_spans (a Loader chunk's windows, all at once) is a request as every other: it holds for
    a throttle's pause and takes its requests and bytes from the rate limit before it is sent."""
    from fastprep.io.remote import RateLimit, RemoteStore

    (tmp_path / "obj").write_bytes(bytes(range(200)))
    store = RemoteStore(f"file://{tmp_path}", rate_limit=RateLimit(requests_per_s=1000))
    calls = []
    monkeypatch.setattr(store.pause, "hold", lambda until, spread=0.0: calls.append("hold"))
    monkeypatch.setattr(store.rate_limit, "take", lambda n, nbytes, until: calls.append(("take", n, nbytes)))
    got = store.read_spans([("obj", 0, 10), ("obj", 50, 80)])
    assert got == [bytes(range(10)), bytes(range(50, 80))]
    assert calls == ["hold", ("take", 2, 40)]
