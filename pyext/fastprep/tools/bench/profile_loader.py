"""Where fastprep.Loader's time per sample goes around its batch op (issue 32 item 3), in thread CPU
time (robust on a shared machine): ``python -m fastprep.tools.bench.profile_loader [batch_size]``;
``... profile_loader --boundary [threads]``: the epoch boundary of one-batch epochs, by part (wall).

One Loader chunk (the seed workload: RandomCrop -> RandomDilatedMask -> RGBToYCbCr over the bench's
1024^2 numpy sources) is run in this thread, as a worker runs it, with its stages timed through the Loader's hook points
(loader/_hooks.py: nothing of the Loader is patched): with the op
skipped (the Python alone, caches warm), then with the op, beside the same op called by hand with
the same draws (the plan's own runs, replayed into a batch-sized output); the stages are timed in
both rounds: beside the op, the Python finds its data out of cache."""

from __future__ import annotations

import sys
import time
from collections import Counter
from typing import Any

import torch

# (the Loader's hook point, loader/_hooks.py; its label here)
STAGES = (("seeds", "item_seeds"),
          ("draws", "seeded_draws"),
          ("load", "loading the items under their streams"),
          ("fold", "window fold (ChunkRuns)"),
          ("write", "the op's call (ChunkRunner._write_run)"),
          ("labels", "writing the labels"),
          ("chunk", "the chunk, in all"),
          ("hand_off", "hand-off: BatchJob.batch (consumer's thread)"))


def _timer(spent: Counter, labels: dict[str, str]) -> Any:
    """A hook adding each stage's thread CPU time to `spent` under its label."""
    def timed(stage: str, call: Any, *args: Any) -> Any:
        t0 = time.thread_time()
        try:
            return call(*args)
        finally:
            spent[labels[stage]] += time.thread_time() - t0
    return timed


def profile(batch_size: int = 256, batches: int = 20, repeat: int = 7) -> dict[str, float]:
    """us per sample of each stage (best of `repeat` rounds of `batches` chunks) and of a whole round,
    with the op skipped (the Python alone, caches warm); the same, f"{stage}, beside the op", with
    it (caches emptied by the op's 50 MB a batch); "op by hand", "op in the Loader"."""
    import fastprep  # noqa: PLC0415
    import fastprep.batch._slots as slots  # noqa: PLC0415
    import fastprep.loader._apply as apply  # noqa: PLC0415
    import fastprep.tools.bench._pipelines as pipelines  # noqa: PLC0415
    from fastprep import transforms as T  # noqa: PLC0415
    from fastprep.loader._hooks import LoaderHooks  # noqa: PLC0415

    n = batch_size * 8
    dataset = pipelines.SyntheticImages(n, None, pool=8)
    plan = fastprep.Loader(dataset, batch_size, transform=T.seed_workload(layout="HWC"), seed=0).plan
    hooks = LoaderHooks()
    runner = apply.ChunkRunner(dataset, plan, 0, 0, False, False, hooks=hooks)
    ring, op = slots.SlotRing(2, batch_size, pin=False), plan.fused.fusion.run
    replay, spent = [], Counter()

    def chunk(k: int) -> None:
        job = runner.job_type(list(range(k * batch_size % n, k * batch_size % n + batch_size)), ring, None)
        job.add_chunk()
        runner(job, 0, batch_size, lambda: None)
        job.chunk_done()
        job.wait()
        hooks.run("hand_off", job.batch).release()

    def rounds(fn: Any) -> dict[str, float]:
        best: dict[str, float] = {}
        for _ in range(repeat):
            spent.clear()
            t0 = time.thread_time()
            for k in range(batches):
                fn(k)
            spent[ROUND] = time.thread_time() - t0
            for key, s in spent.items():
                best[key] = min(best.get(key, float("inf")), 1e6 * s / (batches * batch_size))
        return best

    def keep(stage: str, call: Any, group: Any, run: Any, out: torch.Tensor) -> None:
        t0 = time.thread_time()
        call(group, run, out)
        spent[IN_LOADER] += time.thread_time() - t0
        replay[:] = [*replay[-7:], (group, run)]

    def skip(stage: str, call: Any, group: Any, run: Any, out: torch.Tensor) -> None:
        """The op left out: the Python around it alone."""

    result, timed = {}, _timer(spent, dict(STAGES))
    for run, suffix in ((skip, ""), (keep, BESIDE)):
        hooks.clear()
        hooks.add("op", run)
        for k in range(8):
            chunk(k)
        for stage, _ in STAGES:
            hooks.add(stage, timed)
        result.update({f"{key}{suffix if key != IN_LOADER else ''}": us for key, us in rounds(chunk).items()})
    rows = torch.empty(batch_size, 3, pipelines.CROP, pipelines.CROP, dtype=torch.uint8)
    result[BY_HAND] = rounds(lambda k: op(*replay[k % len(replay)], rows))[ROUND]
    return result


