"""Packed shards as a Ray Data source (``fastprep.ray.read_packed``): the rows are record indices
and labels, and each data server reads its rows' images from the shards itself, by window.

A row is ``{"id": i, "image": i, "label": label_i}``; ``CompactMap(..., load=PackedImages(path))``
turns the image column into record i's image, a :class:`fastprep.io.PackedJpeg` or
:class:`~fastprep.io.PackedRaw` that fastprep's transforms crop without decoding the rest, and
runs the transform under ``item_seed(seed, i, epoch)``: the sample SeedByIndex + DataLoader (or
fastprep.Loader) gives record i of the same PackedDataset, on any machine, however Ray splits
the blocks. A local pack's shards must be readable at `path` on every node (a shared file
system); a pack at a URL (s3://, gs://, ...) is read through each node's own shard cache, a block
per shard, each shard dealt to the node that reads it (fastprep/integrations/_ray_remote.py).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import ray.data

from fastprep.integrations._ray_remote import PackedShardsDatasource, check_cache_dir, node_cache_dir, opened_remote
from fastprep.io.packed._dataset import PackedDataset
from fastprep.io.remote._store import is_url


class PackedImages:
    """``load=`` for :class:`fastprep.ray.CompactMap`: a record index to that record's image, read by
    window. Pickled to the data servers as its path and options; each copy opens the pack once, and
    a pack at a URL once per process (every task of a worker shares it: opening one checks its
    index against the store, a round trip or two each task would pay).

    Args:
        path: the folder :func:`fastprep.io.pack` wrote, or its URL.
        **options: PackedDataset's (mode, layout, verify, storage_options, cache_dir, ...). A
            `cache_dir` may hold ``{node}``, replaced on each node by its Ray node id (a cache per
            node where nodes share a file system or a machine); without one, each node's default
            cache ($FASTPREP_CACHE or ~/.cache/fastprep/packs there).

    Example:
        >>> ds = fastprep.ray.read_packed("train.packed")
        >>> ds = ds.map_batches(fastprep.ray.CompactMap(train_tf, seed=0, load=PackedImages("train.packed")),
        ...                     batch_format="numpy")
    """

    def __init__(self, path: str | os.PathLike, **options: Any):
        self.path, self.options = os.fspath(path), options
        if "cache_dir" in options:
            check_cache_dir("PackedImages", options["cache_dir"])
        self._dataset: PackedDataset | None = None

    def __call__(self, index: Any) -> Any:
        if self._dataset is None:
            options = dict(self.options)
            if options.get("cache_dir") is not None:  # this node's cache
                options["cache_dir"] = node_cache_dir(os.fspath(options["cache_dir"]))
            self._dataset = opened_remote(self.path, options) if is_url(self.path) else PackedDataset(
                self.path, **options)
        return self._dataset.load_raw(int(index))[0]

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path, "options": self.options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["path"], **state["options"])


def read_packed(path: str | os.PathLike, *, override_num_blocks: int | None = None,
                storage_options: dict | None = None, cache_dir: str | os.PathLike | None = None) -> ray.data.Dataset:
    """The records of a pack as Ray Data rows ``{"id": i, "image": i, "label": label}`` (the index
    only: the images are read where the rows are mapped, with :class:`PackedImages`).

    Args:
        path: the folder :func:`fastprep.io.pack` wrote, or its URL (s3://, gs://, ...: its index
            is read here, on the driver, into the driver node's cache).
        override_num_blocks: how many blocks to split a local pack's rows into (Ray's default
            otherwise). A pack at a URL has a block per shard (the unit a node caches).
        storage_options, cache_dir: for a URL, as PackedDataset's; give PackedImages the same.
            `cache_dir` may hold ``{node}`` (see PackedImages).

    Example (a pack in S3; each node caches the shards it reads)::

        opts = dict(storage_options={"endpoint_url": url}, cache_dir="/local-nvme/fastprep")
        ds = fastprep.ray.read_packed("s3://bucket/train.packed", **opts)
        ds = ds.map_batches(CompactMap(tf, seed=0, load=PackedImages("s3://bucket/train.packed", **opts)),
                            batch_format="numpy")
    """
    cache_dir = check_cache_dir("read_packed", cache_dir)
    if not is_url(os.fspath(path)):
        if storage_options is not None or cache_dir is not None:
            raise ValueError(f"read_packed: storage_options and cache_dir are for a pack at a URL; {path!r} is a "
                             f"local folder")
        labels = PackedDataset(path).targets
        rows = [{"id": i, "image": i, "label": int(label)} for i, label in enumerate(labels)]
        return ray.data.from_items(rows, override_num_blocks=override_num_blocks)
    if override_num_blocks is not None:
        raise ValueError(f"read_packed: a pack at a URL is read a block per shard (what a node caches); "
                         f"override_num_blocks={override_num_blocks!r} is for a local pack (repartition after "
                         f"the map for other blocks)")
    index = PackedDataset(path, storage_options=storage_options, cache_dir=node_cache_dir(cache_dir))
    source = PackedShardsDatasource(index.item_shards, np.asarray(index.targets, dtype=np.int64), index.path)
    return ray.data.read_datasource(source)
