"""An epoch's order for fastprep.Loader: its indices (of a map-style dataset, in order,
shuffled by (seed, epoch), shard-aware (loader/_shard_order.py) or from a sampler; positions in an
iterable dataset's stream), this rank's part of them (loader/_ranks.py), cut into batches, and the
indices a resumed epoch starts from."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.data import IterableDataset

import fastprep.loader._ranks as ranks
from fastprep.core._rng import item_seed
from fastprep.core._roles import is_int_label
from fastprep.loader._shard_order import item_shards, shard_order


def is_iterable(dataset: Any) -> bool:
    """A dataset read by iterating it (torch's IterableDataset, or anything with ``__iter__`` and
    no ``__getitem__``), not by index."""
    if isinstance(dataset, IterableDataset):
        return True
    return hasattr(dataset, "__iter__") and not hasattr(dataset, "__getitem__")


class Order:
    """The samples of an epoch, for a map-style dataset (indices: dataset indices) or an iterable one
    (indices: positions 0, 1, ... in the stream; its items are read by :meth:`read` in order)."""

    def __init__(self, dataset: Any, batch_size: int, shuffle: bool | str, sampler: Any, drop_last: bool,
                 rank: int = 0, world: int = 1, window: int = 1):
        self.dataset, self.batch_size, self.shuffle, self.sampler = dataset, batch_size, shuffle, sampler
        self.drop_last, self.rank, self.world, self.window = drop_last, rank, world, window
        self.iterable = is_iterable(dataset)
        self._drawn: tuple[tuple[int, int, int], list[int]] | None = None  # ((seed, epoch, n), the shuffle drawn)
        if self.iterable and (shuffle or sampler is not None):
            raise ValueError(f"Loader: an iterable dataset ({type(dataset).__name__}) sets its own order: expected "
                             f"shuffle=False and no sampler, got shuffle={shuffle}, sampler={sampler!r}; shuffle "
                             f"inside the dataset (its shards, a shuffle buffer)")

    def samples(self) -> int:
        """Samples in an epoch; a TypeError when neither the sampler nor the dataset has a length
        (a one-shot sampler is not consumed to count it)."""
        counted = self.sampler if self.sampler is not None else self.dataset
        if not hasattr(counted, "__len__"):
            what = "sampler" if self.sampler is not None else "dataset"
            raise TypeError(f"Loader: len() needs a {what} with a length; {type(counted).__name__} has none")
        n = len(counted)
        if self.sampler is not None or self.world == 1:
            return n
        return n // self.world if self.drop_last else -(-n // self.world)

    def batches(self) -> int:
        n = self.samples()
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def indices(self, seed: int, epoch: int, consumed: int = 0, order_world: int | None = None,
             window: int | None = None) -> list[int] | None:
        """This rank's dataset indices of the epoch, in order, from global position `consumed` of an
        order made for `order_world` ranks and a shard window `window` (defaults: this Loader's);
        None for an iterable dataset."""
        if self.iterable:
            return None
        if self.sampler is not None:
            return [sampler_index(i, self.dataset) for i in self.sampler]
        order = self.global_keys(seed, epoch, self.world if order_world is None else order_world, window)
        if self.world == 1 and consumed == 0:
            return order if isinstance(order, list) else order.tolist()
        return ranks.part(order, consumed, self.world, self.rank, self.drop_last)

    def global_keys(self, seed: int, epoch: int, world: int, window: int | None = None) -> list[int] | np.ndarray:
        """The epoch's order over every rank (shuffle="shards": the one made for `world` ranks, with
        `window` shards shuffled together, default this Loader's)."""
        n = len(self.dataset)
        if self.shuffle == "shards":
            return shard_order(item_shards(self.dataset), seed, epoch, self.window if window is None else window, world)
        if not self.shuffle:
            return list(range(n))
        # A pass that makes the next epoch's first batch ahead draws that epoch's order, which the next
        # pass draws again: the last one drawn is kept (a copy handed out: callers own their indices).
        if self._drawn is None or self._drawn[0] != (seed, epoch, n):
            g = torch.Generator()
            g.manual_seed(item_seed(seed, "shuffle", epoch))
            self._drawn = ((seed, epoch, n), torch.randperm(n, generator=g).tolist())
        return list(self._drawn[1])

    def set_epoch(self, epoch: int) -> None:
        """A sampler with set_epoch (DistributedSampler) gets the epoch; so does an iterable
        dataset with one (its shard order is its sampler)."""
        for owner in (self.sampler, self.dataset if self.iterable else None):
            if owner is not None and callable(getattr(owner, "set_epoch", None)):
                owner.set_epoch(epoch)

    def check_start(self, start: int, indices: list[int] | None) -> None:
        if start % self.batch_size and (indices is None or start < len(indices)):
            raise ValueError(f"Loader: resume position {start} is not a batch boundary (batch_size "
                             f"{self.batch_size}) nor the end of the epoch")

    def batches_from(self, indices: list[int] | None, start: int,
                     raw: bool = False) -> Iterator[tuple[list[int], list[Any] | None]]:
        """(indices, items) of each batch from sample `start` on: items None for a map-style dataset
        (the threads load them), the items read in order for an iterable one: with `raw` (the
        Loader has the transform), its ``iter_raw()`` when it has one, as ``load_raw`` is read."""
        size = self.batch_size
        if indices is not None:
            for k in range(start, len(indices), size):
                batch = indices[k:k + size]
                if len(batch) == size or not self.drop_last:
                    yield batch, None
            return
        it = iter(self.dataset.iter_raw() if raw and hasattr(self.dataset, "iter_raw") else self.dataset)
        position = 0
        while True:
            items = []
            for item in it:
                items.append(item)
                if len(items) == size:
                    break
            if not items or (len(items) < size and self.drop_last):
                return
            yield list(range(position, position + len(items))), items
            position += len(items)


def sampler_index(i: Any, dataset: Any) -> int:
    """A sampler's index as an int: an int (Python, numpy, 0-d tensor) in [0, len(dataset)) when
    the dataset has a length; a float would be truncated and a negative index wrap around, silently."""
    if isinstance(i, (bool, np.bool_)) or not is_int_label(i):
        raise ValueError(f"Loader: the sampler gave {i!r}; expected int indices")
    n = len(dataset) if hasattr(dataset, "__len__") else None
    if i < 0 or (n is not None and i >= n):
        raise ValueError(f"Loader: the sampler gave index {int(i)}, outside the dataset's [0, {n})")
    return int(i)


def saved_indices(indices: Sequence[Any] | None, dataset: Any) -> list[int] | None:
    return None if indices is None else [sampler_index(i, dataset) for i in indices]
