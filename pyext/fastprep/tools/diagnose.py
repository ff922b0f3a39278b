"""Where does a pipeline starve? The caching method, and a DataLoader settings sweep.

find_bottleneck() measures training steps/s with progressively less cached:
  1. one batch cached on the device: the step alone, the ceiling;
  2. one batch cached on the host, copied to the device every step;
  3. the dataset returns one fully processed sample every time (real workers, collate, copy);
  4. the dataset caches the raw sample and runs the transforms every time;
  5. nothing cached: the real pipeline.
The level where throughput drops names the stage that starves the device.
"""

from __future__ import annotations

import copy
import inspect
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset

from fastprep.prefetch import move_to

LEVELS = ("device-cached batch", "host-cached batch", "cached processed sample",
          "cached raw sample", "nothing cached")
# The stage that the drop from level i-1 to level i is blamed on.
STAGES = {1: "host->device copy", 2: "collate/IPC", 3: "transforms", 4: "raw loading"}
ADVICE = {
    "model-bound": "The input pipeline keeps up: speed up the model step itself (mixed precision, "
                   "torch.compile, larger batches) before touching data loading.",
    "host->device copy": "Ship less and overlap the copy: CompactCollate (uint8 images, packed masks, "
                         "small labels), pin_memory=True, fastprep.DevicePrefetcher, decode on the device.",
    "collate/IPC": "Batches cost too much to assemble or move between processes: CompactCollate "
                   "(writes samples straight into shared memory, 4x fewer bytes than float32), more "
                   "num_workers, persistent_workers=True, a larger prefetch_factor.",
    "transforms": "The per-sample transforms are the bottleneck: fastprep ops or the fused "
                  "crop_mask_ycbcr, more num_workers, or move the work to the GPU (ship uint8 + "
                  "packed masks and decode there).",
    "raw loading": "Reading or decoding raw samples is the bottleneck: faster storage or formats, "
                   "caching decoded data, more num_workers, larger prefetch_factor.",
}


@dataclass
class Level:
    name: str
    steps_per_s: float | None
    note: str = ""


@dataclass
class BottleneckReport:
    levels: list[Level]
    verdict: str
    advice: str
    drops: dict[str, float] = field(default_factory=dict)

    def table(self) -> str:
        ceiling = self.levels[0].steps_per_s or float("nan")
        rows = [f"{'level':<28}{'steps/s':>10}{'of ceiling':>12}  note"]
        for i, lv in enumerate(self.levels, 1):
            rate = f"{lv.steps_per_s:10.2f}" if lv.steps_per_s else f"{'n/a':>10}"
            frac = f"{lv.steps_per_s / ceiling:11.0%}" if lv.steps_per_s else f"{'':>11}"
            rows.append(f"{i}. {lv.name:<25}{rate} {frac}  {lv.note}")
        rows.append(f"verdict: {self.verdict}")
        rows.append(f"next: {self.advice}")
        return "\n".join(rows)

    def as_dict(self) -> dict:
        return {"levels": [lv.__dict__ for lv in self.levels], "verdict": self.verdict,
                "advice": self.advice, "drops": self.drops}


class _Repeat(Dataset):
    """Returns `make()` for every index: a dataset with `length` copies of one sample."""

    def __init__(self, make: Callable[[], Any], length: int):
        self.make, self.length = make, length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, i: int) -> Any:
        return self.make()


class _Constant:
    def __init__(self, value: Any):
        self.value = value

    def __call__(self) -> Any:
        return self.value


class _TransformOf:
    def __init__(self, dataset: Any, raw: Any):
        self.dataset, self.raw = dataset, raw

    def __call__(self) -> Any:
        return apply_transform(self.dataset, self.raw)


def load_raw(dataset: Any, i: int) -> Any:
    """Sample i before its transforms: the dataset's own `load_raw(i)`, or, for torchvision-style
    datasets with a `transform` attribute, the item fetched with that transform switched off."""
    if hasattr(dataset, "load_raw"):
        return dataset.load_raw(i)
    if hasattr(dataset, "transform"):
        bare = copy.copy(dataset)
        bare.transform = None
        return bare[i]
    raise TypeError(f"{type(dataset).__name__} has neither load_raw(i) nor a `transform` attribute")


