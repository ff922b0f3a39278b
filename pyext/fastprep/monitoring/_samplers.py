"""GPU and host CPU utilisation, sampled by a daemon thread every `every` seconds while a loop runs.

GPU: NVML's utilisation (nvidia-ml-py's `pynvml`): the share of the last sample period (1/6 s to
1 s, by product) in which one or more kernels ran. No NVML, or NVML failing, leaves the GPU
figure None with the reason; it never stops the loop.

CPU, two figures over the cores this process may run on (its affinity mask):

- the machine's busy share (CpuClock), from /proc/stat's per-core lines: every process counts,
  and so does any other load competing for those cores. Without /proc (macOS, Windows) psutil's
  per-core times when psutil is installed, else none;
- this training process's own (ProcessClock): the CPU time of its threads (a fastprep.Loader's
  included) and of the child processes it started while monitored (its DataLoader's workers,
  behind any wrapper), over the wall time: psutil's per-process times when installed, else
  /proc/self/stat and /proc/<child>/stat on Linux, else os.times() (its threads only). A step that
  sleeps adds nothing to it; other processes (children already running when the monitor began
  among them) never do.
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
        self.machine = True  # False: only this process's time is known (the os.times fallback)
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
            self.machine = False

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


def worker_pids(it: Any) -> list[int]:
    """The live worker processes of a loader's iterator: a DataLoader's (its ``_workers``), looked
    for on the iterator and one level inside it (a DevicePrefetcher's iterator holds the loader's).
    Behind a wrapper that hides them (a generator: tqdm's) there is none: ProcessClock counts this
    process's children as well."""
    for obj in [it, *getattr(it, "__dict__", {}).values()]:
        workers = getattr(obj, "_workers", None)
        if isinstance(workers, list):
            return [p.pid for p in workers if getattr(p, "pid", None) and p.is_alive()]
    return []


class ProcessClock:
    """Cumulative (CPU seconds of this process and its loader's workers, wall seconds x cores).

    Args:
        stat_dir: where /proc is (Linux); tests point it elsewhere.

    The workers are this process's child processes, at any depth, started since the clock was made
    (a DataLoader's, behind any wrapper: a tqdm bar, a DevicePrefetcher; those already running when
    the monitor began, another job's helpers, are not the loop's): psutil's ``children`` when
    installed, else /proc's ``task/*/children``; and the workers of `source` (the running pass's
    loader iterator: worker_pids, set by the monitor at each pass), a persistent DataLoader's among
    them.
    """

    def __init__(self, stat_dir: str = "/proc"):
        self.stat_dir, self.source = stat_dir, None
        affinity = getattr(os, "sched_getaffinity", None)
        self.cores = len(affinity(0)) if affinity else os.cpu_count() or 1
        self.tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        try:
            import psutil  # noqa: PLC0415 (optional)
        except ImportError:
            psutil = None
        self.psutil = psutil
        if psutil is not None:
            self.what = f"this process and its DataLoader workers, of {self.cores} cores (psutil)"
        elif self._stat("self") is not None:
            self.what = f"this process and its DataLoader workers, of {self.cores} cores (/proc)"
        else:
            self.what = f"this process's threads, of {self.cores} cores (os.times)"
        self.bystanders = set(self.children())  # running before the loop: not its workers

    def _stat(self, pid: Any) -> float | None:
        """utime + stime of /proc/<pid>/stat in seconds (None: unreadable, or the process is gone)."""
        try:
            with open(os.path.join(self.stat_dir, str(pid), "stat")) as f:
                text = f.read()
            fields = text[text.rindex(")") + 2:].split()  # after the command name, which may hold spaces
            return (int(fields[11]) + int(fields[12])) / self.tick
        except (OSError, ValueError, IndexError):
            return None

    def children(self) -> list[int]:
        """This process's child processes at any depth (empty where neither psutil nor /proc's
        children lists are there)."""
        if self.psutil is not None:
            try:
                return [c.pid for c in self.psutil.Process().children(recursive=True)]
            except Exception:  # psutil.NoSuchProcess / AccessDenied while walking: none this time
                return []
        found: list[int] = []
        todo = ["self"]
        while todo and len(found) < 4096:
            parent = todo.pop()
            try:
                tasks = os.listdir(os.path.join(self.stat_dir, parent, "task"))
            except OSError:  # gone, or no /proc
                continue
            for tid in tasks:
                try:
                    with open(os.path.join(self.stat_dir, parent, "task", tid, "children")) as f:
                        pids = [int(x) for x in f.read().split()]
                except (OSError, ValueError):  # a thread that ended, or a kernel without the lists
                    continue
                new = [p for p in pids if p not in found]
                found += new
                todo += [str(p) for p in new]
        return found

    def _workers(self) -> list[int]:
        pids = [p for p in self.children() if p not in self.bystanders]
        return list(dict.fromkeys(pids + (worker_pids(self.source) if self.source is not None else [])))

    def cpu_seconds(self) -> float:
        pids = self._workers()
        if self.psutil is not None:
            total = 0.0
            for pid in [None, *pids]:
                try:
                    t = self.psutil.Process(pid).cpu_times()
                    total += t.user + t.system
                except Exception:  # a worker that just exited (psutil.NoSuchProcess, AccessDenied)
                    pass
            return total
        own = self._stat("self")
        if own is None:
            t = os.times()
            return t.user + t.system
        return own + sum(x for x in map(self._stat, pids) if x is not None)

    def read(self) -> tuple[float, float]:
        return self.cpu_seconds(), time.perf_counter() * self.cores


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
        cpu: a CpuClock (the machine's busy share), or None.
        every: seconds between samples.
        process: a ProcessClock (this process's own share), or None.
    """

    def __init__(self, gpu: GpuProbe | None, cpu: CpuClock | None, every: float, process: ProcessClock | None = None):
        self.gpu, self.cpu, self.every, self.process = gpu, cpu, every, process
        # (gpu percent sum, gpu samples, machine busy, machine total, process busy, process total),
        # replaced whole so a reader on another thread never sees half an update.
        self.sums = (0.0, 0, 0.0, 0.0, 0.0, 0.0)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_cpu: tuple[float, float] | None = None
        self._last_process: tuple[float, float] | None = None

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._last_cpu = self.cpu.read() if self.cpu is not None and self.cpu.machine else None
        self._last_process = self.process.read() if self.process is not None else None
        self._thread = threading.Thread(target=self._run, name="fastprep-monitor-sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.sample()

    def sample(self) -> None:
        gpu_sum, gpu_n, cpu_busy, cpu_total, own_busy, own_total = self.sums
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
        if self.process is not None and self._last_process is not None:
            now = self.process.read()
            busy, total = now[0] - self._last_process[0], now[1] - self._last_process[1]
            if total > 0:
                own_busy, own_total = own_busy + max(busy, 0.0), own_total + total
            self._last_process = now
        self.sums = (gpu_sum, gpu_n, cpu_busy, cpu_total, own_busy, own_total)

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
    """The machine's busy share over the span, in percent (None: not sampled)."""
    total = now[3] - then[3]
    return 100.0 * (now[2] - then[2]) / total if total > 0 else None


def mean_process(now: tuple, then: tuple) -> float | None:
    """This process's (and its workers') share of the cores over the span, in percent."""
    total = now[5] - then[5]
    return 100.0 * (now[4] - then[4]) / total if total > 0 else None
