"""Where fastprep.Loader's time per sample goes around its batch op (issue 32 item 3), in thread CPU
time (robust on a shared machine): ``python -m fastprep.tools.profile_loader [batch_size]``.

One Loader chunk (the seed workload: RandomCrop -> RandomDilatedMask -> RGBToYCbCr over the bench's
1024^2 numpy sources) is run in this thread, as a worker runs it, with its stages timed: with the op
skipped (the Python alone, caches warm), then with the op, beside the same op called by hand with
the same draws (the plan's own runs, replayed into a batch-sized output)."""

from __future__ import annotations

import contextlib
import importlib
import sys
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import torch

STAGES = (("fastprep.loader.apply", None, "item_seeds", "item_seeds"),
          ("fastprep.loader.apply", None, "seeded_draws", "seeded_draws"),
          ("fastprep.loader.apply", "ChunkRunner", "_load_all", "loading the items under their streams"),
          ("fastprep.transforms.group", "FusedGroup", "batch", "window fold (FusedGroup.batch)"),
          ("fastprep.loader.apply", "ChunkRunner", "_write_run", "the op's call (its work skipped)"),
          ("fastprep.slots", "BatchJob", "write_rest", "writing the labels"),
          ("fastprep.loader.apply", "ChunkRunner", "__call__", "the chunk, in all"),
          ("fastprep.slots", "BatchJob", "batch", "hand-off: BatchJob.batch (consumer's thread)"))


@contextlib.contextmanager
def _timed(spent: Counter) -> Iterator[None]:
    """Each stage's function wrapped to add its thread CPU time to `spent`; restored after."""
    saved = []
    for module, cls, name, label in STAGES:
        owner = importlib.import_module(module)
        owner = getattr(owner, cls) if cls else owner
        fn = owner.__dict__[name]

        def wrapped(*args: Any, _fn: Any = fn, _label: str = label, **kwargs: Any) -> Any:
            t0 = time.thread_time()
            try:
                return _fn(*args, **kwargs)
            finally:
                spent[_label] += time.thread_time() - t0
        saved.append((owner, name, fn))
        setattr(owner, name, wrapped)
    try:
        yield
    finally:
        for owner, name, fn in saved:
            setattr(owner, name, fn)


def profile(batch_size: int = 256, batches: int = 20, repeat: int = 7) -> dict[str, float]:
    """us per sample of each stage (best of `repeat` rounds of `batches` chunks), with the op skipped;
    then "op by hand", "op in the Loader" and "chunk with the op" (+ hand-off), with it."""
    import fastprep  # noqa: PLC0415
    from fastprep import slots  # noqa: PLC0415
    from fastprep.loader import apply  # noqa: PLC0415
    from fastprep.tools import bench, pipelines  # noqa: PLC0415

    n = batch_size * 8
    dataset = pipelines.SyntheticImages(n, None, pool=8)
    plan = fastprep.Loader(dataset, batch_size, transform=bench.fused_compose(), seed=0).plan
    runner, ring = apply.ChunkRunner(dataset, plan, 0, 0, False, False), slots.SlotRing(2, batch_size, pin=False)
    fusion, op = plan.fused.fusion, plan.fused.fusion.run
    replay, in_op = [], Counter()

    def chunk(k: int) -> None:
        job = runner.job_type(list(range(k * batch_size % n, k * batch_size % n + batch_size)), ring, None)
        job.add_chunk()
        runner(job, 0, batch_size, lambda: None)
        job.chunk_done()
        job.wait()
        job.batch().release()

    def rounds(fn: Any, spent: Counter) -> dict[str, float]:
        best: dict[str, float] = {}
        for _ in range(repeat):
            spent.clear()
            t0 = time.thread_time()
            for k in range(batches):
                fn(k)
            spent["all"] = time.thread_time() - t0
            for key, s in spent.items():
                best[key] = min(best.get(key, float("inf")), 1e6 * s / (batches * batch_size))
        return best

    def keep(group: Any, run: Any, out: torch.Tensor) -> None:
        t0 = time.thread_time()
        op(group, run, out)
        in_op["op"] += time.thread_time() - t0
        replay[:] = [*replay[-7:], (group, run)]

    out, spent = {}, Counter()
    object.__setattr__(fusion, "run", lambda group, run, rows: None)
    try:
        for k in range(4):
            chunk(k)
        with _timed(spent):
            out.update(rounds(chunk, spent))
        out.pop("all")
        object.__setattr__(fusion, "run", keep)
        for k in range(8):
            chunk(k)
        with_op = rounds(chunk, in_op)
    finally:
        object.__setattr__(fusion, "run", op)
    rows = torch.empty(batch_size, 3, pipelines.CROP, pipelines.CROP, dtype=torch.uint8)
    by_hand = rounds(lambda k: op(*replay[k % len(replay)], rows), Counter())
    out.update({"op by hand (the same draws)": by_hand["all"], "op in the Loader": with_op["op"],
                "chunk with the op, and the hand-off": with_op["all"]})
    return out


if __name__ == "__main__":
    result = profile(int(sys.argv[1]) if len(sys.argv) > 1 else 256)
    for what, us in result.items():
        print(f"{what:<50}{us:7.2f} us/sample")
    hand, loader = result["op by hand (the same draws)"], result["chunk with the op, and the hand-off"]
    print(f"{'the Loader around the op':<50}{loader - hand:7.2f} us/sample: op by hand / Loader {hand / loader:.1%}")
