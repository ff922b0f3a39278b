"""The shard-aware shuffle of fastprep.Loader (``shuffle="shards"``): an epoch's order for data
larger than the local cache.

The shards are shuffled, dealt to the ranks (each rank's shards hold about as many samples as the
others'), and each rank's shards are taken `window` at a time: the samples of those `window` shards
are shuffled together, then the next `window` shards', and so on (the quasi-random order of FFCV,
litdata's shard-block shuffle). A rank therefore reads `window` shards at a time, its own; the
ranks' streams are interleaved into the epoch's global order so that the strided split of
loader/_ranks.py hands each rank back its own stream (position ``p * world + r`` is rank r's p-th
sample, while every rank's stream lasts). Deterministic from (seed, epoch, world); every index once.

A dataset takes part through a small protocol: ``item_shards``, the shard of each item (an int
array, as long as the dataset); optionally ``cache_limit`` (bytes) and ``shard_sizes`` (bytes of
each shard), against which the window is checked: half the cache must hold it (the other half:
downloads ahead). The window is never sized from the cache: a cache is a node's, and ranks whose
windows differ make different global orders, so their strided split loses and repeats samples.
"""

from __future__ import annotations

import logging
import zlib
from typing import Any

import numpy as np

from fastprep.core._args import check_int
from fastprep.core._rng import item_seed

DEFAULT_WINDOW = 8  # shards shuffled together when neither the Loader nor the dataset says


def check_shuffle(shuffle: Any, dataset: Any) -> bool | str:
    """shuffle as the Loader keeps it: False, True (also for "global": a sample-level shuffle the
    user asked for by name, never made shard-aware) or "shards" (needs ``item_shards``)."""
    if isinstance(shuffle, (bool, np.bool_)):
        return bool(shuffle)
    if isinstance(shuffle, str) and shuffle == "global":
        return True
    if not isinstance(shuffle, str) or shuffle != "shards":
        raise ValueError(f"Loader: expected shuffle to be a bool, 'shards' (the shard-aware order) or 'global' (a "
                         f"sample-level shuffle even over a remote pack larger than its cache), got {shuffle!r}")
    if getattr(dataset, "item_shards", None) is None:
        raise ValueError(f"Loader: shuffle='shards' needs a dataset that says which shard each item is in "
                         f"(an item_shards array, as PackedDataset has); {type(dataset).__name__} has none")
    return "shards"


def refetch_factor(dataset: Any) -> float:
    """About how many times a sample-level shuffle fetches a remote pack per epoch: the first use
    of each shard fetches it; each later sample of it finds it cached with the chance that the
    cache holds it (cache_limit / pack bytes, an LRU cache under uniform random reads), else
    fetches the whole shard again. 1.0 when the pack fits the cache (or says no cache)."""
    limit, sizes = getattr(dataset, "cache_limit", None), getattr(dataset, "shard_sizes", None)
    if limit is None or not sizes or sum(sizes) <= int(limit):
        return 1.0
    per_shard = len(dataset) / len(sizes)
    return 1.0 + max(0.0, per_shard - 1.0) * (1.0 - int(limit) / sum(sizes))


