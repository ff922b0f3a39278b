"""DevicePrefetcher(streams=k): the device stage that scales (batch/_stream_pool.py). On the CPU with
a timeline that records what each thread does (the stand-in for CUDA streams and events): batches
come out in order whatever each takes, each thread works on its own stream, the consumer's stream
waits on a batch's event before the batch is handed out and never waits on the host, a host batch
goes back to its pool only after its event completed (in the stage's thread), and an early stop or
an error leaves no thread and no batch behind."""

import random
import threading
import time

import pytest
import torch

import fastprep.batch._device_prefetcher as device_prefetcher
from fastprep.batch._collate import CompactCollate
from fastprep.batch._device_prefetcher import DevicePrefetcher


class Host:
    """A host batch: a tensor, and whether (and when) it went back to its pool."""

    def __init__(self, i):
        self.x, self.released, self.log = torch.full((4,), i), False, None

    def release(self):
        assert not self.released
        self.released = True
        self.log.append(("release", int(self.x[0]), threading.current_thread().name))


class RecordingTimeline:
    """CUDA's timeline as a log: streams are numbers, an event is (stream, batch), done when waited."""

    asynchronous = True

    def __init__(self):
        self.log, self._streams, self._lock = [], 0, threading.Lock()
        self.local = threading.local()

    def stream(self):
        with self._lock:
            self._streams += 1
            return self._streams

    def use(self, stream):
        timeline = self

        class Use:
            def __enter__(self):
                timeline.local.stream = stream

            def __exit__(self, *exc):
                timeline.local.stream = None

        return Use()

    def record(self, stream):
        return (stream, self.local.batch)

    def wait_done(self, event):
        self.log.append(("done", event[1], threading.current_thread().name))

    def join(self, event, tensors):
        self.log.append(("join", event[1], threading.current_thread().name))


def _moved(timeline, delays):
    def expand(batch):  # the device work: on the thread's stream, taking its own time
        i = int(batch.x[0])
        timeline.local.batch = i
        timeline.log.append(("work", i, timeline.local.stream, threading.current_thread().name))
        time.sleep(delays[i])
        return batch.x * 2
    return expand


@pytest.fixture
def recording(monkeypatch):
    timeline = RecordingTimeline()
    monkeypatch.setattr(device_prefetcher, "timeline_for", lambda device: timeline)
    monkeypatch.setattr(device_prefetcher, "move_to", lambda batch, device, non_blocking: batch)
    return timeline


def _hosts(n, log):
    hosts = [Host(i) for i in range(n)]
    for h in hosts:
        h.log = log
    return hosts


