"""What fastprep.monitor costs a training loop: the same loop over an in-memory list of batches,
plain and wrapped (defaults: live tqdm postfix, CPU sampling thread, summary at the end, written to
a StringIO), with

- a 5 ms step (a busy-wait: the target is < 1% of it), 200 steps a round;
- an empty step, 100,000 steps a round: the per-step cost itself (samples/s = steps/s), which the
  5 ms ratio cannot resolve on a noisy box.

Run: .venv/bin/python -m pytest benchmarks/bench_monitor.py -p no:cacheprovider

The empty loop runs the monitor with warm caches; after a real step its code runs cold. Run this
file as a script for that cost: the loop's own CPU time outside 1,000 steps of 5 ms of this
thread's CPU, plain and monitored, interleaved (``.venv/bin/python benchmarks/bench_monitor.py``).
"""

import io
import time

import torch

import fastprep

STEP = 0.005
BATCHES = [torch.zeros(4)] * 200
MANY = [torch.zeros(4)] * 100_000


def busy_step(_batch):
    end = time.perf_counter() + STEP
    while time.perf_counter() < end:
        pass


def loop(batches, step, wrap):
    def run():
        for batch in wrap(batches):
            step(batch)
    return run


def plain(batches):
    return batches


def monitored(batches):
    return fastprep.monitor(batches, device="cpu", stream=io.StringIO())


GROUP_5MS = f"monitor overhead: {len(BATCHES)} steps of {STEP * 1e3:.0f} ms (busy-wait) a round"
GROUP_EMPTY = f"monitor overhead per step: {len(MANY):,} empty steps a round"


def bench_loop(benchmark, group, batches, step, wrap):
    benchmark.group = group
    benchmark.extra_info["samples"] = len(batches)  # printed as steps/s
    benchmark.pedantic(loop(batches, step, wrap), rounds=7, iterations=1, warmup_rounds=1)


def test_plain_loop_5ms_step(benchmark):
    bench_loop(benchmark, GROUP_5MS, BATCHES, busy_step, plain)


def test_fastprep_monitor_5ms_step(benchmark):
    bench_loop(benchmark, GROUP_5MS, BATCHES, busy_step, monitored)


def test_plain_loop_empty_step(benchmark):
    bench_loop(benchmark, GROUP_EMPTY, MANY, lambda b: None, plain)


def test_fastprep_monitor_empty_step(benchmark):
    """(monitored - plain) / steps is the monitor's cost per step."""
    bench_loop(benchmark, GROUP_EMPTY, MANY, lambda b: None, monitored)


def cpu_outside_steps(wrap, steps: int = 1000) -> float:
    """This thread's CPU seconds per step spent outside a step of STEP seconds of its CPU."""
    batches, inside = [torch.zeros(4)] * steps, 0.0
    start = time.thread_time()
    for _batch in wrap(batches):
        t0 = time.thread_time()
        end = t0 + STEP
        while (t := time.thread_time()) < end:
            pass
        inside += t - t0
    return (time.thread_time() - start - inside) / steps


if __name__ == "__main__":
    for _ in range(3):
        p, m = cpu_outside_steps(plain), cpu_outside_steps(monitored)
        print(f"CPU per step outside a {STEP * 1e3:.0f} ms step: plain loop {p * 1e6:.2f} us, monitored "
              f"{m * 1e6:.2f} us: the monitor adds {(m - p) * 1e6:.2f} us = {(m - p) / STEP:.3%} of the step")