def shard_aware_window(shuffle: Any, dataset: Any) -> int | None:
    """The shard window to use instead of ``shuffle=True`` over a remote pack larger than its
    cache_limit (a sample-level shuffle would fetch it about :func:`refetch_factor` times an epoch),
    said once at WARNING on the "fastprep" logger with the bytes it saves; None where True stays
    (a local pack, one that fits, shuffle="global": then the estimate is logged at INFO). The
    window: 8, or as many of the largest shards as half the cache holds (at least 1): sized from
    the dataset's cache_limit argument, so ranks that pass the same one make the same order."""
    if shuffle is not True and not isinstance(shuffle, np.bool_) and shuffle != "global":
        return None
    if not bool(shuffle) or getattr(dataset, "item_shards", None) is None or not getattr(dataset, "remote", False):
        return None
    factor, sizes = refetch_factor(dataset), getattr(dataset, "shard_sizes", None) or [0]
    if factor <= 1.0:
        return None
    pack, limit, name = sum(sizes), int(dataset.cache_limit), type(dataset).__name__
    where = f"{name} at {getattr(dataset, 'path', '?')} ({size(pack)}, cache_limit={size(limit)})"
    if isinstance(shuffle, str):
        logging.getLogger("fastprep").info(
            "Loader: shuffle='global' over %s fetches about %.1fx the pack per epoch (~%s); shuffle=True would "
            "use the shard-aware order (about 1x)", where, factor, size(factor * pack))
        return None
    window = max(1, min(DEFAULT_WINDOW, limit // 2 // max(1, max(sizes))))
    logging.getLogger("fastprep").warning(
        "Loader: shuffle=True over %s would fetch about %.1fx the pack per epoch (~%s); using the shard-aware "
        "order instead (shuffle='shards', shard_window=%d: about 1x, %s), saving ~%s per epoch. Pass "
        "shuffle='global' for a sample-level shuffle anyway", where, factor, size(factor * pack), window,
        size(pack), size((factor - 1.0) * pack))
    return window


def fetch_note(dataset: Any, shuffle: bool | str, epoch_fetched: tuple[int, int] | None) -> str:
    """What the Loader's repr adds over a remote dataset: its shuffle, and the bytes fetched in
    the last whole epoch (`epoch_fetched`: (epoch, bytes) or None) against the pack's size
    (', shuffle='shards', fetched 24.7 MB in epoch 0, 1.0x the 24.7 MB pack'); '' for a local one."""
    if not getattr(dataset, "remote", False):
        return ""
    note = f", shuffle={shuffle!r}"
    if epoch_fetched is None:
        return note + ", no whole epoch fetched yet"
    epoch, fetched = epoch_fetched
    pack = sum(getattr(dataset, "shard_sizes", None) or [0])
    times = f", {fetched / pack:.1f}x the {size(pack)} pack" if pack else ""
    return f"{note}, fetched {size(fetched)} in epoch {epoch}{times}"


def size(nbytes: float) -> str:
    """'24.7 MB': bytes in decimal units, 3 significant digits."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{int(nbytes)} B"


def item_shards(dataset: Any) -> np.ndarray:
    """The dataset's ``item_shards``, checked: one non-negative int per item."""
    shards = np.asarray(dataset.item_shards)
    if shards.ndim != 1 or len(shards) != len(dataset) or not np.issubdtype(shards.dtype, np.integer) \
            or (len(shards) and shards.min() < 0):
        raise ValueError(f"Loader: {type(dataset).__name__}.item_shards must be a 1-d array of {len(dataset)} "
                         f"non-negative ints (the shard of each item), got {shards.dtype} of shape {shards.shape}")
    return shards.astype(np.int64, copy=False)


def window_of(window: Any, dataset: Any) -> int:
    """Shards shuffled together: `window` when given, else DEFAULT_WINDOW; refused when the dataset
    says a cache (``cache_limit``, ``shard_sizes``) whose half cannot hold that many of its largest
    shards. Not sized from the cache: the window is part of the epoch's order, which every rank of a
    job must compute alike, and each node has its own cache (see the module)."""
    given = window is not None
    window = check_int("Loader", "shard_window", window, 1) if given else DEFAULT_WINDOW
    limit, sizes = getattr(dataset, "cache_limit", None), getattr(dataset, "shard_sizes", None)
    if limit is None or sizes is None or not len(sizes):
        return window
    largest, held = max(1, int(np.max(sizes))), min(window, len(sizes))  # a window past the shards holds them all
    if held * largest > int(limit) // 2:
        fits = int(limit) // 2 // largest
        fix = f"shard_window={fits} on every rank of the job (the same on each: the order depends on it), or " \
            if fits else ""
        raise ValueError(f"Loader: shuffle='shards' reads shard_window={window}{'' if given else ' (the default)'} "
                         f"shards at a time, {held} of up to {largest} bytes here, but half of "
                         f"{type(dataset).__name__}'s cache_limit={int(limit)} holds {fits}: pass {fix}a cache_limit "
                         f"of at least {2 * held * largest}")
    return window


def table_digest(shards: np.ndarray) -> str:
    """'<shards> shards, crc32 <hex>': the shard table an order was made from (what a checkpoint
    keeps of it: a re-packed dataset with as many items has another table, hence another order).
    A CRC, not a cryptographic hash: it tells a re-pack apart, and costs ~5 ms per million items."""
    table = np.ascontiguousarray(shards, dtype="<i8")
    return f"{np.count_nonzero(np.bincount(table))} shards, crc32 {zlib.crc32(table):08x}"  # no sort


def shard_order(shards: np.ndarray, seed: int, epoch: int, window: int, world: int = 1) -> np.ndarray:
    """The epoch's global order (item indices) for items in `shards` (see the module)."""
    rng = np.random.Generator(np.random.PCG64(item_seed(seed, "shards", epoch) & (2**64 - 1)))
    present = np.unique(shards)
    counts = np.bincount(shards)
    by_shard = np.argsort(shards, kind="stable")  # items of each shard, in index order
    starts = np.concatenate([[0], np.cumsum(counts)])
    groups: list[list[int]] = [[] for _ in range(world)]
    load = np.zeros(world, dtype=np.int64)
    dealt = present[rng.permutation(len(present))]
    dealt = dealt[np.argsort(-counts[dealt], kind="stable")]  # largest first: the ranks' loads end even
    for s in dealt:  # each shard to the rank with the fewest samples yet
        r = int(np.argmin(load))
        groups[r].append(int(s))
        load[r] += counts[s]
    groups = [[group[k] for k in rng.permutation(len(group))] for group in groups]  # each rank's own order
    streams = []
    for group in groups:
        blocks = []
        for b in range(0, len(group), window):
            block = np.concatenate([by_shard[starts[s]:starts[s + 1]] for s in group[b:b + window]])
            blocks.append(block[rng.permutation(len(block))])
        streams.append(np.concatenate(blocks) if blocks else np.zeros(0, dtype=np.int64))
    table = np.full((int(load.max(initial=0)), world), -1, dtype=np.int64)
    for r, stream in enumerate(streams):
        table[:len(stream), r] = stream
    order = table.ravel()
    return order[order >= 0]
