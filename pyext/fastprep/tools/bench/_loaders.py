"""`python -m fastprep bench`'s fastprep.Loader rows beyond the fused one, and the figures issue 26
asks of them: the Loader's share of the fused op's rate, what a second thread adds, the Python a
fused Compose puts around the op, a dataset applying fastprep's Compose itself, and the policy
for transforms that are not fastprep's (parallel by default, serialised with deterministic=True).
Floors beside them: the op's rate while another thread copies batches as the consumer does, and
two threads running the op side by side (what the machine's cores and memory give two threads)."""

from __future__ import annotations

import threading
import time
from typing import Any

import torch

import fastprep.tools.bench._pipelines as pipelines

# pipeline -> the Loader's keywords (transform, deterministic): the dataset is SyntheticImages with
# the pipeline's per-sample transform (_compare.py's `transforms`), applied by __getitem__.
LOADER_KWARGS = {
    "fastprep": lambda compose: {"transform": compose},
    "dataset Compose": lambda compose: {"transform": None},  # dataset[i] applies the Compose itself
    "foreign": lambda compose: {"transform": pipelines.usual_transform},
    "foreign deterministic": lambda compose: {"transform": pipelines.usual_transform, "deterministic": True},
}
NAMES = {"dataset Compose": "fastprep.Loader, Compose in dataset[i]",
         "foreign": "fastprep.Loader, foreign transform",
         "foreign deterministic": "fastprep.Loader, foreign, deterministic=True"}


def _rate(rows: list[dict], name: str, setting: str, source: str = "numpy") -> float | None:
    return next((r["samples_per_s"] for r in rows if r["name"] == name and r["setting"] == setting
                 and r["source"] == source), None)


class Counting:
    """A consumer that only counts a batch's samples (and hands it back): the Loader's own rate,
    without the copy the bench's consumer makes."""

    def __call__(self, batch: Any) -> int:
        n = int(batch.data[0].shape[0])
        batch.release()
        return n


class Step(Counting):
    """A consumer whose step takes `seconds` without the CPU (time.sleep: a device's step), then counts."""

    def __init__(self, seconds: float):
        self.seconds = seconds

    def __call__(self, batch: Any) -> int:
        if self.seconds:
            time.sleep(self.seconds)
        return super().__call__(batch)


def own_rates(batch_size: int, threads: list[int], compose: Any, budget: Any, pool: int) -> dict[str, dict[int, float]]:
    """Samples/s into a Counting consumer, per thread count: the fused Loader ("fastprep") and a
    Loader over a dataset applying the Compose itself ("dataset Compose"), numpy sources; the
    fused Loader over epochs of one batch and of LONG_EPOCH batches, the same data and seconds
    each, set_epoch between them, into a consumer whose step takes as long as the batch op's
    ("one-batch epochs", "long epochs"); the batch op it calls, called by hand on one batch
    ("batch op by hand", 1 thread)."""
    import fastprep.tools.bench._feeds as feeds  # noqa: PLC0415

    out: dict[str, dict[int, float]] = {}
    for pipeline in ("fastprep", "dataset Compose"):
        dataset = pipelines.SyntheticImages(batch_size * (budget.max_batches + 16), compose, pool=pool)
        out[pipeline] = {}
        for n in threads:
            batches, skip = feeds.fastprep_loader(dataset, batch_size, n, **LOADER_KWARGS[pipeline](compose))
            out[pipeline][n] = feeds.delivered_rate(batches, Counting(), skip, budget)
    by_hand = batch_op_rate(batch_size, budget.min_seconds)
    out["batch op by hand"] = {1: by_hand}
    out.update(epoch_rates(batch_size, threads, compose, budget.min_seconds, pool, step_s=batch_size / by_hand))
    return out


LONG_EPOCH = 8  # batches in a "long" epoch (issue 32 compared one-batch epochs with 8-batch ones)