ROUND, BESIDE = "a round in all (job, chunk, wait, hand-off)", ", beside the op"
BY_HAND, IN_LOADER = "op by hand (the same draws)", "op in the Loader"
BOUNDARY = "pass end -> next pass's first batch in hand"
BOUNDARY_PARTS = (("pool_start", "threads started (ThreadPool)"),
                  ("pool_stop", "threads stopped (ThreadPool.shutdown)"),
                  ("take_ring", "ring and batch made ahead taken (ahead.take)"),
                  ("hand_off", "hand-off: BatchJob.batch"))


def boundary(threads: int = 1, epochs: int = 40, batch_size: int = 256) -> dict[str, tuple[float, float]]:
    """The epoch boundary of one-batch epochs (the seed workload's fused Loader, `set_epoch` before
    each pass, a consumer that only counts): (median, mean) ms per epoch of the consumer's wall
    from a pass's end (its batch made ahead complete, ahead.keep) to the next pass's first batch in
    hand, while the threads have nothing to do, and of its parts (BOUNDARY_PARTS; the hand-off's
    own figure also counts passes' batches made ahead)."""
    import statistics  # noqa: PLC0415

    import fastprep  # noqa: PLC0415
    import fastprep.tools.bench._pipelines as pipelines  # noqa: PLC0415
    from fastprep import transforms as T  # noqa: PLC0415

    spent: dict[str, list[float]] = {label: [] for _, label in BOUNDARY_PARTS}
    labels, ended = dict(BOUNDARY_PARTS), []

    def timed(stage: str, call: Any, *args: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return call(*args)
        finally:
            spent[labels[stage]].append(time.perf_counter() - t0)

    def kept(stage: str, call: Any, *args: Any) -> None:
        call(*args)
        ended.append(time.perf_counter())

    dataset = pipelines.SyntheticImages(batch_size, None, pool=8)
    loader = fastprep.Loader(dataset, batch_size, transform=T.seed_workload(layout="HWC"), threads=threads, seed=0)
    for stage, _ in BOUNDARY_PARTS:
        loader.hooks.add(stage, timed)
    loader.hooks.add("keep_ring", kept)
    for batch in loader:  # warm-up: the slots' first touch
        batch.release()
    for values in spent.values():
        values.clear()
    gaps = []
    for epoch in range(1, epochs + 1):
        loader.set_epoch(epoch)
        it = iter(loader)
        next(it)
        if ended:
            gaps.append(time.perf_counter() - ended[-1])
        for _ in it:
            pass
    return {label: (1e3 * statistics.median(v), 1e3 * statistics.mean(v))
            for label, v in ((BOUNDARY, gaps), *spent.items()) if v}


def _print_boundary(threads: int) -> None:
    print(f"one-batch epochs, threads={threads}: ms an epoch {'median':>8}{'mean':>8}")
    for label, (median, mean) in boundary(threads).items():
        print(f"{label:<50}{median:8.2f}{mean:8.2f}")


if __name__ == "__main__" and sys.argv[1:2] == ["--boundary"]:
    _print_boundary(int(sys.argv[2]) if len(sys.argv) > 2 else 1)
elif __name__ == "__main__":
    result = profile(int(sys.argv[1]) if len(sys.argv) > 1 else 256)
    print(f"{'us per sample':<50}{'op skipped':>12}{'beside the op':>15}  (skipped: the op's work, not its call)")
    for *_, label in (*STAGES, (ROUND,)):
        print(f"{label:<50}{result[label]:12.2f}{result[label + BESIDE]:15.2f}")
    hand, loader = result[BY_HAND], result[ROUND + BESIDE]
    print(f"{BY_HAND:<50}{hand:27.2f}\n{IN_LOADER:<50}{result[IN_LOADER]:27.2f}")
    print(f"the Loader around the op (round - op by hand): {loader - hand:.2f} us/sample; op by hand / round "
          f"{hand / loader:.1%}")
