"""Stopping a loader's iterator when its consumer stops early (a `break`, an error): the
DevicePrefetcher, fastprep.monitor and the tools' measurements all do it, here once."""

from __future__ import annotations

from typing import Any


def stop_workers(it: Any) -> bool:
    """Stop a DataLoader iterator's worker processes now rather than when it is collected, unless
    the DataLoader keeps them across epochs (persistent_workers: its next iter() reuses this very
    iterator and its workers). True when `it` is such an iterator, stopped or kept."""
    shutdown = getattr(it, "_shutdown_workers", None)
    if not callable(shutdown):
        return False
    if not getattr(it, "_persistent_workers", False):
        shutdown()
    return True


def stop_iterator(it: Any) -> None:
    """Stop a loader iterator now: a DataLoader's workers (see stop_workers), or a generator-based
    loader's threads (fastprep.Loader's iterator: its close())."""
    if not stop_workers(it):
        close = getattr(it, "close", None)
        if callable(close):
            close()