def epoch_rates(batch_size: int, threads: list[int], compose: Any, seconds: float, pool: int,
                rounds: int = 2, step_s: float = 0.0) -> dict[str, dict[int, float]]:
    """Samples/s of the fused Loader over epochs of one batch and of LONG_EPOCH batches (the same
    sources), `set_epoch` before each, for `seconds` each after a warm-up epoch, the best of
    `rounds` interleaved runs: what an epoch boundary costs. The consumer counts each batch after
    a step of `step_s` seconds that takes no CPU (a training step on the device): at an epoch's
    end the threads have nothing to do during it unless the next epoch's first batch is made."""
    import fastprep  # noqa: PLC0415

    out: dict[str, dict[int, float]] = {"one-batch epochs": {}, "long epochs": {}}
    for n in threads:
        for _ in range(rounds):
            for name, batches in (("one-batch epochs", 1), ("long epochs", LONG_EPOCH)):
                dataset = pipelines.SyntheticImages(batch_size * batches, None, pool=pool)
                loader = fastprep.Loader(dataset, batch_size, transform=compose, threads=n, seed=0)
                count, done, epoch = Step(step_s), 0, 0
                for batch in loader:  # warm-up: the slots' first touch
                    count(batch)
                t0 = time.perf_counter()
                while done == 0 or time.perf_counter() - t0 < seconds:
                    epoch += 1
                    loader.set_epoch(epoch)
                    done += sum(count(batch) for batch in loader)
                rate = done / (time.perf_counter() - t0)
                out[name][n] = max(rate, out[name].get(n, 0.0))
    return out


def batch_op_rate(batch_size: int, seconds: float) -> float:
    """Samples/s of crop_mask_ycbcr_batch called by hand on one batch of the bench's sources (the
    Loader's op without the Loader), in this thread."""
    return _op_rate(_op_batch(batch_size), seconds)


def _op_batch(n: int) -> tuple:
    srcs = [torch.from_numpy(s) for s in pipelines.SyntheticImages(1, None, pool=8).pool]
    crop, room = pipelines.CROP, pipelines.SOURCE_SIZE - pipelines.CROP
    out = torch.empty(n, 3, crop, crop, dtype=torch.uint8)
    return ([srcs[i % len(srcs)] for i in range(n)], [(i * 37) % room for i in range(n)],
            [(i * 91) % room for i in range(n)], crop, crop, pipelines.P, list(range(n)), out)


def _op_rate(args: tuple, seconds: float) -> float:
    n = len(args[0])
    done, t0 = 0, time.perf_counter()
    while done == 0 or time.perf_counter() - t0 < seconds:
        torch.ops.fastprep.crop_mask_ycbcr_batch.default(*args)
        done += n
    return done / (time.perf_counter() - t0)


def consumer_rate(batch_size: int, repeat: int = 5) -> float:
    """Samples/s the bench's consumer absorbs alone: one batch of crops copied, best of `repeat`."""
    import fastprep.tools.bench._feeds as feeds  # noqa: PLC0415

    batch = torch.ones(batch_size, 3, pipelines.CROP, pipelines.CROP, dtype=torch.uint8)
    consume = feeds.Consumer()
    consume(batch)
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        consume(batch)
        best = min(best, time.perf_counter() - t0)
    return batch_size / best


