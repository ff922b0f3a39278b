"""fastprep.Loader's settings: every argument but its live objects (dataset, transform, sampler),
checked and resolved once, in one frozen object that the Loader hands down to the parts of a
pass (loader/_iteration.py, _ahead.py, _device_split.py) instead of itself.

Resolved means as the Loader runs it: `shuffle` True over a remote pack larger than its cache is
"shards", `shard_window` is the order's window (1 unless shuffle="shards"), `device` is
`decode_on`'s when that is given, `rank` / `world_size` are the ranks' (loader/_ranks.py), `seed`
is drawn when None, `threads` is the CPUs this process may use when None, `streams` the device
stage's default. What changes while a Loader runs (its epoch, resume position, counters, the
spare ring) is on the Loader, not here; ``dataclasses.replace`` makes a changed copy (the Loader's
``seed`` setter does).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import numpy as np
import torch

import fastprep.loader._ranks as ranks
from fastprep.batch._device_prefetcher import check_device
from fastprep.core._args import check_bool, check_int
from fastprep.core._bad_samples import check_on_error
from fastprep.core._rng import draw_seed, seed_argument
from fastprep.core._roles import check_fields
from fastprep.loader._device_split import check_decode_on, check_splittable, check_streams
from fastprep.loader._order import is_iterable
from fastprep.loader._shard_order import check_shuffle, shard_aware_window, window_of
from fastprep.transforms import FusionPlan

# The Loader's arguments that are live objects, kept on the Loader (not settings): read or changed
# while it runs (a dataset's shards, a transform's parameters, a sampler's epoch).
LIVE = ("dataset", "transform", "sampler")


def plan_of(transform: Any) -> FusionPlan | None:
    """How the threads run `transform` (a Compose's own plan, as it is now); None without one."""
    return None if transform is None else FusionPlan.of(transform)


@dataclasses.dataclass(frozen=True)
class LoaderSettings:
    """A Loader's arguments as it runs them (see the module); made by :meth:`build`."""

    batch_size: int
    shuffle: bool | str
    drop_last: bool
    threads: int
    device: torch.device | None
    depth: int
    expand: Any
    seed: int
    fields: Mapping[Any, str]  # read-only (a MappingProxyType): frozen all the way down
    deterministic: bool
    decode_on: torch.device | None
    prestart: bool
    shard_window: int
    rank: int
    world_size: int
    on_error: str
    streams: int | None
    jpeg_decoder: str

    @classmethod
    def build(cls, dataset: Any, transform: Any, sampler: Any, *, batch_size: int, shuffle: Any = False,
              drop_last: Any = False, threads: Any = None, device: Any = None, depth: Any = 2, expand: Any = False,
              seed: Any = None, fields: Any = None, deterministic: Any = False, decode_on: Any = None,
              prestart: Any = True, shard_window: Any = None, rank: Any = None, world_size: Any = None,
              on_error: Any = "raise", streams: Any = None, jpeg_decoder: Any = "auto") -> tuple[LoaderSettings, Any]:
        """(the settings of a Loader over `dataset` with these arguments, the decode split's JPEG
        decoder chain or None); a ValueError naming the argument and its value for a bad one."""
        batch_size = check_int("Loader", "batch_size", batch_size, 1)
        if transform is not None and not callable(transform):
            raise ValueError(f"Loader: expected transform to be callable or None, got {transform!r}")
        resolved = check_shuffle(shuffle, dataset)
        if shard_window is not None and resolved != "shards":
            raise ValueError(f"Loader: shard_window={shard_window!r} is for shuffle='shards', got shuffle={shuffle!r}")
        if resolved and sampler is not None:
            raise ValueError("Loader: shuffle=True and a sampler are exclusive (the sampler sets the order)")
        # shuffle=True over a remote pack larger than its cache: the shard-aware order (a sample-level
        # shuffle would fetch the pack many times an epoch); said at WARNING, refused by shuffle="global"
        auto_window = None if is_iterable(dataset) else shard_aware_window(shuffle, dataset)
        if auto_window is not None:
            resolved = "shards"
        drop_last = check_bool("Loader", "drop_last", drop_last)
        fields = MappingProxyType(check_fields("Loader", fields))
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        threads = check_int("Loader", "threads", cores if threads is None else threads, 1)
        depth = check_int("Loader", "depth", depth, 1)
        device = None if device is None else check_device("Loader", device)
        if not (isinstance(expand, (bool, np.bool_)) or callable(expand)):
            raise ValueError(f"Loader: expected expand to be a bool or a callable, got {expand!r}")
        expand = bool(expand) if isinstance(expand, np.bool_) else expand
        seed = draw_seed() if seed is None else seed_argument("Loader", "seed", seed)
        deterministic = check_bool("Loader", "deterministic", deterministic)
        on_error = check_on_error("Loader", on_error)
        prestart = check_bool("Loader", "prestart", prestart)
        decoders = None
        if decode_on is not None:  # the GPU decode split (loader/_device_split.py): batches are made there
            split, decoders = check_decode_on(decode_on, device, jpeg_decoder)
            check_splittable(plan_of(transform), decode_on)
            decode_on = device = split
        elif jpeg_decoder != "auto":
            raise ValueError(f"Loader: jpeg_decoder={jpeg_decoder!r} chooses the GPU decode split's JPEG decoder; "
                             f"pass decode_on= too (without it the threads decode with libjpeg-turbo)")
        streams = check_streams(streams, device, decode_on)
        if sampler is not None or is_iterable(dataset):
            if world_size is not None or rank is not None:
                raise ValueError(f"Loader: rank={rank!r}, world_size={world_size!r} split a map-style dataset's "
                                 f"order; a sampler or an iterable dataset splits by itself")
            rank, world_size = 0, 1
        else:
            rank, world_size = ranks.resolve(rank, world_size)
        window = auto_window or (window_of(shard_window, dataset) if resolved == "shards" else 1)
        return cls(batch_size, resolved, drop_last, threads, device, depth, expand, seed, fields, deterministic,
                   decode_on, prestart, window, rank, world_size, on_error, streams, jpeg_decoder), decoders


def _view(name: str) -> property:
    return property(lambda self: getattr(self.settings, name),
                    doc=f"``settings.{name}`` (read-only: the settings are fixed when the Loader is made).")


class SettingsViews:
    """The Loader's settings as read-only attributes (``loader.batch_size``); ``seed`` may be set
    (a changed copy of the settings: the next pass uses it)."""

    settings: LoaderSettings
    batch_size, shuffle, drop_last = _view("batch_size"), _view("shuffle"), _view("drop_last")
    threads, device, depth, expand = _view("threads"), _view("device"), _view("depth"), _view("expand")
    fields, deterministic, decode_on = _view("fields"), _view("deterministic"), _view("decode_on")
    prestart, shard_window, rank = _view("prestart"), _view("shard_window"), _view("rank")
    world_size, on_error, streams = _view("world_size"), _view("on_error"), _view("streams")
    jpeg_decoder = _view("jpeg_decoder")

    @property
    def seed(self) -> int:
        """The base seed (``settings.seed``); setting it changes the next pass's."""
        return self.settings.seed

    @seed.setter
    def seed(self, seed: int) -> None:
        self.settings = dataclasses.replace(self.settings, seed=seed_argument("Loader", "seed", seed))