def test_batches_come_out_in_order_joined_by_their_events_and_go_back_after_them(recording):
    n, delays = 12, [random.Random(k).uniform(0, 0.02) for k in range(12)]
    hosts = _hosts(n, recording.log)
    pf = DevicePrefetcher(hosts, "cpu", depth=2, expand=_moved(recording, delays), release=True, streams=3)
    out = []
    for b in pf:
        out.append(int(b[0]) // 2)
        assert ("join", out[-1], threading.current_thread().name) in recording.log  # joined before handed out
    assert out == list(range(n))
    log = recording.log
    consumer = threading.current_thread().name
    work = [e for e in log if e[0] == "work"]
    assert {e[3] for e in work} <= {f"fastprep-device_{k}" for k in range(3)} and consumer not in {e[3] for e in work}
    by_thread = {}
    for _, _, stream, thread in work:
        by_thread.setdefault(thread, set()).add(stream)
    assert all(len(s) == 1 for s in by_thread.values())  # each thread keeps its own stream
    assert len({next(iter(s)) for s in by_thread.values()}) == len(by_thread)  # no two share one
    for i in range(n):
        done = log.index(("done", i, next(e[3] for e in work if e[1] == i)))
        release = next(k for k, e in enumerate(log) if e[:2] == ("release", i))
        assert done < release and log[release][2] != consumer  # back after its event, by the stage
    assert not any(e[0] == "done" and e[2] == consumer for e in log)  # the consumer never waits on the host
    assert all(h.released for h in hosts)
    assert pf.stats.batches == n and pf.stats.streams == 3 and pf.stats.busy_s > 0
    assert "3 streams, 12 batches" in pf.stats.describe()


def test_streams_give_the_bits_of_the_consumer_thread_path():
    batches = [torch.arange(i, i + 6) for i in range(9)]

    def expand(b):
        time.sleep(random.uniform(0, 0.005))
        return b.float() / 3

    want = [b.clone() for b in DevicePrefetcher(batches, "cpu", expand=expand)]
    for streams in (1, 2, 5):
        got = list(DevicePrefetcher(batches, "cpu", depth=2, expand=expand, streams=streams))
        assert all(torch.equal(g, w) for g, w in zip(got, want, strict=True)) and len(got) == len(want)


def test_an_early_stop_hands_every_batch_back_and_stops_the_threads(recording):
    hosts = _hosts(10, recording.log)
    pf = DevicePrefetcher(hosts, "cpu", depth=4, expand=_moved(recording, [0.005] * 10), release=True, streams=2)
    it = iter(pf)
    next(it), next(it)
    it.close()
    started = {e[1] for e in recording.log if e[0] == "work"}
    assert all(h.released for h in hosts if int(h.x[0]) in started)  # made ahead: back to the pool
    assert not any(h.released for h in hosts if int(h.x[0]) not in started)  # never taken from the source
    assert not [t for t in threading.enumerate() if t.name.startswith("fastprep-device")]


def test_an_error_on_a_stream_reaches_the_consumer_and_stops_the_threads():
    def expand(b):
        if int(b[0]) == 3:
            raise ValueError("batch 3 is bad")
        return b

    with pytest.raises(ValueError, match="batch 3 is bad"):
        list(DevicePrefetcher([torch.full((2,), i) for i in range(8)], "cpu", expand=expand, streams=2))
    assert not [t for t in threading.enumerate() if t.name.startswith("fastprep-device")]


def test_on_the_cpu_a_shared_host_batch_goes_back_when_the_consumer_moves_on():
    """No streams on the CPU: the stage's output shares the host batch's memory, so it goes back when
    the consumer asks for the next batch, as without streams."""
    collate = CompactCollate(reuse=True)
    hosts = [collate([(torch.full((3, 4, 4), i, dtype=torch.uint8), i)]) for i in range(3)]
    it = iter(DevicePrefetcher(hosts, "cpu", release=True, streams=2))
    first = next(it)
    assert not hosts[0].released and int(first.data[0][0, 0, 0, 0]) == 0
    second = next(it)
    assert hosts[0].released and not hosts[1].released and int(second.data[1][0]) == 1
    list(it)
    assert hosts[1].released


@pytest.mark.parametrize("streams", [0, -1, 1.5, "2", True])
def test_bad_streams_are_refused_by_name(streams):
    with pytest.raises(ValueError, match=f"DevicePrefetcher: .*streams.*{streams!r}"):
        DevicePrefetcher([], "cpu", streams=streams)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the CUDA streams need a CUDA device")
def test_on_cuda_each_stream_gives_the_consumer_thread_paths_results():
    """Real streams and events (benchmarks/gpu_check.sh runs this on a GPU machine): the device work
    of several batches overlaps, and each batch the consumer reads is complete."""
    weights = torch.randn(512, 512, device="cuda")
    batches = [torch.randn(256, 512).pin_memory() for _ in range(12)]

    def expand(b):
        for _ in range(20):  # enough queued work that an unjoined read would see it unfinished
            b = torch.tanh(b @ weights)
        return b

    want = [b.clone() for b in DevicePrefetcher(batches, "cuda", expand=expand)]
    for streams in (1, 4):
        got = [b.clone() for b in DevicePrefetcher(batches, "cuda", depth=2, expand=expand, streams=streams)]
        assert all(torch.equal(g, w) for g, w in zip(got, want, strict=True))


def test_an_early_stop_after_the_stage_handed_the_host_back_leaves_nothing_to_release(recording):
    """On a device the stage's thread hands each host batch back itself; stopping while the consumer
    holds a CompactBatch made from one must not try to hand that host batch back again."""
    collate = CompactCollate(reuse=True)
    hosts = [collate([(torch.full((3, 4, 4), i, dtype=torch.uint8), i)]) for i in range(4)]

    def expand(batch):  # a new CompactBatch made on the device (no memory shared with the host's)
        recording.local.batch = int(batch.data[1][0])
        return CompactCollate()([(batch.data[0][0].clone(), int(batch.data[1][0]))])

    it = iter(DevicePrefetcher(hosts, "cpu", depth=2, expand=expand, release=True, streams=2))
    first = next(it)
    assert int(first.data[1][0]) == 0 and hosts[0].released  # handed back by the stage's thread
    it.close()  # raised AttributeError before: the consumer tried to hand back a host it no longer held
    assert all(h.released for h in hosts[:2])
