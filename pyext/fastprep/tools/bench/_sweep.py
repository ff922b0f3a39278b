"""Loader settings sweeps: a DataLoader's num_workers x prefetch_factor x pin_memory x
persistent_workers, and a fastprep.Loader's threads x depth.

Each setting is measured as the caching method measures a level (fastprep.tools.measuring._measure): a fresh
loader, warm-up (worker start-up stays out of the timed window), then enough timed steps; each
batch goes to `device`, is expanded there when it is a CompactBatch, and is given to `step_fn`.
Unlike the caching method, the sweep iterates the real dataset epoch after epoch, so epoch
restarts (what persistent_workers saves) are counted as they would be in training.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.data import DataLoader

from fastprep.batch._device_prefetcher import check_device, move_to
from fastprep.tools.measuring._measure import Settings, Source, Stats, measure, synchronize
from fastprep.tools.measuring._run_plan import Plan
from fastprep.tools.measuring._step_input import Epochs, expander


@dataclass
class SweepReport:
    """`rows`: one dict per setting (its keys, samples_per_s, spread); `best`: the fastest row."""
    rows: list[dict]
    best: dict
    keys: tuple[str, ...] = ("num_workers", "prefetch_factor", "pin_memory", "persistent_workers")

    def table(self) -> str:
        head = "".join(f"{k:>19}" for k in self.keys)
        lines = [f"{head}{'samples/s':>11}  95% interval"]
        for r in sorted(self.rows, key=lambda r: -r["samples_per_s"]):
            mark = "  <- best" if r is self.best else ""
            cells = "".join(f"{str(r[k]):>19}" for k in self.keys)
            lines.append(f"{cells}{r['samples_per_s']:>11.1f}  {r['lo']:.4g}-{r['hi']:.4g}{mark}")
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        return {"keys": list(self.keys), "rows": self.rows, "best": self.best}


def _run(configs: list[dict], make: Callable[[dict], Any], batch_size: int, step_fn: Callable | None,
         device: Any, expand: Any, settings: Settings, keys: tuple[str, ...],
         block: Callable[[dict], int], progress: Callable[[str, float], None] | None) -> SweepReport:
    dev = check_device("sweep", device)
    step = step_fn or (lambda b: None)
    on_device = expander("sweep", expand)

    def full_step(b: Any) -> Any:
        return step(on_device(move_to(b, dev, non_blocking=True)))

    sync = synchronize(dev)
    keyed = [(r, c) for r in range(settings.repeats) for c in range(len(configs))]
    plan = Plan([c for _, c in keyed], 16, progress)
    timings: list[list] = [[] for _ in configs]
    for n, (_, c) in enumerate(keyed):
        cfg = configs[c]
        what = f"{c + 1}/{len(configs)} " + " ".join(f"{k}={cfg[k]}" for k in keys)
        plan.begin(n)
        b = block(cfg)
        loader = make(cfg)
        timing = measure(Source(lambda loader=loader: Epochs(lambda: loader), full_step, drain=max(1, b // 2), block=b),
                         settings, sync, lambda done, planned, what=what: plan.tick(what, done, planned))
        plan.end(len(timing.step_times) + timing.warmup_steps)
        timings[c].append(timing)
    rows = []
    for cfg, ts in zip(configs, timings):
        s = Stats.of(ts)
        rows.append({**cfg, "samples_per_s": s.rate * batch_size, "lo": s.lo * batch_size,
                     "hi": s.hi * batch_size, "ci95": s.ci})
    return SweepReport(rows, max(rows, key=lambda r: r["samples_per_s"]), keys)


def _settings(steps: int | None, warmup: int | None, repeats: int, precision: float, max_seconds: float) -> Settings:
    return Settings(steps=steps, repeats=repeats, warmup=warmup, precision=precision, max_seconds=max_seconds)


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask where the OS has one)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def sweep_loader(dataset: Any, batch_size: int, step_fn: Callable[[Any], Any] | None = None,
                 device: Any = "cpu", collate_fn: Callable | None = None,
                 num_workers: Sequence[int] | None = None, prefetch_factor: Sequence[int] = (2, 4),
                 pin_memory: Sequence[bool] | None = None, persistent_workers: Sequence[bool] = (False, True),
                 steps: int | None = None, warmup: int | None = None, repeats: int = 1, expand: Any = True,
                 precision: float = 0.10, max_seconds: float = 5.0,
                 progress: Callable[[str, float], None] | None = None, **loader_kwargs: Any) -> SweepReport:
    """Samples/s through a DataLoader for every num_workers x prefetch_factor x pin_memory x
    persistent_workers setting (the last three only where workers exist; pinning only with CUDA
    by default, since pinning needs an accelerator); `loader_kwargs` go to every DataLoader.

    Example:
        >>> print(sweep_loader(ds, 64, train_step, "cuda", collate_fn=fastprep.compact_collate).table())
    """
    if num_workers is None:
        num_workers = tuple(range(0, usable_cores() + 1))
    if pin_memory is None:
        pin_memory = (False, True) if torch.cuda.is_available() else (False,)
    configs = []
    for w in num_workers:
        for pin in pin_memory:
            if w == 0:
                configs.append({"num_workers": w, "prefetch_factor": None, "pin_memory": pin,
                                "persistent_workers": False})
            else:
                configs += [{"num_workers": w, "prefetch_factor": pf, "pin_memory": pin, "persistent_workers": pers}
                            for pf in prefetch_factor for pers in persistent_workers]

    def make(cfg: dict) -> DataLoader:
        return DataLoader(dataset, batch_size=batch_size, collate_fn=collate_fn, **cfg, **loader_kwargs)

    return _run(configs, make, batch_size, step_fn, device, expand,
                _settings(steps, warmup, repeats, precision, max_seconds),
                ("num_workers", "prefetch_factor", "pin_memory", "persistent_workers"),
                lambda cfg: max(2, 2 * cfg["num_workers"]), progress)


def sweep_threads(dataset: Any, batch_size: int, step_fn: Callable[[Any], Any] | None = None, *,
                  transform: Any = None, device: Any = None, loader_expand: Any = True, expand: Any = True,
                  threads: Sequence[int] | None = None, depth: Sequence[int] = (1, 2, 4),
                  steps: int | None = None, warmup: int | None = None, repeats: int = 1, precision: float = 0.10,
                  max_seconds: float = 5.0, progress: Callable[[str, float], None] | None = None,
                  **loader_kwargs: Any) -> SweepReport:
    """Samples/s through a fastprep.Loader for every threads x depth setting (threads default
    1..cores); `transform`, `device`, `loader_expand` (the Loader's `expand`) and `loader_kwargs`
    go to every Loader; `expand` is what step_input.expander applies before `step_fn`.

    Example:
        >>> print(sweep_threads(ds, 256, train_step, transform=train_tf, device="cuda").table())
    """
    from fastprep.loader import Loader  # noqa: PLC0415 (the Loader pulls in the slots machinery)

    configs = [{"threads": t, "depth": d} for t in (threads or range(1, usable_cores() + 1)) for d in depth]

    def make(cfg: dict) -> Any:
        return Loader(dataset, batch_size, transform=transform, device=device, expand=loader_expand, **cfg,
                      **loader_kwargs)

    return _run(configs, make, batch_size, step_fn, device or "cpu", expand,
                _settings(steps, warmup, repeats, precision, max_seconds), ("threads", "depth"),
                lambda cfg: 2, progress)


def sweep(loader: Any, step_fn: Callable[[Any], Any] | None = None, device: Any = None, **kwargs: Any) -> SweepReport:
    """The sweep for `loader`'s kind, over its dataset and batch size, and its collate_fn (a
    DataLoader) or its transform, device, expand, seed, shuffle and drop_last (a fastprep.Loader);
    `kwargs` go to sweep_loader or sweep_threads (expand: what step_fn receives)."""
    from fastprep.loader import Loader  # noqa: PLC0415

    if isinstance(loader, Loader):
        return sweep_threads(loader.dataset, loader.batch_size, step_fn, transform=loader.transform,
                             device=device or loader.device, loader_expand=loader.expand, seed=loader.seed,
                             shuffle=loader.shuffle, drop_last=loader.drop_last, **kwargs)
    if isinstance(loader, DataLoader) and loader.batch_size is not None:
        return sweep_loader(loader.dataset, loader.batch_size, step_fn, device or "cpu",
                            collate_fn=loader.collate_fn, **kwargs)
    raise TypeError(f"sweep: expected a DataLoader (with batch_size) or a fastprep.Loader, got {type(loader).__name__}")
