"""fastprep.monitor on loops made slow on purpose: a loader that sleeps 50 ms a batch against a 1 ms
step is input-bound, a 40 ms step over an in-memory list is not (contrasts far beyond what a
loaded 2-core box adds); passes, break, exceptions, NVML absent / failing / faked, tqdm and log
lines, TensorBoard, and the CUDA event ring on fake events (no GPU here).

Overhead is measured in benchmarks/bench_monitor.py, never asserted here."""

import io
import logging
import sys
import time
import types

import pytest
import torch

import fastprep
from fastprep.monitoring._events import EventRing
from fastprep.monitoring._samplers import CpuClock
from fastprep.monitoring._stats import StepStats, quantile

# serial: the numbers come from timed sleeps, so .ci/test runs this module alone.
pytestmark = [pytest.mark.one_backend, pytest.mark.serial]

QUIET = dict(live=False, report=None, device="cpu")


def slow_batches(n, wait, log=None):
    """A loader whose every batch takes `wait` seconds; `log` records that it was closed."""
    try:
        for i in range(n):
            time.sleep(wait)
            yield torch.full((2,), i)
    finally:
        if log is not None:
            log.append("closed")


def run(mon, step=0.0, stop=None):
    for k, _batch in enumerate(mon):
        time.sleep(step)
        if stop is not None and k + 1 == stop:
            break
    return mon.summary()


def test_a_slow_loader_is_input_bound():
    s = run(fastprep.monitor(slow_batches(8, 0.05), **QUIET), step=0.001)
    assert s.steps == 7  # the first batch is start-up
    assert s.input_bound == 7 and s.starved and s.startup >= 0.05
    assert s.wait_p50 >= 0.05 * 0.97 and s.wait >= 0.05 and s.step >= s.wait  # bins are within ~2%
    assert s.wait_share > 0.5
    text = str(s)
    assert text.startswith("fastprep.monitor: input-bound 100% of steps; waits ")
    assert "python -m fastprep diagnose" in text and "threads" in text
    assert "source: generator: samples made by the dataset" in text and "roi=True" not in text  # nothing to read


def test_a_slow_step_is_not_input_bound():
    s = run(fastprep.monitor([torch.zeros(2)] * 6, **QUIET), step=0.04)
    assert s.steps == 5 and s.input_bound <= 1 and not s.starved
    assert s.step_p50 >= 0.04 * 0.97 and s.wait < 0.004
    assert "the input keeps up" in str(s)


def test_a_break_ends_the_pass_closes_the_loader_and_reports():
    closed, out = [], io.StringIO()
    mon = fastprep.monitor(slow_batches(20, 0.01, closed), live=False, stream=out, device="cpu")
    s = run(mon, stop=5)
    assert closed == ["closed"]
    assert s.steps == 3  # steps 1-3 ended when the next batch was asked for; step 4 never did
    assert out.getvalue().count("fastprep.monitor: input-bound") == 1


def test_an_error_in_the_loader_reaches_the_loop_and_the_pass_still_reports():
    def failing():
        yield from slow_batches(3, 0.0)
        raise KeyError("sample 3")

    out = io.StringIO()
    with pytest.raises(KeyError, match="sample 3"):
        run(fastprep.monitor(failing(), live=False, stream=out, device="cpu"))
    assert "fastprep.monitor: input-bound" in out.getvalue()


def test_passes_accumulate_and_report_close_prints_once():
    out = io.StringIO()
    with fastprep.monitor([1, 2, 3, 4], live=False, report="close", stream=out, device="cpu") as mon:
        for _ in range(2):
            for _b in mon:
                pass
        assert out.getvalue() == ""
    assert mon.summary().passes == 2 and mon.summary().steps == 6
    assert out.getvalue().count("fastprep.monitor:") == 1


def test_a_fastprep_loader_that_starves_the_step():
    class Slow(torch.utils.data.Dataset):
        def __len__(self):
            return 6

        def __getitem__(self, i):
            time.sleep(0.04)
            return torch.zeros(3, 4, 4, dtype=torch.uint8), i

    loader = fastprep.Loader(Slow(), 1, threads=1, depth=1)
    s = run(fastprep.monitor(loader, **QUIET), step=0.001)
    assert s.steps == 5 and s.starved and s.input_bound_share >= 0.5


def fake_nvml(init_error=None, util_error=None):
    def fail(error):
        raise RuntimeError(error)

    return types.SimpleNamespace(
        nvmlInit=lambda: fail(init_error) if init_error else None, nvmlShutdown=lambda: None,
        nvmlDeviceGetHandleByIndex=lambda i: f"gpu{i}", nvmlDeviceGetName=lambda h: b"Fake GPU",
        nvmlDeviceGetUtilizationRates=lambda h: fail(util_error) if util_error else types.SimpleNamespace(gpu=40))


