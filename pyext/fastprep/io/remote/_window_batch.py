"""A batch's windows read by range together: every record's head (meta block, restart index, JPEG
header) and window rows requested at once, in as few round trips as the index allows, instead of
two round trips per sample one after another.

Wave 1 asks, for each record, what it can already name: the rows of its window when its head is in
memory (exact, from the restart index), else its first FIRST_READ bytes, and, where at most GUESSES
records lack their head, a guess at the window's rows (a JPEG's MCU rows spread over its bytes
about evenly: the window's share of the rows, widened by MARGIN of the record each way). Later
waves ask only what the earlier ones missed (a head longer than FIRST_READ, rows outside the
guess): a batch costs one round trip when its heads are in memory or every guess held, else two
(rarely three).

Why only a few guesses: a batch waits for its slowest record. Measured on 1024^2 photos (256^2
windows at random places), a 3% margin misses 38% of windows (moving 36% of the record, against 28%
for the exact rows), 5% misses 18% (39%): for a chunk of 8 or more records some guess almost always
misses, so the second round trip is taken anyway and the guesses' bytes bought nothing; for one
or two records (a decode of its own, a small chunk) a guess saves the round trip more often than not.

What comes back is held for the reading thread (:class:`Ahead`) until its sample's decode asks for
the window (RemotePack.window_record), which checks it (CRCs) as any read by range: nothing read
ahead is trusted unchecked. A span that failed or came back short is just not there: the sample's
own read fetches it, under the store's Retry, and names the record if it cannot.
"""

from __future__ import annotations

import struct
import threading
import time
from typing import NamedTuple

import fastprep.io.remote._ranges as rr
from fastprep.errors import ShardFormatError

MARGIN = 0.03  # a guessed row span is widened by this share of the record each way
GUESSES = 2  # records lacking their head that still get a guess at their rows (see the module)
WAVES = 3  # the head (one read, or two when longer than FIRST_READ), then the rows


class WindowRead(NamedTuple):
    """One record's window to read ahead: where the record is, the image's size from the index,
    and the window (top, left, height, width) at full scale; `window` None: its head only."""

    name: str
    offset: int
    length: int
    height: int
    window: tuple[int, int, int, int] | None


def guess_rows(length: int, height: int, window: tuple[int, int, int, int]) -> tuple[int, int]:
    """A span of the record likely to hold the window's MCU rows, before its restart index is read:
    the window's rows (with one 16-pixel MCU row each side, for upsampling) as a share of the record,
    widened by MARGIN of it each way."""
    top, _, h, _ = window
    lo = max(0.0, (top - 16) / height - MARGIN)
    hi = min(1.0, (top + h + 16) / height + MARGIN)
    return int(lo * length), min(length, int(hi * length) + 1)


def missing(needed: list[tuple[int, int]], have: list[tuple[int, bytes]]) -> list[tuple[int, int]]:
    """The parts of the ranges `needed` that no (start, bytes) in `have` covers, coalesced."""
    out: list[tuple[int, int]] = []
    spans = sorted((a, a + len(p)) for a, p in have)
    for a, b in needed:
        for s, e in spans:
            if e <= a or s >= b:
                continue
            if s > a:
                out.append((a, s))
            a = max(a, e)
            if a >= b:
                break
        if a < b:
            out.append((a, b))
    return rr.coalesce(out, gap=1)


def head_of(parts: list[tuple[int, bytes]], length: int, where: str) -> tuple[bytes | None, int]:
    """(the head, when the part at offset 0 holds all of it; the bytes it needs): what a record's
    parts read so far give (ShardFormatError: a corrupt meta block)."""
    first = b""
    for a, p in sorted(parts, key=lambda ap: ap[0]):  # the bytes read from offset 0 on, without a gap
        if a > len(first):
            break
        first = first[:a] + p if a + len(p) > len(first) else first
    if len(first) < rr.META_BYTES:
        return None, rr.FIRST_READ
    need = rr.needed_head(first, length, where)
    return (bytes(first[:need]), need) if len(first) >= need else (None, need)