def apply_transform(dataset: Any, raw: Any) -> Any:
    """The inverse split of load_raw: `apply_transform(raw)`, or `transform` applied to the raw
    item (to its first element when the item is a tuple, as torchvision's (image, target))."""
    if hasattr(dataset, "apply_transform"):
        return dataset.apply_transform(raw)
    if dataset.transform is None:
        return raw
    if isinstance(raw, tuple):
        return (dataset.transform(raw[0]), *raw[1:])
    return dataset.transform(raw)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _rate(batches: Any, step: Callable[[Any], Any], steps: int, warmup: int,
          device: torch.device) -> float:
    """Steps per second from the median step time: robust to a burst of load on a shared machine."""
    it = iter(batches)
    for _ in range(warmup):
        step(next(it))
    _sync(device)
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step(next(it))
        _sync(device)
        times.append(time.perf_counter() - t0)
    times.sort()
    return 1.0 / times[len(times) // 2]


def _forever(loader_factory: Callable[..., Any], **kwargs: Any):
    while True:
        yield from loader_factory(**kwargs)


def find_bottleneck(loader_factory: Callable[..., Any], step_fn: Callable[[Any], Any],
                    device: Any = "cpu", steps: int = 20, warmup: int = 2, threshold: float = 0.8,
                    progress: Callable[[str], None] | None = None) -> BottleneckReport:
    """Run the caching method and name the stage where throughput drops.

    Args:
        loader_factory: returns an iterable of batches (normally a DataLoader); levels 3-4 call it
            as ``loader_factory(dataset=...)`` with a stand-in dataset, so accept that keyword.
            The dataset is taken from the loader's `.dataset`; splitting raw loading from the
            transforms needs `load_raw(i)` + `apply_transform(raw)` or a `transform` attribute.
        step_fn: one training step on a batch already on `device`.
        threshold: a level under threshold x the level before it counts as a drop.
    """
    device = torch.device(device)
    say = progress or (lambda msg: None)
    levels: list[Level] = []
    loader = loader_factory()
    host_batch = next(iter(loader))
    dev_batch = move_to(host_batch, device, non_blocking=False)

    say(f"1/5 {LEVELS[0]}")
    levels.append(Level(LEVELS[0], _rate(iter(lambda: dev_batch, None), step_fn, steps, warmup, device)))
    say(f"2/5 {LEVELS[1]}")
    copy_step = lambda b: step_fn(move_to(b, device, non_blocking=True))  # noqa: E731
    levels.append(Level(LEVELS[1], _rate(iter(lambda: host_batch, None), copy_step, steps, warmup, device)))

    dataset = getattr(loader, "dataset", None)
    takes_dataset = "dataset" in inspect.signature(loader_factory).parameters
    stand_ins: list[tuple[str, Any]] = []
    if dataset is None or not takes_dataset:
        why = "loader_factory takes no `dataset=` keyword" if not takes_dataset else "loader has no .dataset"
        levels += [Level(LEVELS[2], None, why), Level(LEVELS[3], None, why)]
    else:
        stand_ins.append((LEVELS[2], _Repeat(_Constant(dataset[0]), len(dataset))))
        try:
            stand_ins.append((LEVELS[3], _Repeat(_TransformOf(dataset, load_raw(dataset, 0)), len(dataset))))
        except TypeError as exc:
            stand_ins.append((LEVELS[3], f"cannot split raw loading from the transforms: {exc}"))
    for n, (name, ds) in enumerate(stand_ins, 3):
        say(f"{n}/5 {name}")
        if isinstance(ds, str):
            levels.append(Level(name, None, ds))
        else:
            levels.append(Level(name, _rate(_forever(loader_factory, dataset=ds), copy_step, steps,
                                            warmup, device)))
    say(f"5/5 {LEVELS[4]}")
    levels.append(Level(LEVELS[4], _rate(_forever(loader_factory), copy_step, steps, warmup, device)))
    return _verdict(levels, threshold)


def _verdict(levels: list[Level], threshold: float) -> BottleneckReport:
    drops: dict[str, float] = {}
    prev = levels[0].steps_per_s
    span: list[str] = []
    for i in range(1, len(levels)):
        span.append(STAGES[i])
        cur = levels[i].steps_per_s
        if cur is None:
            continue  # unmeasured: the next drop is blamed on every stage it spans
        drops[" + ".join(span)] = cur / prev
        prev, span = cur, []
    final = levels[-1].steps_per_s / levels[0].steps_per_s
    worst = min(drops, key=drops.get) if drops else None
    if final >= threshold or worst is None or drops[worst] >= threshold:
        verdict = "model-bound"
    else:
        verdict = worst
    advice = " ".join(ADVICE[stage] for stage in verdict.split(" + "))
    return BottleneckReport(levels, verdict, advice, drops)


@dataclass
class SweepReport:
    rows: list[dict]
    best: dict

    def table(self) -> str:
        lines = [f"{'num_workers':>11} {'prefetch':>8} {'pin':>5} {'persistent':>10} {'samples/s':>10}"]
        for r in sorted(self.rows, key=lambda r: -r["samples_per_s"]):
            mark = "  <- best" if r is self.best else ""
            lines.append(f"{r['num_workers']:>11} {str(r['prefetch_factor']):>8} {str(r['pin_memory']):>5} "
                         f"{str(r['persistent_workers']):>10} {r['samples_per_s']:>10.1f}{mark}")
        return "\n".join(lines)


def _epochs(loader: Any):
    while True:
        yield from loader


def sweep_loader(dataset: Any, batch_size: int, step_fn: Callable[[Any], Any] | None = None,
                 device: Any = "cpu", collate_fn: Callable | None = None,
                 num_workers: tuple[int, ...] | None = None, prefetch_factor: tuple[int, ...] = (2, 4),
                 pin_memory: tuple[bool, ...] | None = None,
                 persistent_workers: tuple[bool, ...] = (False, True), steps: int = 20,
                 warmup: int = 2, progress: Callable[[str], None] | None = None) -> SweepReport:
    """Samples/s through a DataLoader for every num_workers x prefetch_factor x pin_memory x
    persistent_workers setting (the last three only where workers exist); returns the table and
    the best setting. Each batch is copied to `device` and given to `step_fn` when one is set."""
    import os  # noqa: PLC0415

    device = torch.device(device)
    if num_workers is None:
        num_workers = tuple(range(0, (os.cpu_count() or 1) + 1))
    if pin_memory is None:  # pinning needs an accelerator; asking without one only warns
        pin_memory = (False, True) if torch.cuda.is_available() else (False,)
    step = step_fn or (lambda b: None)
    copy_step = lambda b: step(move_to(b, device, non_blocking=True))  # noqa: E731
    configs = []
    for w in num_workers:
        for pin in pin_memory:
            if w == 0:
                configs.append((w, None, pin, False))
            else:
                configs += [(w, pf, pin, pers) for pf in prefetch_factor for pers in persistent_workers]
    rows = []
    for k, (w, pf, pin, pers) in enumerate(configs, 1):
        if progress:
            progress(f"{k}/{len(configs)} num_workers={w} prefetch_factor={pf} pin_memory={pin} "
                     f"persistent_workers={pers}")
        loader = DataLoader(dataset, batch_size=batch_size, shuffle=False, num_workers=w,
                            prefetch_factor=pf, pin_memory=pin, persistent_workers=pers,
                            collate_fn=collate_fn, drop_last=True)
        rate = _rate(_epochs(loader), copy_step, steps, warmup, device)
        rows.append({"num_workers": w, "prefetch_factor": pf, "pin_memory": pin,
                     "persistent_workers": pers, "samples_per_s": rate * batch_size})
    return SweepReport(rows, max(rows, key=lambda r: r["samples_per_s"]))
