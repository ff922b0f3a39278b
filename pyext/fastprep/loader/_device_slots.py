"""The GPU decode split's batches in flight (``Loader(decode_on=...)``, loader/_device_split.py): the
slot ring whose slots hold the rows' host tensors (the seed row's packed masks) and the job that
collects, per sample, the window's cut and its row of the fused op's geometry (what the device needs)."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import torch

from fastprep.batch._slots import BatchJob, SlotRing
from fastprep.batch._window_batch import WindowBatch, WindowCuts
from fastprep.core._tree import tree_map
from fastprep.io.jpeg._window_cut import WindowCut


class WindowSlotRing(SlotRing):
    """The Loader's slot ring for split batches: besides the other fields' storage (the image field
    has none: its pixels are made on the device), each slot's rows of the fused row's host tensors
    (``DeviceSplit.host``), allocated on the first write (pinned for a CUDA device). `group`: the
    plan's fused group, whose row splits; `device`: where the batches decode; `decoders`: the
    Loader's JPEG decoder chain."""

    def __init__(self, count: int, batch_size: int, pin: bool, fields: dict[Any, str] | None, group: Any,
                 device: torch.device, decoders: Any = "auto"):
        super().__init__(count, batch_size, pin, fields)
        self.group, self.device, self.decoders = group, device, decoders
        # What every batch's images are: the row's declaration, else the first run's.
        self.out_size: tuple[int, int] | None = None if group.makes is None else tuple(group.makes[0][1:])
        self._extras: dict[str, list[torch.Tensor]] = {}
        self._extras_lock = threading.Lock()

    def extra(self, slot: int, name: str, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        """Slot `slot`'s rows of the host tensor `name`: ``[batch_size, *shape]`` of `dtype`."""
        rows = self._extras.get(name)
        if rows is None:
            with self._extras_lock:
                rows = self._extras.get(name)
                if rows is None:
                    rows = [torch.empty(self.batch_size, *shape, dtype=dtype, pin_memory=self.pin)
                            for _ in range(self.count)]
                    self._extras[name] = rows
        t = rows[slot]
        if tuple(t.shape[1:]) != tuple(shape) or t.dtype != dtype:
            raise ValueError(f"Loader(decode_on=...): a sample's {name} is {tuple(shape)} {dtype}, after "
                             f"{tuple(t.shape[1:])} {t.dtype} ones; the split's windows have one size")
        return t

    def extras(self, slot: int, n: int) -> dict[str, torch.Tensor]:
        """The first n rows of each host tensor of slot `slot`."""
        return {name: rows[slot][:n] for name, rows in self._extras.items()}

    def check_out_size(self, size: tuple[int, int], index: int) -> None:
        if self.out_size is None:
            with self._extras_lock:
                if self.out_size is None:
                    self.out_size = size
        if size != self.out_size:
            raise ValueError(f"Loader(decode_on=...): sample {index}'s image is {size[0]}x{size[1]}, but the batches "
                             f"are laid out from {self.out_size[0]}x{self.out_size[1]} images; batch equal shapes "
                             f"(a crop after the resize)")


class WindowJob(BatchJob):
    """A split batch in flight: per sample its cut and geometry row (the fused op's, carried as it
    is); the row's host tensors go into the slot's rows."""

    def __init__(self, indices: list[int], ring: WindowSlotRing, items: list[Any] | None = None):
        super().__init__(indices, ring, items)
        n = len(indices)
        self.cuts: list[WindowCut | None] = [None] * n
        self.geometry: np.ndarray | None = None  # the runs' geometry rows (made on the first run: its columns)

    def write_run(self, j: int, index: int, run: Any) -> None:
        """A run of the fused batch path (its windows cut, not decoded) into positions j, j + 1, ..."""
        ring, n = self.ring, len(run)
        group = ring.group
        ring.check_out_size(tuple(run.out_size), index)
        # The batch's spec is the CPU path's: an image of the row's dtype (made on the device).
        self.image_rows(run.output_like(0, torch.empty(3, 0, 0, dtype=group.out_dtype)), index, j, j + n)
        if not all(type(c) is WindowCut for c in run.inputs):
            raise TypeError(f"Loader(decode_on=...): the plan read {type(run.inputs[0]).__name__}s where it "
                            f"should have cut windows; the fused batch path changed under the split")
        group.fusion.split.host(group, run, lambda name, shape, dtype: ring.extra(self.slot, name, shape,
                                                                                  dtype)[j:j + n])
        self.cuts[j:j + n] = run.inputs
        if self.geometry is None:
            self.geometry = np.zeros((len(self.indices), run.geometry.shape[1]), np.int64)
        self.geometry[j:j + n] = run.geometry

    def batch(self) -> WindowBatch:
        ring, n = self.ring, len(self.indices)
        windows = WindowCuts(self.cuts, self.geometry, ring.extras(self.slot, n),
                             ring.group, ring.out_size, ring.device, ring.decoders)
        first = [windows]  # the image field (the first leaf: the batch path's image)
        data = tree_map(lambda x: first.pop() if first else x, self.data())
        return WindowBatch(data, ring.spec, pool=self.slot_return())
