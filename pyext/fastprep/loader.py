"""fastprep.Loader: batches made by threads in the training process, written straight into a ring
of reused batch slots.

A DataLoader worker spends most of each core on moving bytes: a fresh output tensor per sample,
a stack copy into fresh shared memory, IPC, then a copy into pinned memory. The Loader's threads
(fastprep's native ops release the GIL) write each sample once, into a slot that is allocated
once (pinned when the device is CUDA) and reused; the fused transform writes there directly
through ``crop_mask_ycbcr_batch``, with no per-sample tensor at all.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.data import Sampler

from fastprep import slots as slot_mod
from fastprep.args import check_bool, check_int
from fastprep.batch import CompactBatch
from fastprep.prefetch import DevicePrefetcher, check_device
from fastprep.rng import check_epoch, draw_seed, item_seed, seed_argument, seeded, thread_seeded
from fastprep.roles import check_fields, is_int_label
from fastprep.transforms import (
    Compose,
    RandomCrop,
    RandomDilatedMask,
    RandomHorizontalFlip,
    RandomResizedCrop,
    RGBToYCbCr,
    SeedByIndex,
    ToDtype,
    fusable,
    require_rgb,
)
from fastprep.transforms.compose import flip_after_crop, fused_image, fused_source
from fastprep.transforms.inputs import describe, error_context
from fastprep.transforms.sample import GEOMETRY, Item, Sample, decode_jpeg_files

_FASTPREP_TRANSFORMS = (RandomCrop, RandomDilatedMask, RGBToYCbCr, ToDtype, RandomResizedCrop, RandomHorizontalFlip)


def _fastprep_only(t: Any) -> bool:
    """Whether every random draw of transform `t` goes through fastprep.draw_seed."""
    if isinstance(t, Compose):
        return all(_fastprep_only(s) for s in t.transforms)
    return isinstance(t, _FASTPREP_TRANSFORMS)


class Loader:
    """Iterate batches of a map-style dataset, made by `threads` threads in this process.

    Each item is ``dataset[i]``; with `transform`, it is ``dataset.load_raw(i)`` (or
    ``dataset[i]`` when there is no ``load_raw``) with `transform` applied to the image: the item
    itself, or its first element when it is a tuple or list (torchvision's (image, target)); a
    transform made of fastprep transforms only gets the whole item, a structured sample as
    torchvision v2 takes it (masks and boxes cut with the image, other values passed through).
    Batches are :class:`CompactBatch` es as :func:`fastprep.compact_collate` makes them, every field
    with the same role (fastprep/roles.py, or `fields`): uint8 images, packed bool masks, small
    labels, other tensors as they are; or, with `decode`, decoded (on `device` when given).

    Randomness: sample i of epoch e runs under the seed ``item_seed(seed, i, e)``, exactly as
    ``SeedByIndex(dataset, seed)`` in a DataLoader gives it, whatever `threads`, worker count or
    order. fastprep's transforms draw from a per-thread generator, so threads run in parallel; a
    transform that is not made of fastprep transforms only (the Loader's, or the dataset's
    ``transform`` attribute when the Loader has none) runs under a lock with torch's generator
    seeded per sample, as SeedByIndex does (reproducible, one sample at a time).

    Memory: batches are written into ``depth + 1`` slots reused in turn (``2 depth + 2`` with a
    CUDA device, pinned). Without a device, a yielded batch stays valid until the next batch is
    asked for; ``batch.clone()`` keeps one. With a device, the copy runs on a side stream and a
    slot is reused only after its copy has completed.

    Args:
        dataset: a map-style dataset (``len`` and ``[i]``); a SeedByIndex is unwrapped (its seed
            and epoch are used unless given).
        batch_size: samples per batch.
        transform: applied to each item's image in the loader threads (see above).
        shuffle: a fresh order each epoch, drawn from (seed, epoch).
        sampler: an iterable of indices instead (not with shuffle).
        drop_last: drop the last incomplete batch.
        threads: worker threads (default: the CPUs this process may use).
        device: where batches go ("cuda", ...); None keeps them on the CPU.
        depth: batches prepared ahead of the consumer.
        decode: decode each batch on the device (CompactBatch.decode()), or a callable to apply.
        seed: the base seed (default: drawn from torch's generator when the Loader is made).
        fields: ``{name: role}`` for the samples' top-level fields, as CompactCollate's `fields`
            (the same rules decide the other fields' roles, so batches equal compact_collate's).

    Example:
        >>> loader = Loader(dataset, 256, transform=train_tf, shuffle=True, device="cuda", decode=True)
        >>> for epoch in range(epochs):
        ...     loader.set_epoch(epoch)
        ...     for images, labels in loader:
        ...         ...
    """

    def __init__(self, dataset: Any, batch_size: int, *, transform: Any = None, shuffle: bool = False,
                 sampler: Sampler | Sequence[int] | None = None, drop_last: bool = False,
                 threads: int | None = None, device: Any = None, depth: int = 2, decode: Any = False,
                 seed: int | None = None, fields: dict[Any, str] | None = None):
        self.epoch = 0
        if isinstance(dataset, SeedByIndex):
            seed = dataset.seed if seed is None else seed
            self.epoch = dataset.epoch
            dataset = dataset.dataset
        self.dataset = dataset
        self.batch_size = check_int("Loader", "batch_size", batch_size, 1)
        if transform is not None and not callable(transform):
            raise ValueError(f"Loader: expected transform to be callable or None, got {transform!r}")
        self.shuffle = check_bool("Loader", "shuffle", shuffle)
        if self.shuffle and sampler is not None:
            raise ValueError("Loader: shuffle=True and a sampler are exclusive (the sampler sets the order)")
        self.transform, self.sampler = transform, sampler
        self.drop_last = check_bool("Loader", "drop_last", drop_last)
        self.fields = check_fields("Loader", fields)
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        self.threads = check_int("Loader", "threads", cores if threads is None else threads, 1)
        self.depth = check_int("Loader", "depth", depth, 1)
        self.device = None if device is None else check_device("Loader", device)
        if not (isinstance(decode, (bool, np.bool_)) or callable(decode)):
            raise ValueError(f"Loader: expected decode to be a bool or a callable, got {decode!r}")
        self.decode = bool(decode) if isinstance(decode, np.bool_) else decode
        self.seed = draw_seed() if seed is None else seed_argument("Loader", "seed", seed)
        self._position = 0  # samples of this epoch already yielded (state_dict / resume)
        self._resume_at = 0
        fused = list(transform.transforms) if isinstance(transform, Compose) and transform.fuse else []
        # (flip before the crop, crop, flip after it, mask, colour), flips None when absent: what
        # the slot path runs, drawing in the steps' order.
        if fusable(fused):
            self._fused = (None, fused[0], None, *fused[1:])
        elif len(fused) == 4 and type(fused[0]) is RandomHorizontalFlip and fusable(fused[1:]):
            self._fused = (*fused[:2], None, *fused[2:])
        elif flip_after_crop(fused):
            self._fused = (None, *fused)
        else:
            self._fused = None
        rng_source = transform if transform is not None else getattr(dataset, "transform", None)
        self._thread_rng = self.threads == 1 or (rng_source is not None and _fastprep_only(rng_source))
        self._structured = transform is not None and _fastprep_only(transform)
        self._global_rng = threading.Lock()

    # -- the order ------------------------------------------------------------------------------

    def __len__(self) -> int:
        n = len(self._indices_len())
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def _indices_len(self) -> Sequence[int]:
        if self.sampler is not None:
            return self.sampler if hasattr(self.sampler, "__len__") else list(self.sampler)
        return range(len(self.dataset))

    def _epoch_indices(self, epoch: int) -> list[int]:
        if self.sampler is not None:
            return [_sampler_index(i, self.dataset) for i in self.sampler]
        n = len(self.dataset)
        if not self.shuffle:
            return list(range(n))
        g = torch.Generator()
        g.manual_seed(item_seed(self.seed, "shuffle", epoch))
        return torch.randperm(n, generator=g).tolist()

    def set_epoch(self, epoch: int) -> None:
        """Fresh, reproducible randomness (and order, with shuffle) for epoch `epoch`."""
        self.epoch = check_epoch("Loader", epoch)
        self._position = self._resume_at = 0

    def state_dict(self) -> dict[str, Any]:
        """Where the loader is: load it into a Loader over the same dataset to resume mid-epoch with
        exactly the remaining samples and the same bits."""
        state = {"seed": self.seed, "epoch": self.epoch, "position": self._position}
        if self.sampler is not None:  # a sampler's order is not ours to redraw
            state["indices"] = self._epoch_indices(self.epoch)
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        missing = [k for k in ("seed", "epoch", "position") if not isinstance(state, dict) or k not in state]
        if missing:
            raise ValueError(f"Loader.load_state_dict: expected a dict from Loader.state_dict(), "
                             f"missing {missing}")
        self.seed = seed_argument("Loader.load_state_dict", "seed", state["seed"])
        self.epoch = check_epoch("Loader.load_state_dict", state["epoch"])
        self._position = self._resume_at = check_int("Loader.load_state_dict", "position", state["position"], 0)
        indices = state.get("indices")
        self._saved_indices = None if indices is None else [_sampler_index(i, self.dataset) for i in indices]

    # -- iteration ------------------------------------------------------------------------------

    def __iter__(self) -> Iterator[Any]:
        indices = getattr(self, "_saved_indices", None) or self._epoch_indices(self.epoch)
        self._saved_indices = None
        start, self._resume_at = self._resume_at, 0
        if start % self.batch_size:
            raise ValueError(f"Loader: resume position {start} is not a batch boundary")
        batches = [indices[k:k + self.batch_size] for k in range(start, len(indices), self.batch_size)]
        if self.drop_last and batches and len(batches[-1]) < self.batch_size:
            batches.pop()
        cuda = self.device is not None and self.device.type == "cuda"
        ring = slot_mod.SlotRing(2 * self.depth + 2 if cuda else self.depth + 1, self.batch_size, pin=cuda,
                                 fields=self.fields)
        pool = slot_mod.WorkerPool(self.threads)
        host = self._host_batches(batches, ring, pool, start)
        if self.device is None:
            return self._cpu(host)
        return iter(DevicePrefetcher(host, self.device, self.depth, decode=self.decode, release=True))

    def _cpu(self, host: Iterator[CompactBatch]) -> Iterator[Any]:
        previous = None
        for batch in host:
            if previous is not None:
                previous.release()  # the consumer asked for the next one: its slot may be reused
            previous = batch
            yield batch.decode() if self.decode is True else self.decode(batch) if self.decode is not False else batch

    def _host_batches(self, batches: list[list[int]], ring: slot_mod.SlotRing, pool: slot_mod.WorkerPool,
                      start: int) -> Iterator[CompactBatch]:
        inflight: list[slot_mod.BatchJob] = []
        submitted = 0
        position = start
        try:
            while submitted < len(batches) or inflight:
                while submitted < len(batches) and ring.has_free():
                    inflight.append(self._submit(batches[submitted], ring, pool))
                    submitted += 1
                job = inflight.pop(0)
                job.wait()
                position += len(job.indices)
                self._position = position
                yield job.batch()
        finally:
            pool.shutdown()

    def _submit(self, indices: list[int], ring: slot_mod.SlotRing, pool: slot_mod.WorkerPool) -> slot_mod.BatchJob:
        job = slot_mod.BatchJob(indices, ring)
        chunk = max(1, -(-len(indices) // self.threads))
        for a in range(0, len(indices), chunk):
            pool.submit(job, functools.partial(self._run_chunk, job, a, min(a + chunk, len(indices))))
        return job

    # -- one chunk of a batch, in a worker thread -------------------------------------------------

    def _seeding(self, i: int):
        s = item_seed(self.seed, i, self.epoch)
        if self._thread_rng:
            return thread_seeded(s)
        return slot_mod.locked(self._global_rng, seeded(s))

    def _load(self, i: int) -> Any:
        try:
            if self.transform is None:
                return self.dataset[i]
            load = getattr(self.dataset, "load_raw", None)
            return load(i) if load is not None else self.dataset[i]
        except Exception as exc:
            raise slot_mod.SampleError(i, "dataset") from exc

    def _apply(self, raw: Any) -> Any:
        """The transform on an item: the whole item (a structured sample) for fastprep's transforms,
        its image (the item, or its first element) for any other transform."""
        if self._structured:
            return self.transform(raw)
        return _apply_to_image(self.transform, raw)

    def _run_chunk(self, job: slot_mod.BatchJob, a: int, b: int) -> None:
        if self._fused is not None:
            self._run_fused(job, a, b)
            return
        for j in range(a, b):
            i = job.indices[j]
            with self._seeding(i):  # SeedByIndex seeds the whole item: loading too
                raw = self._load(i)
                try:
                    sample = raw if self.transform is None else self._apply(raw)
                except Exception as exc:
                    raise slot_mod.SampleError(i, "transform") from exc
            job.write(j, i, sample)

    def _run_fused(self, job: slot_mod.BatchJob, a: int, b: int) -> None:
        """The chunk through crop_mask_ycbcr_batch, straight into the slot's image rows: one call,
        without the GIL, per run of uint8 images (another image kind goes through the Compose)."""
        flip_before, crop, flip_after, mask, color = self._fused
        run: list[tuple] = []  # (j, i, raw, src, seed, mask seed, item, layout, hflip)

        def flush() -> None:
            if not run:
                return
            j0, i0, raw0, item0, layout = run[0][0], run[0][1], run[0][2], run[0][6], run[0][7]
            image = item0.wrap(torch.empty(3, *crop.size, dtype=color.out_dtype or torch.uint8))  # its tv type
            template = _rebuild(raw0, image, raw0[1:] if isinstance(raw0, (tuple, list)) else None)
            rows = job.image_rows(template, i0, j0, j0 + len(run))
            zeros = [0] * len(run)  # each source is its window already
            torch.ops.fastprep.crop_mask_ycbcr_batch.default([r[3] for r in run], zeros, zeros, crop.size[0],
                                                             crop.size[1], mask.p, [r[5] for r in run], rows, layout,
                                                             mask.structure, color.scale, True, None,
                                                             [r[8] for r in run] if flip_before or flip_after else None)
            for j, i, raw, *_ in run:
                job.write(j, i, raw, skip_first=True)
            run.clear()

        for j in range(a, b):
            i = job.indices[j]
            with self._seeding(i):
                raw = self._load(i)
                try:
                    found = _slot_image(raw, crop, color)
                    if found is not None:
                        item, (H, W) = found
                        require_rgb(item.value, "Loader (its transform has an RGBToYCbCr step)")
                        # Compose's fused draws, in the steps' order.
                        flip = flip_before.decide() if flip_before is not None else False
                        crop_seed = crop.draw()
                        flip = flip_after.decide() if flip_after is not None else flip
                        mask_seed = mask.draw()
                        with error_context(crop, lambda item=item: describe(item.value, item.layout)):
                            # A crop larger than the image fails here.
                            win = crop.window(H, W, crop_seed, flip and flip_after is None)
                            if flip and flip_after is not None:
                                win = win.mirrored(W)  # crop then flip = a crop of the flipped image
                            src, layout = fused_source(item, win, W)
                            src = color.rgb(src, layout)
                        if run and run[0][7] != layout:
                            flush()  # one layout per batch call
                        run.append((j, i, raw, src, crop_seed, mask_seed, item, layout, flip))
                        continue
                    sample = self._apply(raw)
                except Exception as exc:
                    raise slot_mod.SampleError(i, "transform") from exc
            flush()
            job.write(j, i, sample)
        flush()


def _sampler_index(i: Any, dataset: Any) -> int:
    """A sampler's index as an int: an int (Python, numpy, 0-d tensor) in [0, len(dataset)) when
    the dataset has a length; a float would be truncated and a negative index wrap around, silently."""
    if isinstance(i, (bool, np.bool_)) or not is_int_label(i):
        raise ValueError(f"Loader: the sampler gave {i!r}; expected int indices")
    n = len(dataset) if hasattr(dataset, "__len__") else None
    if i < 0 or (n is not None and i >= n):
        raise ValueError(f"Loader: the sampler gave index {int(i)}, outside the dataset's [0, {n})")
    return int(i)


def _slot_image(raw: Any, crop: RandomCrop, color: RGBToYCbCr) -> tuple[Item, tuple[int, int]] | None:
    """The item's image and size when the slot path can take it: the image is the item itself or
    its first element, the fused op takes it, and nothing else in the item is cut by the crop (a
    mask or boxes: the item goes through the Compose, which fuses its image path too)."""
    if isinstance(raw, dict):
        return None
    s = Sample(raw, crop.layout, GEOMETRY)
    item = fused_image(s, color)
    if item is None or len(s.items) != 1 or item.index != 0:
        return None
    return item, s.size()


def _apply_to_image(transform: Any, raw: Any) -> Any:
    """A transform other than fastprep's on the item's image, a WindowedImage (JpegFile, ...) decoded whole first."""
    if isinstance(raw, (tuple, list)) and raw:
        return _rebuild(raw, transform(decode_jpeg_files(raw[0])), raw[1:])
    return transform(decode_jpeg_files(raw))


def _rebuild(raw: Any, image: Any, rest: Any) -> Any:
    """raw with its image replaced: (image, *rest) of raw's type, or image itself."""
    if rest is None:
        return image
    items = [image, *rest]
    return items if isinstance(raw, list) else tuple(items)