@pytest.mark.parametrize("nvml, util, note", [
    (None, None, "NVML not installed (pip install nvidia-ml-py)"),  # the import fails
    (fake_nvml(init_error="Driver Not Loaded"), None, "NVML failed to start: Driver Not Loaded"),
    (fake_nvml(util_error="GPU is lost"), None, "NVML stopped answering: GPU is lost"),
    (fake_nvml(), 40.0, "Fake GPU"),
], ids=["absent", "init fails", "fails later", "answers"])
def test_nvml_absent_failing_or_answering(monkeypatch, nvml, util, note):
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    s = run(fastprep.monitor(slow_batches(6, 0.02), gpu=0, sample_every=0.02, **QUIET))
    assert s.gpu_util == util and s.gpu_note == note
    assert ("GPU idle 60%" if util else f"GPU n/a ({note})") in s.headline()


def test_live_postfix_on_its_own_tqdm_bar_or_the_loops():
    pytest.importorskip("tqdm")
    from tqdm import tqdm

    out = io.StringIO()
    run(fastprep.monitor(slow_batches(8, 0.03), refresh=0.02, stream=out, device="cpu"))
    text = out.getvalue()
    assert "fastprep.monitor: 8step [" in text  # its own bar (a counter: a generator has no length)
    assert "step/s, input-bound 100% | wait " in text and "| CPU " in text

    out = io.StringIO()
    for _b in tqdm(fastprep.monitor(slow_batches(8, 0.03), refresh=0.02, stream=out, device="cpu"), file=out):
        pass
    text = out.getvalue()
    assert "it/s, input-bound 100% | wait " in text  # the postfix on the loop's own bar...
    assert "step/s" not in text  # ...and no second bar


def test_log_lines_without_tqdm(monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "tqdm", None)  # tqdm not installed
    with caplog.at_level(logging.INFO, logger="train"):
        run(fastprep.monitor(slow_batches(8, 0.03), refresh=0.02, log_every=0.05, logger="train", device="cpu"))
    lines = [r.getMessage() for r in caplog.records]
    assert any(" batches | input-bound 100% | wait " in line for line in lines[:-1])
    assert lines[-1].startswith("fastprep.monitor: input-bound 100% of steps")
    with pytest.raises(ValueError, match="live='tqdm' but tqdm is not installed"):
        fastprep.monitor([1], live="tqdm")


def test_tensorboard_scalars(tmp_path):
    class Writer:
        def __init__(self):
            self.tags = set()

        def add_scalar(self, tag, value, step):
            assert value >= 0 and step > 0
            self.tags.add(tag)

        def flush(self):
            pass

    writer = Writer()
    with fastprep.monitor(slow_batches(6, 0.02), refresh=0.02, tensorboard=writer, **QUIET) as mon:
        run(mon)
    assert {"fastprep.monitor/wait_ms", "fastprep.monitor/step_ms", "fastprep.monitor/input_bound",
            "fastprep.monitor/cpu_util"} <= writer.tags
    pytest.importorskip("tensorboard")
    with fastprep.monitor([1, 2, 3], tensorboard=tmp_path / "runs", **QUIET) as mon:
        run(mon)
    assert list((tmp_path / "runs").glob("events.out.tfevents.*"))


def test_a_failing_writer_turns_the_display_off_not_the_training():
    class Full:
        def add_scalar(self, tag, value, step):
            raise OSError(28, "No space left on device")

    with pytest.warns(RuntimeWarning, match="the live display failed and is off for this run: OSError"):
        s = run(fastprep.monitor(slow_batches(5, 0.02), refresh=0.01, tensorboard=Full(), **QUIET))
    assert s.steps == 4


@pytest.mark.parametrize("kwargs, error", [
    (dict(input_bound=1.5), "expected input_bound in (0, 1), got 1.5"),
    (dict(live="yes"), "expected live to be True, False, 'tqdm' or 'log', got 'yes'"),
    (dict(report="always"), "expected report to be 'pass', 'close' or None, got 'always'"),
    (dict(refresh=0), "expected refresh > 0 seconds, got 0"),
    (dict(gpu=-1), "expected gpu to be an int >= 0, got -1"),
    (dict(device="bogus"), "bad device 'bogus'"),
    (dict(tensorboard=3), "expected tensorboard to be a SummaryWriter or a log directory, got 3"),
])
def test_bad_arguments_name_the_value(kwargs, error):
    with pytest.raises(ValueError, match=error.replace("(", r"\(").replace(")", r"\)")):
        fastprep.monitor([1], **kwargs)


