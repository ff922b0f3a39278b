"""What a measured step takes: batches epoch after epoch, moved to the device, expanded there.

What step_fn receives (find_bottleneck, the sweeps): the batch the loader yields, moved to the
device (tensors in tuples, lists, dicts and namedtuples one by one; a CompactBatch whole), then,
when it is a CompactBatch, expanded there with ``CompactBatch.expand()`` (float32 images / 255,
int64 labels, bool masks). ``expand=False`` passes the CompactBatch itself; a callable `expand`
is applied to every batch on the device instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from fastprep.batch._compact import CompactBatch
from fastprep.core._iterators import stop_iterator
from fastprep.core._tree import tree_map


def expander(owner: str, expand: Any) -> Callable[[Any], Any]:
    """What runs on the device before step_fn (see the module doc)."""
    if expand is True:
        return lambda b: b.expand() if isinstance(b, CompactBatch) else b
    if expand is False or expand is None:
        return lambda b: b
    if callable(expand):
        return expand
    raise ValueError(f"{owner}: expected expand to be a bool or a callable, got {expand!r}")


def own(batch: Any) -> Any:
    """A CompactBatch that owns its tensors (pinned where they were): a Loader slot or a reusing
    collate's buffer would be overwritten while it is kept."""
    if not isinstance(batch, CompactBatch):
        return batch

    def copy(t: torch.Tensor) -> torch.Tensor:
        try:
            pinned = t.is_pinned()
        except RuntimeError:
            pinned = False
        return t.clone().pin_memory() if pinned else t.clone()

    return CompactBatch(tree_map(lambda x: copy(x) if isinstance(x, torch.Tensor) else x, batch.data), batch.spec)


class Epochs:
    """Batches of ``iter(make())``, epoch after epoch (`make` may return the same loader each time,
    so a DataLoader with persistent_workers keeps its workers); `epochs` counts those started."""

    def __init__(self, make: Callable[[], Any]):
        self.make, self.it, self.epochs = make, None, 0

    def __iter__(self) -> Epochs:
        return self

    def __next__(self) -> Any:
        for _ in range(2):
            if self.it is None:
                self.it, self.epochs = iter(self.make()), self.epochs + 1
            try:
                return next(self.it)
            except StopIteration:
                self.it = None  # a persistent DataLoader hands the same iterator back next epoch
        raise RuntimeError("diagnose: the loader yielded no batch in a whole epoch")

    def close(self) -> None:
        if self.it is not None:
            stop_iterator(self.it)
            self.it = None
