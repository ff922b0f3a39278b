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


def test_process_cpu_from_proc_stat(tmp_path):
    from fastprep.monitoring.samplers import ProcessClock

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
