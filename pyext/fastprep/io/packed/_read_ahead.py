"""A batch of a remote pack's samples read by range together (PackedDataset.fetch_ahead, which the
Loader calls with a chunk's indices before loading them): each sample's window is found by a trial
run of its loading and transform that stops where it would read bytes (window_batch.Probed), then
the windows of all are read at once (RemotePack.read_ahead), and the real run decodes from them.

The trial runs under the sample's own seeds (the Loader's SampleStream, reset for the real run), so
it draws the window the real run will; where it does not (a transform drawing from elsewhere), the
real run's decode fetches what it lacks, as a read of one sample would: the bits never depend on
what was read ahead. A trial that raises reads nothing ahead; its sample's real run raises (and is
skipped under on_error) as before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import fastprep.io._pack_format as fmt
from fastprep.io.remote._window_batch import Probed, WindowRead

PASSES = 2  # a second trial for the records whose head the first needed (their EXIF orientation)


def fetch_ahead(ds: Any, keys: Sequence[int], trial: Callable[[int], Any]) -> int:
    """Reads the windows that trial(j) (sample keys[j]'s loading and transform) decodes from `ds`'s
    records read by range, all together; returns the round trips taken (0: nothing to read)."""
    remote, entries = ds._source, ds._entries  # noqa: SLF001 (the dataset's own helper)
    todo = [j for j, i in enumerate(keys) if 0 <= i < len(entries) and entries["kind"][i] == fmt.KIND_JPEG
            and remote.uses_ranges(int(entries["shard"][i]), ds._total, ds._mean_record)]  # noqa: SLF001
    waves = 0
    for n in range(PASSES):
        if not todo:
            break
        found = _probe(remote, trial, todo)
        reads = [WindowRead(ds._shards[int(entries["shard"][i])][0], int(entries["offset"][i]),  # noqa: SLF001
                            int(entries["length"][i]), int(entries["height"][i]), window)
                 for i, window in found.values()]
        if reads:
            waves += remote.read_ahead(reads, keep=n > 0)
        todo = [j for j, (_, window) in found.items() if window is None]
    return waves


def _probe(remote: Any, trial: Callable[[int], Any], todo: list[int]) -> dict[int, tuple[int, Any]]:
    """{j: (record, window or None for its head)} for the trials of `todo` that stopped at a read."""
    found: dict[int, tuple[int, Any]] = {}
    remote.ahead.probing = True
    try:
        for j in todo:
            try:
                trial(j)
            except Probed as stop:
                if stop.index is not None:
                    found[j] = (stop.index, stop.window)
            except Exception:  # noqa: BLE001, S112 (the real run raises it, under the Loader's on_error)
                continue
    finally:
        remote.ahead.probing = False
    return found
