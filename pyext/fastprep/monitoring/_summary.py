"""What a monitored run found, in numbers and in words, with what to do next."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import fastprep.monitoring._advice as say
import fastprep.monitoring._remedies as mr
from fastprep.monitoring._fetched import size
from fastprep.monitoring._pipeline import PipelineFacts
from fastprep.monitoring._stats import StepStats, ms, quantile

CPU_BUSY = 85.0  # percent: above this, more threads or workers cannot help
OWN = 0.5  # the cores are this process's when it uses at least this share of what is busy
GPU_LOW = 70.0  # percent: below this, with the input keeping up, the step leaves the GPU idle
BURSTY = 4.0  # p95 / p50 of the waits above this: batches arrive in bursts



@dataclass(frozen=True)
class MonitorSummary:
    """What fastprep.monitor measured. Durations in seconds; utilisations in percent.

    A step is the time from one batch's arrival request to the next one's: the wait for the batch
    (inside the wrapped iterator's ``next()``) plus the loop's own work on it. A step is
    *input-bound* when its wait exceeds `threshold` of it. On a CUDA device both come from events
    on the loop's stream, so a wait counts only while the GPU had nothing queued (see
    fastprep.monitoring._events); `host_wait` is the time spent inside ``next()`` on the host clock.
    The first batch of each pass (start-up: workers starting, the first batch made) is not a step:
    `startup` is the first pass's.

    Args:
        steps, input_bound: steps measured, and how many were input-bound.
        threshold: the input-bound share of a step.
        wait, wait_p50, wait_p95, step, step_p50, step_p95: mean, median and 95th percentile.
        wait_share: all waits over all step time: removing them makes the loop 1 / (1 - share) faster.
        host_wait: mean time inside next() (host clock).
        gpu_util, gpu_note: mean NVML utilisation, or None with the reason in `gpu_note`.
        cpu_util, cpu_note: the machine's mean busy share of the cores this process may use (every
            process counts), and what it covers; None when it cannot be read.
        cpu_process, cpu_process_note: this training process's own share of those cores (its threads
            and its DataLoader's workers), and how it was read.
        startup, passes, clock, device: the first batch's wait; passes over the loader; which clock
            timed the steps; the device.
        fetched, fetched_samples, fetch_seconds: bytes the loader's dataset fetched from remote
            storage (its ``bytes_fetched``, e.g. a PackedDataset over a URL), the samples received
            and the seconds of the passes that fetched them; `fetched` is None without such a dataset
            or while its counter has not moved. A PackedDataset's counters include its DataLoader's
            worker processes' reads.
        fetch_requests: the requests those bytes took (its store's ``requests``; 0 when unknown).
        epoch_samples, pack_bytes: the dataset's samples and its pack's bytes (its ``shard_sizes``),
            against which the summary sets the bytes fetched per epoch; 0 when it does not say.
        facts: the pipeline (fastprep.monitoring._pipeline.PipelineFacts; None when unreadable): the
            summary prints it and advises only the remedies that apply to it and are not taken.
        bad_samples: samples the loader skipped (its ``bad_samples.count``, when it keeps one).

    Example:
        >>> print(mon.summary())          # headline, then the details and what to do next
        >>> mon.summary().input_bound_share
        0.63
    """
    steps: int
    input_bound: int
    threshold: float
    wait: float
    wait_p50: float
    wait_p95: float
    step: float
    step_p50: float
    step_p95: float
    wait_share: float
    host_wait: float
    gpu_util: float | None
    gpu_note: str
    cpu_util: float | None
    cpu_note: str
    startup: float | None
    passes: int
    clock: str
    device: str
    fetched: int | None = None
    fetched_samples: int = 0
    fetch_seconds: float = 0.0
    fetch_requests: int = 0
    epoch_samples: int = 0
    pack_bytes: int = 0
    cpu_process: float | None = None
    cpu_process_note: str = ""
    facts: PipelineFacts | None = None
    bad_samples: int = 0

    @classmethod
    def of(cls, stats: StepStats, host_wait_sum: float, **rest: Any) -> MonitorSummary:
        n = stats.steps
        return cls(steps=n, input_bound=stats.input_bound, threshold=stats.threshold,
                   wait=stats.wait_sum / n if n else 0.0, wait_p50=quantile(stats.wait_bins, 0.5),
                   wait_p95=quantile(stats.wait_bins, 0.95), step=stats.step_sum / n if n else 0.0,
                   step_p50=quantile(stats.step_bins, 0.5), step_p95=quantile(stats.step_bins, 0.95),
                   wait_share=stats.wait_sum / stats.step_sum if stats.step_sum > 0 else 0.0,
                   host_wait=host_wait_sum / n if n else 0.0, **rest)

    @property
    def input_bound_share(self) -> float:
        return self.input_bound / self.steps if self.steps else 0.0

    @property
    def bytes_per_sample(self) -> float | None:
        """Bytes fetched from remote storage per sample received (None: nothing fetched)."""
        return self.fetched / self.fetched_samples if self.fetched and self.fetched_samples else None

    @property
    def fetch_rate(self) -> float | None:
        """Bytes fetched from remote storage per second of the passes (None: nothing fetched)."""
        return self.fetched / self.fetch_seconds if self.fetched and self.fetch_seconds > 0 else None

    @property
    def request_rate(self) -> float | None:
        """Requests to remote storage per second of the passes (None: none counted)."""
        return self.fetch_requests / self.fetch_seconds if self.fetch_requests and self.fetch_seconds > 0 else None

    @property
    def epoch_fetched(self) -> float | None:
        """Bytes fetched from remote storage per epoch (per sample times the epoch's samples; None
        when nothing was fetched or the dataset has no length)."""
        per = self.bytes_per_sample
        return per * self.epoch_samples if per is not None and self.epoch_samples else None

    @property
    def starved(self) -> bool:
        """The run is input-bound: its waits exceed `threshold` of its time."""
        return self.wait_share > self.threshold

    def gpu(self) -> str:
        return f"GPU idle {100 - self.gpu_util:.0f}%" if self.gpu_util is not None else f"GPU n/a ({self.gpu_note})"

    def cpu(self) -> str:
        """'CPU 45% (machine 97%)': this process's share of the cores, then the machine's busy share."""
        machine = f"machine {self.cpu_util:.0f}%" if self.cpu_util is not None else f"machine n/a ({self.cpu_note})"
        if self.cpu_process is None:
            return f"CPU n/a ({self.cpu_process_note}); {machine}"
        return f"CPU {self.cpu_process:.0f}% ({machine})"

    def headline(self) -> str:
        """One line: 'input-bound 63% of steps; waits 41 ms per step (p50 38 ms, p95 90 ms); GPU idle 58%;
        step 65 ms; CPU 97%'."""
        if not self.steps:
            return "no step measured yet (the first batch of each pass is start-up, not a step)"
        return (f"input-bound {self.input_bound_share:.0%} of steps; waits {ms(self.wait)} per step "
                f"(p50 {ms(self.wait_p50)}, p95 {ms(self.wait_p95)}); {self.gpu()}; "
                f"step {ms(self.step)}; {self.cpu()}")

    def advice(self) -> list[str]:
        """What to do next, from the numbers (one item a line; indented lines belong to the one before)."""
        if not self.steps:
            return []
        if not self.starved:
            out = [say.KEEPS_UP.format(share=self.wait_share, threshold=self.threshold)]
            if self.gpu_util is not None and self.gpu_util < GPU_LOW:
                out.append(say.GPU_IDLE.format(util=self.gpu_util))
            else:
                out.append(say.STEP_FIRST + ".")
            return out
        out = [say.WAITED.format(share=self.wait_share, speedup=1 / max(1 - self.wait_share, 1e-9)),
               say.DIAGNOSE.format(device=self.device), self._cores()]
        todo, done = self.remedies()
        out += ["  " + c for c in todo] + list(filter(None, [say.in_place(done)]))
        if self.wait_p50 > 0 and self.wait_p95 > BURSTY * self.wait_p50:
            out.append(say.BURSTS.format(p50=ms(self.wait_p50), p95=ms(self.wait_p95)))
        return out

    def _cores(self) -> str:
        """Whether more threads can help: the cores busy with this process's work (no), busy with other
        processes' (they would compete), or with room."""
        own, machine = self.cpu_process, self.cpu_util
        busy = machine if machine is not None else own
        threads = say.more_threads(self.facts)
        if busy is None:
            return say.CORES["unknown"].format(threads=threads)
        if busy >= CPU_BUSY and own is not None and own >= OWN * busy:
            return say.CORES["own"].format(own=own)
        if busy >= CPU_BUSY:
            return say.CORES["others"].format(busy=busy, own=own or 0)
        shown = f", machine {machine:.0f}%" if machine is not None and own is not None else ""
        return say.CORES["room"].format(busy=own if own is not None else busy, machine=shown, threads=threads)

    def remedies(self) -> tuple[list[str], list[str]]:
        """(remedies that apply to the pipeline and are not taken, those in place): the raw-loading and
        transforms rows of fastprep.monitoring._remedies, and the loader's and the copy's."""
        return mr.remedies(self.facts or PipelineFacts(device=self.device.split(":")[0]),
                           (mr.RAW, mr.TRANSFORMS, mr.COLLATE))

    def details(self) -> list[str]:
        """What was measured and how (two lines; a third when the dataset fetched from remote storage)."""
        start = f"; first batch after {self.startup:.2f} s (start-up, not a step)" if self.startup is not None else ""
        host = f", {ms(self.host_wait)} a step inside next() on the host" if self.clock != "host clock" else ""
        return [f"{self.steps} steps, {self.passes} pass(es), {self.device}, timed by {self.clock}{host}; step p50 "
                f"{ms(self.step_p50)}, p95 {ms(self.step_p95)}{start}",
                f"input-bound step: its wait for the batch exceeds {self.threshold:.0%} of the step (the wait plus the "
                f"loop's own work); CPU: {self.cpu_process_note}; machine: {self.cpu_note}; GPU: {self.gpu_note}"] \
            + (self.facts.describe().splitlines() if self.facts is not None else []) + self.fetch_line() \
            + ([f"bad samples skipped: {self.bad_samples}"] if self.bad_samples else [])

    def fetch_line(self) -> list[str]:
        """What the dataset fetched from remote storage (one line; none when nothing was)."""
        per, rate = self.bytes_per_sample, self.fetch_rate
        if per is None:
            return []
        epoch, pack = self.epoch_fetched, self.pack_bytes
        per_epoch = f"; {size(epoch)} per epoch" if epoch is not None else ""
        if epoch is not None and pack:  # a shuffle that re-fetches the pack shows here as many times its size
            per_epoch += f", {epoch / pack:.1f}x the pack's {size(pack)}"
        requests = self.request_rate
        per_s = f", {requests:.3g} requests/s" if requests is not None else ""
        n = f" in {self.fetch_requests} requests" if self.fetch_requests else ""
        return [f"fetched from remote storage: {size(per)} per sample, {size(rate or 0.0)}/s{per_s} "
                f"({size(self.fetched)}{n} for {self.fetched_samples} samples in {self.fetch_seconds:.3g} s; "
                f"DataLoader workers' reads included){per_epoch}"]

    def __str__(self) -> str:
        lines = [f"fastprep.monitor: {self.headline()}"]
        if self.steps:
            lines += ["  " + d for d in self.details()]
        for k, a in enumerate(self.advice()):  # the finding, then what to do
            first = k == 0 or a.startswith("already in place")
            lines.append("    " + a[2:] if a.startswith("  ") else f"  {a}" if first else f"  next: {a}")
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        """The fields, plus input_bound_share, starved, bytes_per_sample, fetch_rate, request_rate and
        epoch_fetched (for JSON or a logger)."""
        return {**asdict(self), "input_bound_share": self.input_bound_share, "starved": self.starved,
                "bytes_per_sample": self.bytes_per_sample, "fetch_rate": self.fetch_rate,
                "request_rate": self.request_rate,
                "epoch_fetched": self.epoch_fetched}
