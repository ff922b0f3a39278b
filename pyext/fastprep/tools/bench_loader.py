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

from fastprep.tools import pipelines

# pipeline -> the Loader's keywords (transform, deterministic): the dataset is SyntheticImages with
# the pipeline's per-sample transform (bench.py's `transforms`), applied by __getitem__.
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


def own_rates(dataset: Any, batch_size: int, threads: list[int], compose: Any, budget: Any) -> dict[int, float]:
    """The fused Loader's samples/s into a Counting consumer, per thread count."""
    from fastprep.tools import feeds  # noqa: PLC0415

    out = {}
    for n in threads:
        batches, skip = feeds.fastprep_loader(dataset, batch_size, n, compose)
        out[n] = feeds.delivered_rate(batches, Counting(), skip, budget)
    return out


def consumer_rate(batch_size: int, repeat: int = 5) -> float:
    """Samples/s the bench's consumer absorbs alone: one batch of crops copied, best of `repeat`."""
    from fastprep.tools import feeds  # noqa: PLC0415

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
         own: dict[int, float] | None = None) -> dict[str, Any]:
    """The issue's figures from this run's rows (numpy sources), each with its aim; `own`: the
    fused Loader's rates into a Counting consumer (no copy)."""
    t1, t2 = _rate(rows, fused_name, "t=1"), _rate(rows, fused_name, "t=2")
    per = {v["name"]: v["us_per_sample"].get("numpy") for v in variants}
    op = next((us for name, us in per.items() if name.startswith("fastprep fused (")), None)
    out: dict[str, Any] = {}
    if t1:
        out["Loader(fused Compose) t=1, share of the op alone"] = (t1 / kernel_rate, ">= 85%")
    if t1 and t2:
        out["Loader(fused Compose) t=2 / t=1"] = (t2 / t1, ">= 1.8x")
    if own and own.get(1):
        out["the same, into a consumer that only counts: t=1 share"] = (own[1] / kernel_rate, ">= 85%")
        if own.get(2):
            out["the same, into a consumer that only counts: t=2 / t=1"] = (own[2] / own[1], ">= 1.8x")
    if op is not None and per.get("fastprep fused Compose") is not None:
        out["fused Compose: us of Python around the op"] = (per["fastprep fused Compose"] - op, "<= 5 us")
    for key, aim in (("dataset Compose", ">= 1.7x"), ("foreign", "not below 1x"), ("foreign deterministic", "")):
        a, b = _rate(rows, NAMES[key], "t=1"), _rate(rows, NAMES[key], "t=2")
        if a and b:
            out[f"{NAMES[key]}: t=2 / t=1"] = (b / a, aim)
    return out


def floors(batch_size: int, seconds: float = 1.0) -> dict[str, float]:
    """Samples/s of the fused batch op (no Python around it): in one thread alone, while a second
    thread copies batches of the same bytes without pause (the bench's consumer), and in two
    threads side by side. What one and two Loader threads can deliver on this machine."""
    srcs = [torch.from_numpy(s) for s in pipelines.SyntheticImages(1, None, pool=8).pool]
    n, crop, room = batch_size, pipelines.CROP, pipelines.SOURCE_SIZE - pipelines.CROP

    def batch() -> tuple:
        out = torch.empty(n, 3, crop, crop, dtype=torch.uint8)
        return ([srcs[i % len(srcs)] for i in range(n)], [(i * 37) % room for i in range(n)],
                [(i * 91) % room for i in range(n)], crop, crop, pipelines.P, list(range(n)), out)

    def op_rate(args: tuple, rates: list[float]) -> None:
        done, t0 = 0, time.perf_counter()
        while done == 0 or time.perf_counter() - t0 < seconds:
            torch.ops.fastprep.crop_mask_ycbcr_batch.default(*args)
            done += n
        rates.append(done / (time.perf_counter() - t0))

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
    return {"alone": alone[0], "while copying": copying[0], "two threads": sum(two), "consumer": consumer_rate(n)}
