"""Bytes and requests a monitored loader's dataset fetched from remote storage, per sample and per
second.

Duck-typed: a dataset with a ``bytes_fetched`` counter (fastprep.io.PackedDataset over a URL) found
as the loader's ``.dataset`` (a DataLoader, a fastprep.Loader), through a wrapper's ``.loader`` (a
DevicePrefetcher) or ``.source``; its requests from a ``fetch_requests`` counter, or its remote
store's ``requests`` (a PackedDataset's ``_source.store``). A PackedDataset's store keeps both in
cells its DataLoader's worker processes share (fastprep.io.remote._shared): their reads count here.
"""

from __future__ import annotations

from typing import Any

from fastprep.batch._compact import CompactBatch

WRAPPED = ("loader", "source")  # where wrappers (DevicePrefetcher's .loader; others' .source) keep the loader


def fetching_dataset(batches: Any) -> Any:
    """The dataset with a ``bytes_fetched`` counter behind `batches`, or None."""
    seen = 0
    while batches is not None and seen < 4:
        dataset = getattr(batches, "dataset", None)
        if isinstance(getattr(dataset, "bytes_fetched", None), int):
            return dataset
        batches = next((getattr(batches, name) for name in WRAPPED if getattr(batches, name, None) is not None), None)
        seen += 1
    return None


def fetch_requests(dataset: Any) -> int:
    """The requests the dataset made to remote storage (0 when it does not say)."""
    requests = getattr(dataset, "fetch_requests", None)
    if not isinstance(requests, int):
        requests = getattr(getattr(getattr(dataset, "_source", None), "store", None), "requests", 0)
    return requests if isinstance(requests, int) else 0


def batch_len(batch: Any) -> int:
    """Samples in a batch: a tensor's (or array's) first dimension; in a tuple or list, its first
    collated field's (a tensor: (images, labels), or (a list of images, labels)), else its first
    item's when that is a tuple, list or dict, else its length (its items are samples); a dict's
    first value's; a fastprep.Loader's CompactBatch's data's."""
    if isinstance(batch, CompactBatch):  # a fastprep.Loader's
        batch = batch.data
    if isinstance(batch, dict):
        return batch_len(next(iter(batch.values()))) if batch else 0
    shape = getattr(batch, "shape", None)
    if shape is not None:
        return int(shape[0]) if len(shape) else 1
    if isinstance(batch, (tuple, list)):
        field = next((x for x in batch if len(getattr(x, "shape", ())) >= 1), None)
        if field is not None:
            return int(field.shape[0])
        return batch_len(batch[0]) if batch and isinstance(batch[0], (tuple, list, dict)) else len(batch)
    return 1


class FetchMeter:
    """Counts the samples the loop received and reads the dataset's ``bytes_fetched`` (and its
    requests: :func:`fetch_requests`) against them.

    Args:
        dataset: anything with an int ``bytes_fetched`` attribute that only grows.

    Example:
        >>> meter = FetchMeter(packed)          # a PackedDataset over a URL
        >>> meter.begin(time.perf_counter())
        >>> meter.count(batch)                  # each batch the loop receives
        >>> meter.live(time.perf_counter())     # ' | 41.2 kB/sample, 12.3 MB/s, 40 req/s fetched' (since the last call)
    """

    def __init__(self, dataset: Any):
        self.dataset = dataset
        self.bytes = self.samples = self.requests = 0  # over the ended passes
        self.seconds = 0.0
        self._pass = (0, 0.0, 0)  # bytes_fetched, the clock and the requests when the running pass began
        self._shown = (0, 0, 0.0, 0)  # bytes_fetched, samples, the clock and the requests at the last live line
        self._pass_samples = 0
        self._running = False

    def begin(self, now: float) -> None:
        fetched, requests = self.dataset.bytes_fetched, fetch_requests(self.dataset)
        self._pass, self._pass_samples = (fetched, now, requests), 0
        self._shown = (fetched, self.samples, now, requests)
        self._running = True

    def count(self, batch: Any) -> None:
        self._pass_samples += batch_len(batch)

    def live(self, now: float) -> str:
        """The live line's part since the last call ('' while nothing was fetched)."""
        fetched, samples = self.dataset.bytes_fetched, self.samples + self._pass_samples
        requests = fetch_requests(self.dataset)
        b0, s0, t0, r0 = self._shown
        self._shown = (fetched, samples, now, requests)
        if fetched == b0 or samples == s0 or now <= t0:
            return ""
        rate = f", {(requests - r0) / (now - t0):.3g} req/s" if requests > r0 else ""
        return f" | {size((fetched - b0) / (samples - s0))}/sample, {size((fetched - b0) / (now - t0))}/s{rate} fetched"

    def totals(self, now: float) -> tuple[int, int, float]:
        """Bytes fetched, samples received and seconds over every pass, the running one so far."""
        if not self._running:
            return self.bytes, self.samples, self.seconds
        b0, t0, _ = self._pass
        return (self.bytes + self.dataset.bytes_fetched - b0, self.samples + self._pass_samples,
                self.seconds + now - t0)

    def request_total(self) -> int:
        """Requests made over every pass, the running one so far."""
        if not self._running:
            return self.requests
        return self.requests + fetch_requests(self.dataset) - self._pass[2]

    def end(self, now: float) -> None:
        self.requests = self.request_total()
        self.bytes, self.samples, self.seconds = self.totals(now)
        self._pass_samples, self._running = 0, False

    def pack(self) -> tuple[int, int]:
        """(samples in an epoch, the pack's bytes) of the dataset, to set the bytes fetched per epoch
        against the pack's size; 0 for what it does not say (no ``__len__``, no ``shard_sizes``)."""
        try:
            samples = len(self.dataset)
        except TypeError:
            samples = 0
        sizes = getattr(self.dataset, "shard_sizes", None)
        return samples, sum(sizes) if isinstance(sizes, (list, tuple)) else 0


def size(n: float) -> str:
    """Bytes with 3 significant digits in B, kB, MB or GB (powers of 1000): '41.2 kB'."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.3g} B"
