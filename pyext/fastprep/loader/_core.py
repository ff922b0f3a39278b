"""fastprep.Loader: length, epochs, resume state (its arguments: loader/_settings.py; its parts: loader/__init__.py)."""

from __future__ import annotations

import functools
import logging
import warnings
import weakref
from collections.abc import Sequence
from typing import Any

from torch.utils.data import Sampler

import fastprep.loader._checkpoint as checkpoint
from fastprep.core._bad_samples import BadSamples, sample_name
from fastprep.core._rng import check_epoch
from fastprep.errors import BadSampleWarning, ResumePositionDropped
from fastprep.loader._checkpoint import PassRecord
from fastprep.loader._device_split import device_lines
from fastprep.loader._hooks import LoaderHooks
from fastprep.loader._iteration import Iteration, PassInputs, PassReports
from fastprep.loader._order import Order
from fastprep.loader._settings import LoaderSettings, SettingsViews, plan_of
from fastprep.loader._shard_order import fetch_note
from fastprep.transforms import FusionPlan, SeedByIndex


class Loader(SettingsViews):
    """Iterate batches of a dataset, made by `threads` threads in this process.

    Each item is ``dataset[i]`` (an iterable dataset's next item); with `transform`, it is
    ``dataset.load_raw(i)`` (or ``dataset[i]`` when there is no ``load_raw``; an iterable
    dataset's ``iter_raw()`` items when it has one) with `transform` applied: to the whole item
    (a structured sample as torchvision v2 takes it: masks and boxes cut with the image) when the
    transform is made of fastprep transforms only, else to its image (the item, or its first
    element). Batches are :class:`CompactBatch` es as
    :func:`fastprep.compact_collate` makes them, every field with the same role (fastprep/core/_roles.py,
    or `fields`); or, with `expand`, expanded (on `device` when given). A fused transform (a
    ``Compose`` that one op runs) writes each chunk of samples into the batch with one op call.

    Randomness: sample i of epoch e (i: its index; an iterable dataset's: its position in the
    epoch) runs under ``item_seed(seed, i, e)``: fastprep's transforms draw what
    ``SeedByIndex(dataset, seed)`` in a DataLoader gives them, whatever `threads`, in parallel.
    Other code (the dataset's own, a transform not made of fastprep's) draws from torch's shared
    generator, in parallel and unseeded; with ``deterministic=True`` it runs one sample at a time
    under one lock, torch's generator seeded per sample: SeedByIndex's bits, serialised.

    Memory: batches are written into ``depth + 1`` slots reused in turn (``2 max(depth, streams) + 2``
    with a CUDA device, pinned; streams=None counts 1: batch.slots.ring_slots). Without a device, a
    yielded batch stays valid until the next batch is asked for; ``batch.clone()`` keeps one. With a
    device, the copy runs on a side stream and a slot is reused only after its copy has completed.

    Args:
        dataset: a map-style dataset (``len`` and ``[i]``; a SeedByIndex is unwrapped, its seed and
            epoch used unless given) or an iterable one (torch's IterableDataset: read in order in
            the consumer's thread, its items transformed by the threads; no shuffle, sampler or resume).
        batch_size: samples per batch.
        transform: applied to each item in the loader threads (see above).
        shuffle: a fresh order each epoch, drawn from (seed, epoch); "shards": the shard-aware order
            for data larger than the cache (loader/_shard_order.py: shards shuffled, samples shuffled
            within `shard_window` shards at a time; the dataset says each item's shard by ``item_shards``).
            True over a remote pack larger than its ``cache_limit`` becomes "shards" (a WARNING on the
            "fastprep" logger says so and the bytes it saves); "global": the sample-level shuffle anyway.
        sampler: an iterable of indices instead (not with shuffle); its ``set_epoch`` is called by ours.
        drop_last: drop the last incomplete batch (over ranks: cut the epoch to a multiple of the
            world size instead of padding it, see `rank`).
        shard_window: with shuffle="shards", the shards whose samples are shuffled together (default 8;
            the same on every rank: it is part of the order; refused when half the dataset's
            ``cache_limit`` cannot hold that many of its largest ``shard_sizes``).
        rank, world_size: this process's part of each epoch (both or neither; default: the
            torch.distributed process group's when initialised, else the RANK / WORLD_SIZE environment
            variables torchrun sets, else 0 and 1). The ranks split one global order in lock-step,
            every rank as many batches (padded by wrapping around, or cut with drop_last); the
            state_dict of any rank resumes at any world size (loader/_ranks.py). world_size=1 reads
            everything on every rank. Not with a sampler (a DistributedSampler splits by itself).
        threads: the threads that load and transform samples (default: the CPUs this process may use).
        device: where batches go ("cuda", ...); None keeps them on the CPU.
        depth: batches prepared ahead of the consumer.
        expand: expand each batch on the device (CompactBatch.expand()), or a callable to apply.
        seed: the base seed (default: drawn from torch's generator when the Loader is made).
        fields: ``{name: role}`` for the samples' top-level fields, as CompactCollate's `fields`.
        deterministic: run code that is not fastprep's one sample at a time with torch's generator
            seeded per sample (reproducible), instead of in parallel.
        decode_on: the GPU decode split (docs/real-files.md): a device ("cuda") where each batch's
            JPEG windows are decoded, for a transform that is one fused op of a row that splits
            (crop -> mask -> YCbCr; RandomResizedCrop or Resize + CenterCrop with flips, ToDtype and
            Normalize) over items that cut windows (PackedDataset's JPEG records; JpegFiles hand
            their whole file). The threads draw the same parameters and cut each window's restart
            intervals out of the shard (no decoding); the device decodes the batch (`jpeg_decoder`)
            and runs the rest of the fused op there (resize, flips, masks, colour, dtype). Batches
            are made on that device (`device` must be None or the same); "cpu" runs the CPU decoder
            in the device stage's thread instead, with the bits of decode_on=None. A transform or item
            the split cannot take is a ValueError naming it; nothing falls back to the threads.
        streams: the device stage's threads, each making whole batches on its own CUDA stream
            (copies, decode, resize; batch/_stream_pool.py): default 4 with decode_on on CUDA, 1 on
            its CPU stand-in; None without decode_on copies in the consumer's thread.
        jpeg_decoder: the split's JPEG decoders (io/jpeg/_device_decoders.py): "auto" (nvImageCodec
            on the GPU's JPEG engines where it has them, else nvJPEG), "nvimagecodec",
            "torchvision" or "host"; what one refuses goes to the next. :meth:`describe` says which
            decoded how many.
        prestart: in a loop that calls set_epoch before each pass, make the next epoch's first
            batch while the consumer takes this epoch's last, so epochs run back to back; the next
            pass uses it only when it is exactly its own first batch (the same dataset, transform,
            seed, epoch and order), else makes it afresh. Not with a sampler, an iterable dataset
            or a device. False: every pass starts from nothing (a dataset changed in place
            between epochs, say).
        on_error: what a sample whose loading (``load_raw`` / ``dataset[i]``) or transform raises
            does: "raise" (default: the error reaches the loop, naming the sample), "skip" (the
            sample is replaced in its slot, so batches keep their size and shapes, by the first of
            the next indices i + 1, i + 2, ... (mod len) that loads and transforms, under the *bad*
            sample's seed: the same seed gives the same batches, whatever `threads`; an iterable
            dataset's, as the stream was read ahead, by the next item of its batch, wrapping around
            to the batch's first, then (its batch has no other item, or none that loads) by the
            items read before its batch in the pass, the latest first; an error raised by the
            stream itself is raised: a generator that raised cannot go on), or "warn" (as skip, and a
            :class:`~fastprep.core._bad_samples.BadSampleWarning` per bad sample the first time it is
            met, issued in the loop's thread). Counted and named in :attr:`bad_samples` (and the
            state_dict); the ``fastprep`` logger gets a one-line summary at the end of a pass that
            met new ones (INFO under "skip", WARNING under "warn"). MemoryError,
            KeyboardInterrupt, errors in batching (shapes, structure) and the Loader's own
            refusals always raise; so does a bad sample whose ``MAX_SUBSTITUTES`` substitutes all
            fail, or that has none to try (an iterable's first item alone in its batch; a dataset
            all bad): :class:`~fastprep.core._bad_samples.SubstitutesExhausted` names the indices tried.

    Attributes:
        settings: the arguments as it runs them, checked and resolved (a frozen
            :class:`~fastprep.loader._settings.LoaderSettings`); ``loader.batch_size``, ``loader.threads``,
            ... read them (read-only; ``seed`` may be set: the next pass uses it).
        hooks: named points of its work a profiler may wrap (:class:`~fastprep.loader._hooks.LoaderHooks`,
            docs/loader.md).
        bad_samples: a :class:`~fastprep.core._bad_samples.BadSamples`: ``count`` (samples replaced so
            far, in batches the loop received), ``indices``, ``names()``, ``summary()``.

    Example:
        >>> loader = Loader(dataset, 256, transform=train_tf, shuffle=True, device="cuda", expand=True)
        >>> for epoch in range(epochs):
        ...     loader.set_epoch(epoch)
        ...     for images, labels in loader:
        ...         ...
    """

    def __init__(self, dataset: Any, batch_size: int, *, transform: Any = None, shuffle: bool | str = False,
                 sampler: Sampler | Sequence[int] | None = None, drop_last: bool = False,
                 threads: int | None = None, device: Any = None, depth: int = 2, expand: Any = False,
                 seed: int | None = None, fields: dict[Any, str] | None = None, deterministic: bool = False,
                 decode_on: Any = None, prestart: bool = True, shard_window: int | None = None,
                 rank: int | None = None, world_size: int | None = None, on_error: str = "raise",
                 streams: int | None = None, jpeg_decoder: str = "auto"):
        self.epoch = 0
        if isinstance(dataset, SeedByIndex):
            seed = dataset.seed if seed is None else seed
            self.epoch = dataset.epoch
            dataset = dataset.dataset
        self.dataset, self.transform, self.sampler = dataset, transform, sampler
        self.settings, self.jpeg_decoders = LoaderSettings.build(
            dataset, transform, sampler, batch_size=batch_size, shuffle=shuffle, drop_last=drop_last, threads=threads,
            device=device, depth=depth, expand=expand, seed=seed, fields=fields, deterministic=deterministic,
            decode_on=decode_on, prestart=prestart, shard_window=shard_window, rank=rank, world_size=world_size,
            on_error=on_error, streams=streams, jpeg_decoder=jpeg_decoder)
        self.hooks = LoaderHooks()  # profile hooks (loader/_hooks.py): a pass takes them when it begins
        self.bad_samples = BadSamples("Loader", self.on_error)
        self._bad_logged = 0  # bad_samples.count when the last summary was logged
        self.device_stage = None  # the current pass's StageStats, with streams
        self.order = Order(dataset, self.batch_size, self.shuffle, sampler, self.drop_last, self.rank,
                           self.world_size, self.shard_window)
        self._pass = self._fresh_pass()  # the pass state_dict describes (loader/_checkpoint.py)
        self._resume: tuple[int, list[int] | None] | None = None  # (start, indices) of a loaded pass not yet iterated
        self._current: Any = None  # the Iteration whose deliveries count (a weak reference)
        self._restart_due = False  # set_epoch was called during a pass: the next pass starts from its epoch's start
        self.spare_ring: Any = None  # what the last whole pass left the next (loader/_ahead.py)
        self._stepped = False  # set_epoch was called since the last pass began: make epoch + 1's first ahead
        self.epoch_fetched: tuple[int, int] | None = None  # (epoch, bytes) a remote pack's last whole pass fetched
        self._fetched_from: int | None = None  # its bytes_fetched when the last pass from sample 0 began

    @property
    def plan(self) -> FusionPlan | None:
        """How the threads run `transform` (a Compose's own plan, as it is when an epoch starts)."""
        return plan_of(self.transform)

    def __len__(self) -> int:
        return self.order.batches()

    def indices(self, epoch: int | None = None) -> list[int]:
        """This rank's dataset indices of epoch `epoch` (default: the current one), in the order
        batched, from the epoch's start (a sampler's: a fresh pass of it)."""
        indices = self.order.indices(self.seed, self.epoch if epoch is None else check_epoch("Loader", epoch))
        if indices is None:
            raise TypeError("Loader.indices: an iterable dataset has no indices; it is read in its own order")
        return indices

    def set_epoch(self, epoch: int) -> None:
        """Fresh, reproducible randomness (and order, with shuffle) for epoch `epoch` from the next
        pass on; a sampler (or an iterable dataset) with ``set_epoch`` gets it too. A pass being
        iterated keeps its own epoch, and the state_dict its position, until it ends or is closed.

        After ``load_state_dict``, the checkpoint's own epoch keeps its position (the usual loop,
        ``set_epoch(epoch)`` at the top of every epoch, resumes where the checkpoint was); another
        epoch drops it with a :class:`ResumePositionDropped` warning when samples of the
        checkpoint's epoch were left, and starts from its start."""
        epoch = check_epoch("Loader", epoch)
        if self._resume is not None and epoch != self.epoch:
            left = self._left(*self._resume)
            if left:
                warnings.warn(f"Loader.set_epoch({epoch}): the loaded state_dict was at sample {self._resume[0]} of "
                              f"epoch {self.epoch} ({left} samples left); that position is dropped and epoch {epoch} "
                              f"starts from its start. Call set_epoch({self.epoch}) (or none) to resume it",
                              ResumePositionDropped, stacklevel=2)
            self._resume = None
        self.epoch, self._stepped = epoch, True
        self.order.set_epoch(self.epoch)
        if self._resume is not None:  # the checkpoint's own epoch: its pass is resumed
            return
        # A pass being iterated is left alone: its batches are its epoch's (order and seeds fixed when it
        # began), and a checkpoint taken while the consumer still takes them must count them there, not as
        # progress of `epoch` (a resume would then skip the rest of `epoch`, or repeat what was delivered).
        # Refusing instead would break loops that DataLoader takes: DistributedSampler.set_epoch, too,
        # only orders the next iter(). The next pass starts `epoch` from its start.
        if self._in_pass():
            self._restart_due = True
        else:
            self._pass = self._fresh_pass()

    def _fresh_pass(self) -> PassRecord:
        """The record of a pass of this epoch not begun: nothing of it consumed."""
        return PassRecord(self.epoch, self.seed, self.world_size, self.order.window)

    def _in_pass(self) -> bool:
        """An iteration whose deliveries count is open (not run to its end, closed or dropped)."""
        current = self._current() if self._current is not None else None
        return current is not None and not current.closed

    def _settled(self) -> PassRecord:
        """The pass state_dict describes: the current one, or, once it is over and set_epoch was
        called during it, the next (its epoch's start)."""
        if not self._in_pass():
            if self._restart_due:
                self._pass, self._restart_due = self._fresh_pass(), False
            elif self._resume is None:  # no pass under way: the next one's seed (`seed` is a public attribute)
                self._pass.seed = self.seed
        return self._pass

    def _left(self, position: int, indices: list[int] | None) -> int | None:
        """Samples the resumed epoch would still deliver from `position` (None: unknown, a
        sampler without a length)."""
        try:
            n = len(indices) if indices is not None else self.order.samples()
        except TypeError:
            return None
        if self.drop_last:
            n -= n % self.batch_size
        return max(0, n - position)

    def __iter__(self) -> Iteration:
        indices, start = None, 0
        if self._resume is not None:  # the loaded pass (its record: where it is in which order)
            (start, indices), self._resume = self._resume, None
        else:
            self._pass = self._fresh_pass()
        self._restart_due = False
        if indices is None:
            indices = self.order.indices(self.seed, self.epoch)
        self.order.check_start(start, indices)
        fetched = getattr(self.dataset, "bytes_fetched", None)
        self._fetched_from = fetched if start == 0 and isinstance(fetched, int) else None
        prefetch = getattr(self.dataset, "prefetch", None)
        if indices is not None and callable(prefetch):  # a remote pack downloads its shards in this order
            prefetch(indices[start:])
        self._pass.indices, self._pass.position = indices, start
        stepped, self._stepped = self._stepped, False
        inputs = PassInputs(self.dataset, self.transform, self.order, self.jpeg_decoders, self.hooks or None)
        reports = PassReports(self.delivered, self.pass_ended, self._swap_spare,
                              functools.partial(setattr, self, "device_stage"))
        iteration = Iteration(self.settings, inputs, reports, indices, start, self.epoch, self.seed,
                              self.epoch + 1 if stepped else None)
        self._current = weakref.ref(iteration)
        return iteration

    def delivered(self, iteration: Iteration, samples: int, bad: list[tuple] = ()) -> None:
        """The consumer received `samples` more samples of `iteration` (the resume position), with
        `bad` ones replaced: (position, index, stage, error, substitute) each, recorded (and warned
        about) here, in the consumer's thread."""
        if self._current is not None and self._current() is iteration:
            self._pass.position += samples
        for _, index, stage, exc, substitute in bad:
            name = None if self.order.iterable else sample_name(self.dataset, index)
            text = self.bad_samples.record(index, name, exc, stage=stage, substitute=substitute, warn=False)
            if text is not None:
                warnings.warn(text, BadSampleWarning, stacklevel=3)  # the frame of the loop's `for`

    def _swap_spare(self, spare: Any) -> Any:
        """What the last whole pass left (ahead.Spare), replaced by `spare`."""
        old, self.spare_ring = self.spare_ring, spare
        return old

    def pass_ended(self, epoch: int) -> None:
        """A pass of `epoch` ran to its end: log the bad samples' summary when new ones were met."""
        if self._fetched_from is not None and getattr(self.dataset, "remote", False):
            self.epoch_fetched = (epoch, self.dataset.bytes_fetched - self._fetched_from)
        count = self.bad_samples.count
        if count > self._bad_logged:
            self._bad_logged = count
            level = logging.WARNING if self.on_error == "warn" else logging.INFO  # "skip": asked to be quiet
            logging.getLogger("fastprep").log(level, "%s (epoch %d)", self.bad_samples.summary(), epoch)

    def __repr__(self) -> str:
        note = fetch_note(self.dataset, self.shuffle, self.epoch_fetched)
        return (f"Loader({type(self.dataset).__name__}, batch_size={self.batch_size}, threads={self.threads}, "
                f"on_error={self.on_error!r}, bad_samples={self.bad_samples.count}{note})")

    def describe(self) -> str:
        """What this Loader runs: its repr, then with a device, where batches are made (the decode
        split, its JPEG decoders and how many images each decoded so far; the device stage's
        streams and where its time went in the current or last pass).

        Example:
            >>> print(loader.describe())  # doctest: +SKIP
            Loader(PackedDataset, batch_size=256, threads=4, on_error='raise', bad_samples=0)
            device: cuda:0, the GPU decode split (decode_on)
            JPEG decoders: nvImageCodec hardware 12800, nvImageCodec cuda 0, libjpeg-turbo (host) 0
            device stage: 4 streams, 50 batches, busy 3.10 s, consumer waited 0.02 s
        """
        return "\n".join([repr(self), *device_lines(self.settings, self.jpeg_decoders, self.device_stage)])

    def state_dict(self) -> dict[str, Any]:
        """Where the loader is: load it into a Loader over the same dataset to resume mid-epoch
        with exactly the samples the consumer has not received, and the same bits. Self-contained:
        it holds everything the epoch's order depends on (loader/_checkpoint.py)."""
        if self.order.iterable:
            raise TypeError("Loader.state_dict: an iterable dataset cannot be resumed mid-epoch by fastprep "
                            "(its stream is its own); resume by index needs a map-style dataset")
        return checkpoint.state_of(self.settings, self.order, self.bad_samples, self._settled(), self._resume)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume from a :meth:`state_dict`: the next pass delivers exactly the samples of the
        checkpoint's epoch the consumer had not received, with the same bits, in the saved order
        (its world size and shard window, whatever this Loader's: the next epochs use this Loader's).
        A state_dict whose order cannot be made here (another shuffle, dataset length or shard
        table) is a ValueError naming the setting and both values. ``set_epoch`` of the checkpoint's
        epoch before the pass keeps the position; of another, drops it (with a warning). A pass
        being iterated when it is loaded no longer counts.

        Example:
            >>> loader.load_state_dict(checkpoint["loader"])
            >>> for epoch in range(loader.epoch, epochs):
            ...     loader.set_epoch(epoch)  # the checkpoint's epoch: continues where it stopped
            ...     for batch in loader:
            ...         ...
        """
        record, resume = checkpoint.load(self.settings, self.order, self.bad_samples, state)
        self.seed, self.epoch = record.seed, record.epoch
        if "bad_samples" in state:  # loaded with it: those were summarised by the job that met them
            self._bad_logged = self.bad_samples.count
        self._pass, self._resume, self._current, self._restart_due = record, resume, None, False