class Probed(BaseException):  # noqa: N818 (not an error: a trial run's stop, past any `except Exception`)
    """Raised in a trial run of a sample (PackedDataset.fetch_ahead) where it would read bytes: the
    record (`index`; None: one not read by range) and the window its decode asks for (None: the
    record's head, for its EXIF orientation). Nothing is read."""

    def __init__(self, index: int | None, window: tuple[int, int, int, int] | None = None):
        super().__init__(index, window)
        self.index, self.window = index, window


class Ahead(threading.local):
    """The parts read ahead for this thread's samples: {(shard name, offset): [(start, bytes)]},
    replaced by each batch (parts a sample never asked for go with it)."""

    def __init__(self) -> None:
        self.parts: dict[tuple[str, int], list[tuple[int, bytes]]] = {}
        self.probing = False

    def take(self, name: str, offset: int) -> list[tuple[int, bytes]]:
        return self.parts.pop((name, offset), [])


def read_windows(remote, reads: list[WindowRead]) -> int:
    """Reads the reads' heads and windows together into ``remote.ahead`` (RemotePack), heads kept
    in its head cache; returns the round trips (waves of requests) it took."""
    parts: dict[int, list[tuple[int, bytes]]] = {j: [] for j in range(len(reads))}
    heads: dict[int, bytes] = {}
    for j, r in enumerate(reads):
        head = remote.cached_head(r.name, r.offset)
        if head is not None:
            heads[j] = head
    failed: set[int] = set()
    waves = 0
    guess = len(reads) - len(heads) <= GUESSES
    for _ in range(WAVES):
        asks: list[tuple[int, int, int]] = []  # (read, start, end) in the record
        for j, r in enumerate(reads):
            if j in failed:
                continue
            try:
                todo = _todo(r, heads, parts[j], j, guess)
            except (ShardFormatError, struct.error):  # a corrupt record: its own read names it
                failed.add(j)
                continue
            asks.extend((j, a, b) for a, b in todo)
        if not asks:
            break
        waves += 1
        start = time.monotonic()
        got = remote.store.read_spans([(reads[j].name, reads[j].offset + a, reads[j].offset + b)
                                       for j, a, b in asks])
        remote.link.request(sum(len(p) for p in got if p is not None), time.monotonic() - start)
        for (j, a, _), data in zip(asks, got):
            if data is None:
                failed.add(j)  # read again, under the Retry, when its sample asks
            else:
                parts[j].append((a, data))
    windows = [j for j, r in enumerate(reads) if r.window is not None and j not in failed]
    remote.link.ranged(sum(len(p) for j in windows for _, p in parts[j]), sum(reads[j].length for j in windows))
    for j, r in enumerate(reads):
        if j in heads:
            remote.keep_head(r.name, r.offset, heads[j])
        if j not in failed and parts[j]:
            remote.ahead.parts[(r.name, r.offset)] = parts[j]
    return waves


def _todo(r: WindowRead, heads: dict[int, bytes], parts: list[tuple[int, bytes]], j: int,
          guess: bool) -> list[tuple[int, int]]:
    """What read `r` (number j) still needs: its head's missing bytes (and, with `guess`, a guess at
    its rows, on the first wave), else its window's rows not yet read."""
    where = f"{r.name} at {r.offset}"
    if j not in heads:
        head, need = head_of(parts, r.length, where)
        if head is None:
            first = not parts
            span = [(0, min(r.length, max(need, rr.FIRST_READ if first else need)))]
            if first and guess and r.window is not None:
                span.append(guess_rows(r.length, r.height, r.window))
            return missing(rr.coalesce(span), parts)
        heads[j] = head
    if r.window is None:
        return []
    return missing(rr.window_ranges(heads[j], r.length, r.window, where), [(0, heads[j]), *parts])
