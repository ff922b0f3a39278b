"""Packed shards as a Ray Data source (``fastprep.ray.read_packed``): the rows are record indices
and labels, and each data server reads its rows' images from the shards itself, by window.

A row is ``{"id": i, "image": i, "label": label_i}``; ``CompactMap(..., load=PackedImages(path))``
turns the image column into record i's image, a :class:`fastprep.io.PackedJpeg` or
:class:`~fastprep.io.PackedRaw` that fastprep's transforms crop without decoding the rest, and
runs the transform under ``item_seed(seed, i, epoch)``: the sample SeedByIndex + DataLoader (or
fastprep.Loader) gives record i of the same PackedDataset, on any machine, however Ray splits
the blocks. The shards must be readable at `path` on every node (a shared file system).
"""

from __future__ import annotations

import os
from typing import Any

import ray.data

from fastprep.io.packed.dataset import PackedDataset


class PackedImages:
    """``load=`` for :class:`fastprep.ray.CompactMap`: a record index to that record's image, read by
    window. Pickled to the data servers as its path and options; each process opens the shards once.

    Args:
        path: the folder :func:`fastprep.io.pack` wrote.
        **options: PackedDataset's (mode, layout, verify, ...).

    Example:
        >>> ds = fastprep.ray.read_packed("train.packed")
        >>> ds = ds.map_batches(fastprep.ray.CompactMap(train_tf, seed=0, load=PackedImages("train.packed")),
        ...                     batch_format="numpy")
    """

    def __init__(self, path: str | os.PathLike, **options: Any):
        self.path, self.options = os.fspath(path), options
        self._dataset: PackedDataset | None = None

    def __call__(self, index: Any) -> Any:
        if self._dataset is None:
            self._dataset = PackedDataset(self.path, **self.options)
        return self._dataset.load_raw(int(index))[0]

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path, "options": self.options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["path"], **state["options"])


def read_packed(path: str | os.PathLike, *, override_num_blocks: int | None = None) -> ray.data.Dataset:
    """The records of a pack as Ray Data rows ``{"id": i, "image": i, "label": label}`` (the index
    only: the images are read where the rows are mapped, with :class:`PackedImages`).

    Args:
        path: the folder :func:`fastprep.io.pack` wrote (its index is read here, on the driver).
        override_num_blocks: how many blocks to split the rows into (Ray's default otherwise).
    """
    labels = PackedDataset(path).targets
    rows = [{"id": i, "image": i, "label": int(label)} for i, label in enumerate(labels)]
    return ray.data.from_items(rows, override_num_blocks=override_num_blocks)