def aims(rows: list[dict], variants: list[dict], kernel_rate: float, fused_name: str,
         own: dict[str, dict[int, float]] | None = None, by_hand_us: float | None = None) -> dict[str, Any]:
    """The issue's figures from this run's rows (numpy sources), each with its aim; `own`: rates
    into a Counting consumer (no copy), from own_rates; `by_hand_us`: pipelines.fastprep_batch_op_one
    per sample (the fused Compose's work written out by hand)."""
    t1, t2 = _rate(rows, fused_name, "t=1"), _rate(rows, fused_name, "t=2")
    per = {v["name"]: v["us_per_sample"].get("numpy") for v in variants}
    op = next((us for name, us in per.items() if name.startswith("fastprep fused (")), None)
    out: dict[str, Any] = {}
    if t1:
        out["Loader(fused Compose) t=1, share of the op alone"] = (t1 / kernel_rate, ">= 85%")
    if t1 and t2:
        out["Loader(fused Compose) t=2 / t=1"] = (t2 / t1, ">= 1.8x")
    fused, inside = (own or {}).get("fastprep", {}), (own or {}).get("dataset Compose", {})
    if fused.get(1):
        out["the same, into a counting consumer: t=1 share"] = (fused[1] / kernel_rate, ">= 85%")
        by_hand = (own or {}).get("batch op by hand", {}).get(1)
        if by_hand:
            out["  t=1, counting: share of the batch op called by hand"] = (fused[1] / by_hand, ">= 90%")
        if fused.get(2):
            out["the same, into a counting consumer: t=2 / t=1"] = (fused[2] / fused[1], ">= 1.8x")
    one, long = (own or {}).get("one-batch epochs", {}), (own or {}).get("long epochs", {})
    for n in sorted(set(one) & set(long)):
        out[f"one-batch epochs: share of {LONG_EPOCH}-batch epochs' rate, t={n}"] = (one[n] / long[n], ">= 90%")
    if op is not None and per.get("fastprep fused Compose") is not None:
        out["fused Compose: us of Python around the op"] = (per["fastprep fused Compose"] - op, "<= 5 us")
    if op is not None and by_hand_us is not None:
        out["  floor: the same work written out by hand: us over the op"] = (by_hand_us - op, "")
    for key, aim in (("dataset Compose", ">= 1.7x"), ("foreign", "not below 1x"), ("foreign deterministic", "")):
        a, b = _rate(rows, NAMES[key], "t=1"), _rate(rows, NAMES[key], "t=2")
        if a and b:
            out[f"{NAMES[key]}: t=2 / t=1"] = (b / a, aim)
        if key == "dataset Compose" and inside.get(1) and inside.get(2):
            out["Compose in dataset[i], counting consumer: t=2 / t=1"] = (inside[2] / inside[1], aim)
    return out


def floors(batch_size: int, seconds: float = 1.0) -> dict[str, float]:
    """Samples/s of the fused batch op (no Python around it): in one thread alone, while a second
    thread copies batches of the same bytes without pause (the bench's consumer), and in two
    threads side by side; the consumer alone; the per-sample op called from Python (a sample a
    call, as a dataset's own transform runs) in one and two threads. What Loader threads can
    deliver on this machine."""
    srcs = [torch.from_numpy(s) for s in pipelines.SyntheticImages(1, None, pool=8).pool]
    n = batch_size

    def batch() -> tuple:
        return _op_batch(n)

    def op_rate(args: tuple, rates: list[float]) -> None:
        rates.append(_op_rate(args, seconds))

    def side_by_side(*targets: tuple) -> None:
        threads = [threading.Thread(target=fn, args=args, daemon=True) for fn, args in targets]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    mine, other = batch(), batch()
    alone, copying, two = [], [], []
    op_rate(mine, alone)
    stop = threading.Event()
    src, dst = torch.ones_like(mine[-1]), torch.empty_like(mine[-1])

    def copy() -> None:
        while not stop.is_set():
            dst.copy_(src)

    copier = threading.Thread(target=copy, daemon=True)
    copier.start()
    try:
        op_rate(mine, copying)
    finally:
        stop.set()
        copier.join()
    side_by_side((op_rate, (mine, two)), (op_rate, (other, two)))

    def per_sample(rates: list[float]) -> None:  # the per-sample op, one Python call a sample
        done, t0 = 0, time.perf_counter()
        while done == 0 or time.perf_counter() - t0 < seconds:
            pipelines.fastprep_transform(srcs[done % len(srcs)].numpy())
            done += 1
        rates.append(done / (time.perf_counter() - t0))

    one, pair = [], []
    per_sample(one)
    side_by_side((per_sample, (pair,)), (per_sample, (pair,)))
    return {"alone": alone[0], "while copying": copying[0], "two threads": sum(two), "consumer": consumer_rate(n),
            "per-sample op": one[0], "per-sample op, two threads": sum(pair)}
