"""GPU and host CPU utilisation, sampled by a daemon thread every `every` seconds while a loop runs.

GPU: NVML's utilisation (nvidia-ml-py's `pynvml`): the share of the last sample period (1/6 s to
1 s, by product) in which one or more kernels ran. No NVML, or NVML failing, leaves the GPU
figure None with the reason; it never stops the loop.

CPU: the busy share of the cores this process may run on (its affinity mask), from /proc/stat's
per-core lines: every process counts, DataLoader workers included, and so does any other load
competing for those cores. Without /proc (macOS, Windows) psutil's per-core times when psutil is
installed, else this process's own CPU time from os.times() (its threads, not worker processes).
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any


class CpuClock:
    """Cumulative (busy, total) CPU seconds; utilisation is the ratio of two readings' differences.

    Args:
        stat_path: where the per-core counters are read (Linux); tests point it elsewhere.
    """

    def __init__(self, stat_path: str = "/proc/stat"):
        self.stat_path = stat_path
        affinity = getattr(os, "sched_getaffinity", None)
        self.cores = cores = sorted(affinity(0)) if affinity else list(range(os.cpu_count() or 1))
        if self._proc() is not None:
            self.read, self.what = self._proc, f"busy share of the {len(cores)} cores this process may use"
            return
        try:
            import psutil  # noqa: PLC0415 (optional)
        except ImportError:
            psutil = None
        if psutil is not None:
            self.read, self.what = lambda: _psutil_times(psutil, cores), f"busy share of {len(cores)} cores (psutil)"
        else:
            self.read, self.what = self._own, f"this process's CPU time over {len(cores)} cores (os.times)"

    def _proc(self) -> tuple[float, float] | None:
        try:
            with open(self.stat_path) as f:
                lines = f.read().splitlines()
        except OSError:
            return None
        wanted = {f"cpu{c}" for c in self.cores}
        busy = total = 0.0
        for line in lines:
            fields = line.split()
            if fields and fields[0] in wanted:
                ticks = [float(x) for x in fields[1:9]]  # user nice system idle iowait irq softirq steal
                total += sum(ticks)
                busy += sum(ticks) - ticks[3] - ticks[4]
        return (busy, total) if total else None

    def _own(self) -> tuple[float, float]:
        t = os.times()
        return t.user + t.system, time.perf_counter() * len(self.cores)


def _psutil_times(psutil: Any, cores: list[int]) -> tuple[float, float]:
    per_core = psutil.cpu_times(percpu=True)
    busy = total = 0.0
    for c in cores:
        if c < len(per_core):
            t = per_core[c]
            total += sum(t)
            busy += sum(t) - t.idle - getattr(t, "iowait", 0.0)
    return busy, total


class GpuProbe:
    """One GPU's utilisation through NVML, or `None` with `why` when NVML is missing or fails.

    Args:
        index: the NVML index (nvidia-smi's numbering) when `uuid` is not given or not found.
        uuid: the GPU's UUID as torch reports it (survives CUDA_VISIBLE_DEVICES renumbering).
    """

    def __init__(self, index: int, uuid: str | None = None):
        self.nvml: Any = None
        self.handle: Any = None
        self.name = f"GPU {index}"
        self.why = ""
        try:
            import pynvml  # noqa: PLC0415 (optional: pip install nvidia-ml-py)
        except ImportError:
            self.why = "NVML not installed (pip install nvidia-ml-py)"
            return
        try:
            pynvml.nvmlInit()
        except Exception as exc:  # any NVML failure: no driver, no library, no permission
            self.why = f"NVML failed to start: {exc}"
            return
        self.nvml = pynvml
        try:
            self.handle = self._handle(index, uuid)
            name = pynvml.nvmlDeviceGetName(self.handle)
            self.name = name.decode() if isinstance(name, bytes) else str(name)
        except Exception as exc:  # a bad index, a lost GPU
            self.close(f"NVML has no GPU {index}: {exc}")

    def _handle(self, index: int, uuid: str | None) -> Any:
        if uuid:
            try:
                return self.nvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")
            except Exception:  # an older driver or a MIG slice: the index then
                pass
        return self.nvml.nvmlDeviceGetHandleByIndex(index)

    def utilisation(self) -> float | None:
        """Percent of the last sample period with a kernel running; None (and `why`) on failure."""
        if self.handle is None:
            return None
        try:
            return float(self.nvml.nvmlDeviceGetUtilizationRates(self.handle).gpu)
        except Exception as exc:  # the GPU fell off the bus, the driver was reloaded
            self.close(f"NVML stopped answering: {exc}")
            return None

    def close(self, why: str = "") -> None:
        if self.nvml is not None:
            try:
                self.nvml.nvmlShutdown()
            except Exception:  # shutting down after a failure may fail too
                pass
        self.nvml, self.handle = None, None
        self.why = why or self.why


class Sampler:
    """Samples the GPU (if a probe is given) and the CPU every `every` seconds on a daemon thread,
    keeping sums for means over any span (`sums` now against `sums` then: mean_gpu, mean_cpu).

    Args:
        gpu: a GpuProbe, or None.
        cpu: a CpuClock, or None.
        every: seconds between samples.
    """

    def __init__(self, gpu: GpuProbe | None, cpu: CpuClock | None, every: float):
        self.gpu, self.cpu, self.every = gpu, cpu, every
        # (gpu percent sum, gpu samples, cpu busy, cpu total), replaced whole so a reader on
        # another thread never sees half an update.
        self.sums = (0.0, 0, 0.0, 0.0)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_cpu: tuple[float, float] | None = None

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._last_cpu = self.cpu.read() if self.cpu is not None else None
        self._thread = threading.Thread(target=self._run, name="fastprep-monitor-sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.sample()

    def sample(self) -> None:
        gpu_sum, gpu_n, cpu_busy, cpu_total = self.sums
        if self.gpu is not None:
            u = self.gpu.utilisation()
            if u is not None:
                gpu_sum, gpu_n = gpu_sum + u, gpu_n + 1
        if self.cpu is not None and self._last_cpu is not None:
            now = self.cpu.read()
            busy, total = now[0] - self._last_cpu[0], now[1] - self._last_cpu[1]
            if total > 0:
                cpu_busy, cpu_total = cpu_busy + busy, cpu_total + total
            self._last_cpu = now
        self.sums = (gpu_sum, gpu_n, cpu_busy, cpu_total)

    def stop(self) -> None:
        """Stop the thread, after one last sample (the time since the previous one counts)."""
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        self.sample()


def mean_gpu(now: tuple, then: tuple) -> float | None:
    n = now[1] - then[1]
    return (now[0] - then[0]) / n if n else None


def mean_cpu(now: tuple, then: tuple) -> float | None:
    total = now[3] - then[3]
    return 100.0 * (now[2] - then[2]) / total if total > 0 else None
