"""fetch="auto": whole shards or range reads, chosen from what the pack, the cache and the link
cost, and said (PackedDataset.fetch_mode; a log line at INFO on the ``fastprep`` logger each time
it turns between the two).

The rule (docs/remote.md, "Windows over the network"):

- the pack fits cache_limit (or there is none): whole shards. One pass fills the cache, later epochs
  read local disk; a range read would fetch the same windows again every epoch.
- the pack is larger than the cache and no epoch order is known (random access): by range. A random
  read of a shard that is not cached would fetch the whole shard for one sample.
- the pack is larger than the cache and an epoch's order is known (the Loader gives it; the
  shard-aware order reads each shard once an epoch): whole shards, streamed ahead at the link's
  bandwidth, unless the link measured so far is slow enough that the bytes a range read spares cost
  more time than its round trip, shared by the samples in flight together (a batch's chunk):
  ``(1 - share) x record / bandwidth > latency / IN_FLIGHT``, `share` the part of a record a window
  moved (measured; SHARE until some were read), latency the quickest small request seen, bandwidth
  from the largest transfer seen (bytes over its time less one latency). Without a bandwidth
  measured yet: whole shards.
"""

from __future__ import annotations

import logging
import threading

SHARE = 0.4  # a record's part a window by range moves, before any was measured (a 256^2 of 1024^2: 0.3-0.4)
IN_FLIGHT = 32  # samples whose range reads share one round trip (a Loader chunk read together)
MIN_TRANSFER = 1 << 20  # bytes a transfer needs to tell the bandwidth (a smaller one is mostly latency)


def size(nbytes: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{int(nbytes)} B"


class LinkCost:
    """What this process measured of its store: the quickest small request (latency), the
    bandwidth of the largest transfer, and the part of a record the windows read by range moved."""

    def __init__(self) -> None:
        self.latency: float | None = None
        self.bandwidth: float | None = None
        self._largest = 0
        self.moved = self.records = 0
        self._lock = threading.Lock()

    def request(self, nbytes: int, seconds: float) -> None:
        """One request (or a wave of concurrent ones) of `nbytes` that took `seconds`."""
        with self._lock:
            if nbytes < MIN_TRANSFER:
                self.latency = seconds if self.latency is None else min(self.latency, seconds)
            elif nbytes >= self._largest:
                self._largest = nbytes
                self.bandwidth = nbytes / max(seconds - (self.latency or 0.0), 1e-6)

    def ranged(self, moved: int, records: int) -> None:
        """`moved` bytes read by range for the windows of records totalling `records` bytes."""
        with self._lock:
            self.moved += moved
            self.records += records

    @property
    def share(self) -> float:
        return self.moved / self.records if self.records else SHARE

    def __getstate__(self) -> dict:  # measured in each process anew
        return {"fresh": True}

    def __setstate__(self, state: dict) -> None:
        self.__init__()


def choose(fetch: str, total: int, limit: int | None, ordered: bool, link: LinkCost,
           mean_record: float) -> tuple[str, str]:
    """("shards" or "ranges", why) for a pack of `total` bytes (records of `mean_record` bytes)."""
    if fetch != "auto":
        return fetch, f"fetch={fetch!r}"
    if limit is None or total <= limit:
        fits = "there is no cache_limit" if limit is None else f"the pack ({size(total)}) fits cache_limit " \
                                                               f"({size(limit)})"
        return "shards", f"auto: {fits}: one pass fills the cache, later epochs read local disk"
    larger = f"the pack ({size(total)}) is larger than cache_limit ({size(limit)})"
    if not ordered:
        return "ranges", f"auto: {larger} and no epoch order is known: a random read would fetch a whole shard " \
                         f"per sample"
    if link.bandwidth is None or link.latency is None:
        return "shards", f"auto: {larger}, an epoch order is known (whole shards, streamed ahead); no bandwidth " \
                         f"measured yet"
    spared = (1 - link.share) * mean_record / link.bandwidth
    trip = link.latency / IN_FLIGHT
    measured = (f"a window by range spares {size((1 - link.share) * mean_record)} a sample, "
                f"{spared * 1e3:.3g} ms at {size(link.bandwidth)}/s, against {trip * 1e3:.3g} ms of a "
                f"{link.latency * 1e3:.3g} ms round trip shared by {IN_FLIGHT}")
    if spared > trip:
        return "ranges", f"auto: {larger}, an epoch order is known, and the link is slow: {measured}"
    return "shards", f"auto: {larger}, an epoch order is known (whole shards, streamed ahead): {measured}"


def announce(url: str, choice: tuple[str, str], said: list) -> None:
    """Logs the choice at INFO when it changes between shards and ranges (`said`: the last one said,
    updated; not when only the measured figures in its reason moved)."""
    if said and said[-1][0] == choice[0]:
        return
    said[:] = [choice]
    logging.getLogger("fastprep").info("PackedDataset(%s): fetch='auto' reads %s (%s)", url,
                                       "whole shards" if choice[0] == "shards" else "JPEG windows by range",
                                       choice[1])