def test_a_non_iterable_is_a_type_error():
    with pytest.raises(TypeError, match="expected an iterable of batches, got 3"):
        fastprep.monitor(3)


class FakeEvent:
    """A CUDA event on a fake GPU timeline: `gpu.now` when recorded, complete once `gpu.done` passes it."""
    def __init__(self, gpu):
        self.gpu, self.t = gpu, None

    def record(self, stream):
        self.t = self.gpu.now

    def query(self):
        return self.t <= self.gpu.done

    def synchronize(self):
        self.gpu.syncs += 1
        self.gpu.done = max(self.gpu.done, self.t)

    def elapsed_time(self, end):
        assert self.query() and end.query(), "read before complete"
        return end.t - self.t  # ms


@pytest.mark.parametrize("gpu_behind", [False, True])
def test_the_event_ring_reads_steps_late_and_skips_the_first(gpu_behind):
    gpu = types.SimpleNamespace(now=0.0, done=-1.0 if gpu_behind else float("inf"), syncs=0)
    steps = []
    ring = EventRing("stream", lambda w, s: steps.append((round(w * 1e3, 6), round(s * 1e3, 6))), lag=4,
                     make_event=lambda: FakeEvent(gpu))
    for i in range(10):  # step i: an idle wait of i ms, then 10 ms of kernels
        gpu.now = 20.0 * i
        ring.request()
        gpu.now += i
        ring.arrived()
    assert steps == [(i, 20.0) for i in range(1, 6)]  # read `lag` steps late
    assert (gpu.syncs > 0) == gpu_behind  # waits only when the GPU is `lag` steps behind
    gpu.now = 200.0
    ring.request()  # the request that ends with StopIteration ends step 9
    ring.drain()
    assert steps == [(i, 20.0) for i in range(1, 10)]


def test_the_cuda_branch_with_fake_cuda(monkeypatch):
    """No GPU here: torch.cuda's pieces are faked (events on the host clock), so the loop's CUDA
    branch, the GPU found by UUID and the summary's clock run; on a GPU the events are real."""
    clock = types.SimpleNamespace(now=0.0, done=float("inf"), syncs=0)

    class WallEvent(FakeEvent):
        def record(self, stream):
            self.t = time.perf_counter() * 1e3

    looked_up = []
    nvml = fake_nvml()
    nvml.nvmlDeviceGetHandleByUUID = lambda uuid: looked_up.append(uuid) or "gpu"
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda index: f"stream {index}")
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: types.SimpleNamespace(uuid="1234-abcd"))
    monkeypatch.setattr(torch.cuda, "Event", lambda enable_timing: WallEvent(clock))
    s = run(fastprep.monitor(slow_batches(6, 0.05), live=False, report=None, sample_every=0.02), step=0.001)
    assert s.device == "cuda" and s.clock == "CUDA events on cuda's current stream"
    assert s.steps == 5 and s.input_bound == 5 and s.wait >= 0.05 and s.host_wait >= 0.05
    assert looked_up == ["GPU-1234-abcd"] and s.gpu_util == 40.0
    assert "inside next() on the host" in s.details()[0]


def test_cpu_utilisation_from_proc_stat(tmp_path):
    stat = tmp_path / "stat"
    clock = CpuClock(str(stat))  # no file: falls back (psutil or os.times)
    assert "cores" in clock.what
    stat.write_text("cpu  1 1 1 1 0 0 0 0 0 0\ncpu0 100 0 0 100 0 0 0 0 0 0\n" +
                    "".join(f"cpu{c} 100 0 0 100 0 0 0 0 0 0\n" for c in range(1, 256)))
    clock = CpuClock(str(stat))
    before = clock.read()
    stat.write_text("".join(f"cpu{c} 175 0 0 125 0 0 0 0 0 0\n" for c in range(256)))
    busy, total = (a - b for a, b in zip(clock.read(), before))
    assert busy / total == 0.75 and clock.what.startswith("busy share of the")


def test_quantiles_are_within_the_bin_width():
    stats = StepStats(0.1)
    for k in range(1, 101):
        stats.add(k * 1e-3, 0.2)
    stats.flush()
    assert abs(quantile(stats.wait_bins, 0.5) / 0.0505 - 1) < 0.04
    assert abs(quantile(stats.wait_bins, 0.95) / 0.095 - 1) < 0.04
    assert stats.input_bound == 80  # waits over 20 ms of a 200 ms step

