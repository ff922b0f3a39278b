"""A pack in object storage as a Ray Data source: one block per shard, each shard dealt to the
node whose task asks for it, so the node that reads a shard's images is the one that caches it.

Ray's Datasource API places no single block: a ReadTask carries no remote arguments (those of
``read_datasource`` apply to every task alike), and ``ray_remote_args_fn`` is called without the
task it is for. So the placement is turned around: the read tasks go wherever Ray's scheduler puts
them (spread over the nodes), and each, once running, asks a small actor (:class:`ShardDealer`,
no CPU) for a shard, naming its node. The dealer gives each shard once per pass (exactly once:
a retried task gets its slot's shard again) and prefers a shard that node already took in an
earlier pass (its cache holds it), then one no node has taken yet, then any (a node with nothing
of its own left helps the others: a second copy, never a wait). The task's rows are that shard's
records; ``map_batches(CompactMap(..., load=PackedImages(url, ...)))`` after the read is fused
into the same task by Ray Data (both are task-pool maps), so the images are read on that node,
from its cache (downloaded there once, whatever the number of tasks on the node: the cache's
locks). The first pass records where each shard landed; the next ones send it back there.

A map that is not fused with the read (an actor pool, a repartition in between) still reads
every image correctly, from the cache of the node it runs on: the locality is lost, not a sample.
"""

from __future__ import annotations

import os
import socket
import threading
import uuid
from collections import OrderedDict
from functools import partial
from typing import Any

import numpy as np
import ray
from ray.data.block import BlockMetadata
from ray.data.datasource import Datasource, ReadTask

from fastprep.io.packed._dataset import PackedDataset

PASSES_KEPT = 16  # the dealer forgets older passes (a pass is one execution of the dataset)
OPENED_KEPT = 8  # remote packs a process keeps open for PackedImages
_opened: OrderedDict[tuple[str, str], PackedDataset] = OrderedDict()
_opened_lock = threading.Lock()


def opened_remote(url: str, options: dict[str, Any]) -> PackedDataset:
    """The PackedDataset of `url` with `options` this process opened, or a new one (kept, the last
    OPENED_KEPT). Kept, it holds the pack whose index it read: if the store's pack is replaced,
    its reads of shards not yet cached fail with a ShardMismatchError saying so."""
    key = (url, repr(sorted(options.items())))
    with _opened_lock:
        if key in _opened:
            _opened.move_to_end(key)
            return _opened[key]
    dataset = PackedDataset(url, **options)
    with _opened_lock:
        dataset = _opened.setdefault(key, dataset)
        while len(_opened) > OPENED_KEPT:
            _opened.popitem(last=False)
    return dataset


def node_id() -> str:
    """The Ray node this process runs on (the host's name outside Ray)."""
    if ray.is_initialized():
        return ray.get_runtime_context().get_node_id()
    return socket.gethostname()


def check_cache_dir(owner: str, cache_dir: Any) -> str | None:
    """A cache folder or template (a str or path, or None: each node's default cache)."""
    if cache_dir is None:
        return None
    if not isinstance(cache_dir, (str, os.PathLike)):
        raise TypeError(f"{owner}: expected cache_dir to be a folder (str or path), a template with "
                        f"'{{node}}', or None, got {cache_dir!r}")
    return os.fspath(cache_dir)


def node_cache_dir(cache_dir: str | None) -> str | None:
    """`cache_dir` on this node: ``{node}`` replaced by the Ray node's id (one cache per node even
    where nodes share a file system, or a machine, as a test cluster's do). None: the node's
    default cache ($FASTPREP_CACHE, else ~/.cache/fastprep/packs, read on the node)."""
    return None if cache_dir is None else cache_dir.replace("{node}", node_id())


class ShardDealer:
    """Deals a pack's shards to the read tasks of each pass, one shard a task (see the module).

    Args:
        rows: each shard's record indices.
        labels: each shard's labels, as `rows`.
    """

    def __init__(self, rows: list[np.ndarray], labels: list[np.ndarray]):
        self.rows, self.labels = rows, labels
        self.homes: list[set[str]] = [set() for _ in rows]  # the nodes each shard went to
        self.passes: OrderedDict[str, tuple[dict[int, int], set[int]]] = OrderedDict()

    def take(self, token: str, slot: int, node: str) -> tuple[int, np.ndarray, np.ndarray]:
        """(shard, its record indices, its labels) for read task `slot` of pass `token`, on `node`."""
        if token not in self.passes:
            self.passes[token] = ({}, set(range(len(self.rows))))
            while len(self.passes) > PASSES_KEPT:
                self.passes.popitem(last=False)
        given, left = self.passes[token]
        if slot not in given:
            given[slot] = self._choose(left, node)
            left.discard(given[slot])
            self.homes[given[slot]].add(node)
        k = given[slot]
        return k, self.rows[k], self.labels[k]

    def _choose(self, left: set[int], node: str) -> int:
        if not left:
            raise RuntimeError(f"ShardDealer: every shard of this pass is dealt ({len(self.rows)}): a read task "
                               f"beyond the pack's shards asked")
        mine = [k for k in left if node in self.homes[k]]
        if mine:
            return min(mine)
        fresh = [k for k in left if not self.homes[k]]
        return min(fresh) if fresh else min(left)

    def placement(self) -> list[list[str]]:
        """The nodes each shard was dealt to so far (sorted), shard by shard."""
        return [sorted(h) for h in self.homes]


def _read_shard(dealer: Any, token: str, slot: int) -> list[Any]:
    import pyarrow as pa  # noqa: PLC0415 (Ray Data's dependency; needed on the data servers only)

    _, rows, labels = ray.get(dealer.take.remote(token, slot, node_id()))
    rows = np.asarray(rows, dtype=np.int64)
    return [pa.table({"id": rows, "image": rows, "label": np.asarray(labels, dtype=np.int64)})]


class PackedShardsDatasource(Datasource):
    """The records of a remote pack as rows ``{"id": i, "image": i, "label": label}``, one read task
    per shard, each shard dealt by a :class:`ShardDealer` to the node whose task asks."""

    def __init__(self, item_shards: np.ndarray, labels: np.ndarray, name: str):
        order = np.argsort(item_shards, kind="stable")
        cuts = np.flatnonzero(np.diff(item_shards[order])) + 1
        rows = [r for r in np.split(order, cuts) if len(r)]
        self.sizes = [len(r) for r in rows]
        # no CPU: it never waits for one; it lives as long as the datasets holding its handle
        self.dealer = ray.remote(num_cpus=0)(ShardDealer).remote(rows, [labels[r] for r in rows])
        self.name = name

    def get_name(self) -> str:
        return f"ReadPacked({self.name})"

    def estimate_inmemory_data_size(self) -> int:
        return 24 * sum(self.sizes)

    def get_read_tasks(self, parallelism: int, per_task_row_limit: int | None = None,
                       data_context: Any = None) -> list[ReadTask]:
        token = uuid.uuid4().hex  # a pass: each execution of the dataset plans its reads anew
        # a slot's rows are known once it is dealt a shard: the row count is the largest a shard has
        return [ReadTask(partial(_read_shard, self.dealer, token, slot),
                         BlockMetadata(num_rows=None, size_bytes=24 * max(self.sizes), input_files=None,
                                       exec_stats=None),
                         per_task_row_limit=per_task_row_limit)
                for slot in range(len(self.sizes))]

    def placement(self) -> list[list[str]]:
        """The nodes each shard was dealt to so far (their Ray node ids): where it is cached."""
        return ray.get(self.dealer.placement.remote())
