"""fastprep.monitor's CPU figures: this training process's own (its threads and its DataLoader's
workers) beside the machine's busy share. A sleeping step against a spinning one, a child process
spinning beside a sleeping step, a DataLoader worker spinning (contrasts far beyond what a loaded
2-core box adds: the tests assert on which side of a wide gap a figure falls, never on a number
near the box's noise), and /proc parsing on a fake /proc."""

import time
import types

import pytest
import torch

import fastprep

# serial: the figures come from timed sleeps and spins, so .ci/test runs this module alone.
pytestmark = [pytest.mark.one_backend, pytest.mark.serial]

QUIET = dict(live=False, report=None, device="cpu")


def spin(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def spinner(seconds):  # a process of its own, spinning (module level: picklable for any start method)
    spin(seconds)


def test_the_cpu_figure_is_this_process_own():
    """A step that sleeps is not CPU busy, a spinning step is; a child process spinning beside a
    sleeping step counts in the machine's figure only; a DataLoader's workers count as ours."""
    def cpu(step, batches=None):
        mon = fastprep.monitor(batches if batches is not None else [torch.zeros(2)] * 12, **QUIET, sample_every=0.05)
        for _batch in mon:
            step()
        return mon.summary()

    asleep = cpu(lambda: time.sleep(0.04))
    spinning = cpu(lambda: spin(0.04))
    assert asleep.cpu_process is not None and asleep.cpu_process < 10, asleep.cpu()
    assert spinning.cpu_process > max(5.0, 2 * asleep.cpu_process), (asleep.cpu(), spinning.cpu())

    import multiprocessing

    child = multiprocessing.get_context("spawn").Process(target=spinner, args=(3.0,), daemon=True)
    child.start()
    try:
        time.sleep(0.5)  # the child is up and spinning
        beside = cpu(lambda: time.sleep(0.04))
    finally:
        child.terminate()
        child.join()
    assert beside.cpu_process < 10 and beside.cpu_util >= 30, beside.cpu()  # the machine's figure has the child
    assert "this process's work" not in str(beside)

    class Spins(torch.utils.data.Dataset):
        def __len__(self):
            return 24

        def __getitem__(self, i):
            spin(0.02)
            return torch.zeros(2)

    workers = cpu(lambda: time.sleep(0.01), torch.utils.data.DataLoader(Spins(), batch_size=1, num_workers=1))
    assert workers.cpu_process > max(5.0, 2 * asleep.cpu_process), workers.cpu()  # the worker's CPU is ours

    class Bar:  # a progress bar as tqdm wraps a loader: a generator hides the DataLoader's iterator
        def __init__(self, iterable):
            self.iterable = iterable

        def __len__(self):
            return len(self.iterable)

        def __iter__(self):
            yield from self.iterable

    wrapped = cpu(lambda: time.sleep(0.01), Bar(torch.utils.data.DataLoader(Spins(), batch_size=1, num_workers=1)))
    assert wrapped.cpu_process > max(5.0, 2 * asleep.cpu_process), wrapped.cpu()  # found as our child process


def test_process_cpu_from_proc_stat(tmp_path):
    from fastprep.monitoring._samplers import ProcessClock

    def stat(pid, utime, stime):
        (tmp_path / str(pid)).mkdir(exist_ok=True)
        (tmp_path / str(pid) / "stat").write_text(f"{pid} (python (x) y) S 1 1 1 0 -1 0 0 0 0 0 {utime} {stime} 5 5 20")

    class Worker:
        pid = 42

        def is_alive(self):
            return True

    clock = ProcessClock(str(tmp_path))
    clock.psutil = None  # read /proc as on a Linux box without psutil
    stat("self", 100, 50)
    stat(42, 30, 0)
    assert clock.cpu_seconds() == 150 / clock.tick  # no iterator yet: this process alone
    clock.source = types.SimpleNamespace(_workers=[Worker()])
    assert clock.cpu_seconds() == 180 / clock.tick
    clock.source = types.SimpleNamespace(it=types.SimpleNamespace(_workers=[Worker()]))  # one level inside
    assert clock.cpu_seconds() == 180 / clock.tick


def test_the_workers_are_the_children_started_since_the_clock(tmp_path):
    """/proc's children lists, at any depth (a worker's own children too), less the children that
    were running when the clock was made; and psutil's children where psutil is there."""
    from fastprep.monitoring._samplers import ProcessClock

    def proc(pid, ticks, children=(), tid=None):
        (tmp_path / str(pid) / "task" / str(tid or pid)).mkdir(parents=True, exist_ok=True)
        (tmp_path / str(pid) / "stat").write_text(f"{pid} (w) S 1 1 1 0 -1 0 0 0 0 0 {ticks} 0 5 5 20")
        (tmp_path / str(pid) / "task" / str(tid or pid) / "children").write_text(" ".join(map(str, children)))

    proc("self", 100, [7], tid=1)  # 7: a helper running before the monitor
    proc(7, 1000)
    clock = ProcessClock(str(tmp_path))
    clock.psutil = None
    clock.bystanders = set(clock.children())
    assert clock.bystanders == {7} and clock.cpu_seconds() == 100 / clock.tick
    proc("self", 100, [7], tid=1)
    proc("self", 100, [8], tid=2)  # a worker started by another thread of ours
    proc(8, 30, [9])
    proc(9, 5)  # the worker's own child
    assert sorted(clock.children()) == [7, 8, 9] and clock.cpu_seconds() == 135 / clock.tick

    class Child:
        def __init__(self, pid):
            self.pid = pid

    class FakeProcess:  # psutil.Process: this process's children, and each process's times
        def __init__(self, pid=None):
            self.pid = pid

        def children(self, recursive=False):
            return [Child(7), Child(8)] + ([Child(9)] if recursive else [])

        def cpu_times(self):
            return types.SimpleNamespace(user={None: 1.0, 7: 100.0, 8: 2.0, 9: 0.5}[self.pid], system=0.0)

    clock.psutil = types.SimpleNamespace(Process=FakeProcess)
    assert clock.cpu_seconds() == 3.5  # 7 is a bystander
