"""fastprep.monitor: watch a real training loop for input starvation, step by step."""

from __future__ import annotations

import logging
import time
import warnings
import weakref
from collections.abc import Iterable, Iterator
from typing import Any, TextIO

import torch

from fastprep.batch._device_prefetcher import check_device
from fastprep.core._args import check_int, check_real
from fastprep.core._failure_text import failure_line
from fastprep.core._iterators import stop_iterator
from fastprep.monitoring._events import EventRing
from fastprep.monitoring._fetched import FetchMeter, fetching_dataset
from fastprep.monitoring._live import Live, TensorBoard, tqdm_around, tqdm_class
from fastprep.monitoring._pipeline import PipelineFacts, facts_of
from fastprep.monitoring._samplers import CpuClock, GpuProbe, ProcessClock, Sampler, mean_cpu, mean_gpu, mean_process
from fastprep.monitoring._stats import StepStats, Window
from fastprep.monitoring._summary import MonitorSummary

NO_SUMS = (0.0, 0, 0.0, 0.0, 0.0, 0.0)


class Monitor:
    """Wraps any iterable of batches; per step, times the wait for the batch against the step.

    ``fastprep.monitor`` is this class. A step runs from the loop's request for a batch (its call
    of ``next()``) to its request for the following one: the wait inside the wrapped iterator plus
    the loop's own work. A step is *input-bound* when its wait exceeds `input_bound` of it. On a
    CUDA device the step and the wait are read from events recorded on the loop's current stream,
    read steps late (no synchronisation per step), so queued kernels count and a wait hidden behind
    them does not. GPU (NVML) and CPU utilisation are sampled every `sample_every` seconds by a
    daemon thread. When the loader's dataset counts ``bytes_fetched`` (a PackedDataset over a URL),
    the live line and the summary add the bytes it fetched per sample and per second and its
    requests per second (its DataLoader workers' included: fastprep.monitoring._fetched). Each pass
    (``for batch in mon``) ends with a summary (``report="pass"``); the first
    batch of a pass is start-up, not a step. Passes accumulate: ``summary()`` covers them all.

    Args:
        batches: any iterable of batches (DataLoader, fastprep.Loader, DevicePrefetcher, a list).
        device: where the loop's step runs: "cuda", "cuda:1", "cpu", a torch.device; default the
            loader's own ``device`` when it has one, else the current CUDA device when CUDA is
            available, else the CPU (host clock, no GPU sampling).
        input_bound: a step whose wait exceeds this share of it is input-bound (0.1); the run is
            called input-bound when all waits exceed this share of all step time.
        live: True shows a tqdm postfix (on the loop's own tqdm bar when it has one, else a bar of
            its own) or, without tqdm, a line every `log_every` seconds; "tqdm" or "log" force one;
            False shows nothing while running.
        refresh: seconds between updates of the live numbers (and TensorBoard points).
        log_every: seconds between log lines.
        logger: a logging.Logger (or a logger's name) for log lines and the summary, at INFO;
            default `stream`.
        stream: where lines, the bar and the summary go without a logger (default stderr).
        report: "pass" prints the summary when a pass ends (exhausted, break, close, an
            exception), "close" only at ``close()`` / the end of a ``with`` block, None never.
        tensorboard: a SummaryWriter, or a log directory to write one to: scalars
            fastprep.monitor/{input_bound,wait_ms,step_ms,gpu_util,cpu_util} at each refresh.
        gpu: the GPU NVML samples: None for `device`'s (none on the CPU), an NVML index
            (nvidia-smi's numbering), or False for none.
        sample_every: seconds between GPU / CPU samples.

    Example:
        >>> for images, labels in fastprep.monitor(loader, device="cuda"):
        ...     train_step(images, labels)
        fastprep.monitor: input-bound 63% of steps; waits 41 ms per step (p50 38 ms, p95 90 ms); ...
        >>> with fastprep.monitor(loader, report="close") as mon:
        ...     for epoch in range(3):
        ...         for batch in mon:
        ...             train_step(batch)
        >>> mon.summary().input_bound_share
    """

    def __init__(self, batches: Iterable[Any], *, device: Any = None, input_bound: float = 0.1,
                 live: bool | str = True, refresh: float = 1.0, log_every: float = 10.0,
                 logger: logging.Logger | str | None = None, stream: TextIO | None = None,
                 report: str | None = "pass", tensorboard: Any = None, gpu: int | bool | None = None,
                 sample_every: float = 0.5):
        if not hasattr(batches, "__iter__"):
            raise TypeError(f"monitor: expected an iterable of batches, got {batches!r}")
        for name, value in (("refresh", refresh), ("log_every", log_every), ("sample_every", sample_every)):
            if not check_real("monitor", name, value) > 0:
                raise ValueError(f"monitor: expected {name} > 0 seconds, got {value!r}")
        if not 0 < check_real("monitor", "input_bound", input_bound) < 1:
            raise ValueError(f"monitor: expected input_bound in (0, 1), got {input_bound!r}")
        if live not in (True, False, "tqdm", "log") or not isinstance(live, (bool, str)):
            raise ValueError(f"monitor: expected live to be True, False, 'tqdm' or 'log', got {live!r}")
        if report not in ("pass", "close", None):
            raise ValueError(f"monitor: expected report to be 'pass', 'close' or None, got {report!r}")
        if gpu is not None and gpu is not False:
            check_int("monitor", "gpu", gpu, 0)
        if logger is not None and not isinstance(logger, (str, logging.Logger)):
            raise ValueError(f"monitor: expected logger to be a logging.Logger or a name, got {logger!r}")
        self.batches = batches
        self.device = _resolve_device(device, batches)
        self.live, self.refresh, self.log_every, self.report, self.gpu = live, refresh, log_every, report, gpu
        self.logger = logging.getLogger(logger) if isinstance(logger, str) else logger
        self.stream, self.sample_every = stream, sample_every
        self._bar_class = tqdm_class(required=live == "tqdm") if live in (True, "tqdm") else None
        self._tensorboard = TensorBoard(tensorboard) if tensorboard is not None else None
        self.stats = StepStats(float(input_bound))
        self.host_wait_sum = 0.0
        self.passes = 0
        self.startup: float | None = None
        self._cpu, self._process = CpuClock(), ProcessClock()
        self._sampler = Sampler(None, self._cpu, sample_every, self._process)
        self._gpu_note = "not sampled (gpu=False)" if gpu is False else f"the loop runs on {self.device}"
        self._active: Any = None  # weakref to the running pass
        self._ring: EventRing | None = None
        self._live: Live | None = None
        self._seen, self._seen_sums = Window(), NO_SUMS
        fetching = fetching_dataset(batches)
        self._fetch = FetchMeter(fetching) if fetching is not None else None
        self.facts = _facts(batches, self.device)

    def __len__(self) -> int:
        return len(self.batches)  # type: ignore[arg-type]

    def __iter__(self) -> Iterator[Any]:
        running = self._active() if self._active is not None else None
        if running is not None:
            running.close()  # a new pass ends the one left unfinished
        gen = self._pass()
        self._active = weakref.ref(gen)
        return gen

    def _pass(self) -> Iterator[Any]:
        perf = time.perf_counter
        t_start = perf()
        meter = self._fetch
        if meter is not None:
            meter.begin(t_start)
        it = iter(self.batches)
        self._process.source = it  # its DataLoader workers count as this process's CPU
        t_iter = perf() - t_start
        n = -1  # the index of the batch the loop holds (-1: none yet; batch 0 is start-up, not a step)
        try:
            ring = self._begin_pass()
            append, refresh = self.stats.pending.append, self.refresh
            t0 = t_prev = perf()
            wait, next_refresh = 0.0, t0 + refresh
            while True:
                if n > 0 and ring is not None:  # step n ended at t0: count it, then time the wait apart
                    self.host_wait_sum += wait
                elif n > 0:
                    append(wait)
                    append(t0 - t_prev)
                if ring is not None:
                    ring.request()
                t_ask = perf()
                try:
                    batch = next(it)
                except StopIteration:
                    return
                except Exception as exc:  # one line naming the sample (a source's error names the file and
                    if self.report is not None:  # on_error), before the summary and the traceback
                        self._write(f"fastprep.monitor: batch {n + 1} failed: {failure_line(exc)}")
                    raise
                t1 = perf()
                if ring is not None:
                    ring.arrived()
                wait, t_prev = t1 - t_ask, t0
                n += 1
                if meter is not None:
                    meter.count(batch)
                if not n and self.startup is None:
                    self.startup = t_iter + wait
                if t1 >= next_refresh:
                    next_refresh = t1 + refresh
                    self._show(n + 1, t1)
                yield batch
                batch = None  # the loader may reuse a batch's memory once the next is asked for
                t0 = perf()
        finally:
            stop_iterator(it)  # a DataLoader's workers or a fastprep.Loader's threads, now
            self._end_pass(n + 1)

    def _begin_pass(self) -> EventRing | None:
        self.passes += 1
        gpu, uuid = self.gpu, None
        if self.device.type == "cuda":
            index = self.device.index if self.device.index is not None else torch.cuda.current_device()
            if gpu is None:
                gpu, uuid = index, str(getattr(torch.cuda.get_device_properties(index), "uuid", "")) or None
            self._ring = EventRing(torch.cuda.current_stream(index), self.stats.add)
        self._sampler.gpu = GpuProbe(gpu, uuid) if gpu is not None and gpu is not False else None
        self._sampler.start()
        if self.live is not False:
            bar = tqdm_around(self.batches, self) if self.live != "log" else None
            try:
                total = len(self.batches)  # type: ignore[arg-type]
            except TypeError:  # no length (an iterable dataset's DataLoader raises it)
                total = None
            self._live = Live(bar, self._bar_class, total, self.logger, self.stream, self.log_every,
                              time.perf_counter())
        return self._ring

    def _show(self, batches: int, now: float) -> None:
        """The live line and TensorBoard points (on CUDA, of the steps the event ring has read)."""
        seen, sums = self.stats.snapshot(), self._sampler.sums
        window, gpu, cpu = seen - self._seen, mean_gpu(sums, self._seen_sums), mean_cpu(sums, self._seen_sums)
        own = mean_process(sums, self._seen_sums)
        self._seen, self._seen_sums = seen, sums
        text = window.line()
        if gpu is not None:
            text += f" | GPU {gpu:.0f}%"
        elif self._sampler.gpu is not None and self._sampler.gpu.why:
            text += " | GPU n/a"
        if own is not None:
            text += f" | CPU {own:.0f}%" + (f" (machine {cpu:.0f}%)" if cpu is not None else "")
        if self._fetch is not None:
            text += self._fetch.live(now)
        try:  # a closed stream or a full disk turns the display off, never the training
            if self._live is not None:
                self._live.show(text, batches, now)
            if self._tensorboard is not None and window.steps:
                n = window.steps
                self._tensorboard.add(seen.steps, {
                    "input_bound": 100.0 * window.input_bound / n, "wait_ms": 1e3 * window.wait_sum / n,
                    "step_ms": 1e3 * window.step_sum / n, "gpu_util": gpu, "cpu_util": cpu,
                    "cpu_process": own})
        except Exception as exc:  # anything a writer raises
            warnings.warn(f"fastprep.monitor: the live display failed and is off for this run: {exc!r}",
                          RuntimeWarning, stacklevel=2)
            self.live, self._live, self._tensorboard = False, None, None

    def _end_pass(self, batches: int) -> None:
        if self._ring is not None:
            self._ring.drain()
        self._sampler.stop()
        now = time.perf_counter()
        self._show(batches, now)
        if self._fetch is not None:
            self._fetch.end(now)
        self._ring = None
        probe, self._sampler.gpu = self._sampler.gpu, None
        if probe is not None:
            self._gpu_note = probe.why or probe.name
            probe.close(probe.why)
        if self._live is not None:
            self._live.close(batches)
        if self.report == "pass":
            self._write(str(self.summary()))
        self._active, self._live = None, None

    def _write(self, text: str) -> None:
        try:  # the summary, at the end of a pass that may have ended by an exception: never a new one
            (self._live or Live(None, None, None, self.logger, self.stream, self.log_every, 0.0)).write(text)
        except Exception as exc:  # anything a stream or a logger handler raises
            warnings.warn(f"fastprep.monitor: could not write the summary: {exc!r}", RuntimeWarning, stacklevel=2)

    def summary(self) -> MonitorSummary:
        """What was measured so far, over every pass (a step counts once the next batch is asked
        for). ``str()`` of it is the headline, the details and what to do next. Called while a
        pass runs on CUDA, it waits once for the GPU to finish the steps it reads."""
        if self._ring is not None:
            self._ring.drain()
        self.stats.flush()
        sums, probe = self._sampler.sums, self._sampler.gpu
        gpu_note = (probe.why or probe.name) if probe is not None else self._gpu_note
        host_wait = self.host_wait_sum if self.device.type == "cuda" else self.stats.wait_sum
        clock = f"CUDA events on {self.device}'s current stream" if self.device.type == "cuda" else "host clock"
        fetched, samples, seconds = self._fetch.totals(time.perf_counter()) if self._fetch is not None else (0, 0, 0.0)
        epoch_samples, pack_bytes = self._fetch.pack() if self._fetch is not None else (0, 0)
        bad = getattr(getattr(self.facts_loader, "bad_samples", None), "count", 0)
        machine = self._cpu.machine
        return MonitorSummary.of(self.stats, host_wait, gpu_util=mean_gpu(sums, NO_SUMS),
                                 gpu_note=gpu_note, cpu_util=mean_cpu(sums, NO_SUMS) if machine else None,
                                 cpu_note=self._cpu.what if machine else "not sampled (no /proc/stat, no psutil)",
                                 cpu_process=mean_process(sums, NO_SUMS), cpu_process_note=self._process.what,
                                 startup=self.startup, passes=self.passes, clock=clock, device=str(self.device),
                                 fetched=fetched or None, fetched_samples=samples, fetch_seconds=seconds,
                                 fetch_requests=self._fetch.request_total() if self._fetch is not None else 0,
                                 epoch_samples=epoch_samples, pack_bytes=pack_bytes,
                                 facts=self.facts, bad_samples=bad if isinstance(bad, int) else 0)

    @property
    def facts_loader(self) -> Any:
        """The DataLoader or fastprep.Loader behind the monitored batches (or the batches)."""
        from fastprep.monitoring._pipeline import unwrap  # noqa: PLC0415

        try:
            return unwrap(self.batches)
        except Exception:  # an odd wrapper: no loader to read
            return None

    def close(self) -> None:
        """End the running pass (if any), print the summary when ``report="close"``, close the
        TensorBoard writer made from a log directory."""
        running = self._active() if self._active is not None else None
        if running is not None:
            running.close()
        if self.report == "close":
            self._write(str(self.summary()))
        if self._tensorboard is not None:
            self._tensorboard.close()

    def __enter__(self) -> Monitor:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


monitor = Monitor


def _facts(batches: Any, device: torch.device) -> PipelineFacts | None:
    """The pipeline's description, or None: describing it never stops the training."""
    try:
        return facts_of(batches, device)
    except Exception as exc:  # an object we cannot read
        warnings.warn(f"fastprep.monitor: cannot describe the pipeline ({exc!r}); the advice is the general one",
                      RuntimeWarning, stacklevel=3)
        return None


def _resolve_device(device: Any, batches: Any) -> torch.device:
    if device is None:
        own = getattr(batches, "device", None)
        device = own if own is not None else "cuda" if torch.cuda.is_available() else "cpu"
    return check_device("monitor", device)
