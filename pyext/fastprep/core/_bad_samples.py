"""The bad-sample policy: what the Loader, a source or ``pack`` does with a sample that cannot be
read, decoded or transformed (a truncated file, a format nothing decodes, a transform that raises).

``on_error``:
    "raise" (default): the error propagates, naming the sample (as before this policy existed).
    "skip": the sample is replaced (Loader, sources) or left out (pack), and recorded in a
    :class:`BadSamples` (counted and named: the Loader's summary, the monitor, state_dict).
    "warn": as "skip", and one :class:`BadSampleWarning` per bad sample the first time it is met.

The one substitution rule (Loader and sources share it, so a DataLoader over a source and the
Loader give the same samples): a bad sample at dataset index i is replaced by the first index of
i + 1, i + 2, ... (mod n) that loads, transformed under the *bad sample's* seed (so the batch keeps
its size and shapes, and a run with the same seed is the same run). Up to ``MAX_SUBSTITUTES``
consecutive indices are tried; past that the epoch stops with an error naming them: a dataset
whose samples all fail is a bug to see, not to skip.

An iterable dataset has no index to go to: its stream was read ahead, batch by batch, so a bad item
is replaced by the items at hand (:func:`stream_substitutes`): the next items of its own batch
(wrapping around to the batch's first), then the items read before the batch in the pass, the
latest first; the same stream and seed give the same batches, whatever the threads.
"""

from __future__ import annotations

import threading
import warnings
from typing import Any

from fastprep.errors import MAX_SUBSTITUTES, BadSampleWarning, describe_error

ON_ERROR = ("raise", "skip", "warn")
NEVER_SKIPPED = (MemoryError,)  # not the sample's fault: skipping would hide the machine's state
MAX_NAMED = 100  # names kept for the summary; the count and the indices are kept whole


class SampleError(Exception):
    """Raised in a Loader thread: sample `index` failed in `stage`; the cause is the user's error.
    `index_kind`: what the index is (a dataset index, or a position in an iterable dataset's epoch)."""

    def __init__(self, index: int, stage: str, index_kind: str = "dataset index"):
        super().__init__(f"sample {index} failed in {stage}")
        self.index, self.stage, self.index_kind = index, stage, index_kind


def reraise(exc: BaseException) -> None:
    """Raise a worker's failure in the consumer: the user's own exception (same type) with a note
    naming the sample, so `except KeyError` around the loop still works."""
    if isinstance(exc, SampleError) and exc.__cause__ is not None:
        cause = exc.__cause__
        note = f"fastprep.Loader: raised by sample {exc.index} ({exc.index_kind}) in {exc.stage}"
        if hasattr(cause, "add_note"):
            cause.add_note(note)
            raise cause
        raise RuntimeError(f"{note}: {cause!r}") from cause
    raise exc


def check_on_error(who: str, on_error: Any) -> str:
    """`on_error` checked: one of ON_ERROR, else a ValueError naming `who`'s argument and the value."""
    if not isinstance(on_error, str) or on_error not in ON_ERROR:
        raise ValueError(f"{who}: expected on_error to be one of {', '.join(map(repr, ON_ERROR))}, got {on_error!r}")
    return on_error


def substitutes(index: int, n: int) -> range:
    """The indices tried, in order, in place of bad sample `index` of an `n`-sample dataset
    (taken mod n by the caller): index + 1, ..., index + MAX_SUBSTITUTES, never index itself."""
    return range(index + 1, index + 1 + min(MAX_SUBSTITUTES, max(n - 1, 0)))


def stream_substitutes(j: int, n: int, earlier: int) -> list[int]:
    """The items tried, in order, in place of the bad item at offset `j` of an iterable dataset's
    batch of `n` items, `earlier` items read before the batch in the pass being at hand: offsets in
    the batch, j + 1, ..., n - 1, 0, ..., j - 1 (the batch's other items), then -1, -2, ...,
    -earlier (the items read before it, the latest first); at most MAX_SUBSTITUTES.

    Example:
        >>> stream_substitutes(3, 4, 2)  # the last of a batch of 4, two items read before it
        [0, 1, 2, -1, -2]
    """
    own = [(j + k) % n for k in range(1, n)]
    return (own + [-k for k in range(1, earlier + 1)])[:MAX_SUBSTITUTES]


def sample_name(dataset: Any, index: int) -> str | None:
    """What names sample `index` of `dataset` in messages: the source's own ``sample_name(i)``
    (fastprep.io's sources: a path, a key), its file (an ImageFolder's ``samples[i][0]``), its record
    (``where(i)``: a PackedDataset's shard, record and source name); None when the dataset says
    nothing (the caller writes "item i"). Never raises."""
    try:
        own = getattr(dataset, "sample_name", None)
        name = own(index) if callable(own) else None
        if name is not None:
            return str(name)
        where = getattr(dataset, "where", None)
        if callable(where):
            return str(where(index))
        samples = getattr(dataset, "samples", None)
        if isinstance(samples, (list, tuple)) and 0 <= index < len(samples):
            entry = samples[index]
            return str(entry[0] if isinstance(entry, (tuple, list)) and entry else entry)
    except Exception:  # noqa: BLE001 (a name is a courtesy: a dataset whose lookup fails is named by index)
        return None
    return None


class BadSamples:
    """The bad samples met so far (thread-safe): their dataset indices, names and causes.

    Attributes:
        count: how many times a bad sample was met (an index met again in a later epoch counts
            again: it was skipped again).
        indices: the distinct dataset indices met, sorted.
    """

    def __init__(self, who: str, on_error: str = "raise"):
        self.who, self.on_error = who, check_on_error(who, on_error)
        self.count = 0
        self._seen: dict[int, str] = {}  # index -> "name: cause", insertion order
        self._lock = threading.Lock()

    @property
    def indices(self) -> list[int]:
        with self._lock:
            return sorted(self._seen)

    def record(self, index: int, name: str | None, exc: BaseException, *, stage: str | None = None,
               substitute: int | None = None, warn: bool = True) -> str | None:
        """Sample `index` (named `name`, e.g. its path) failed with `exc` (in `stage`, replaced by
        sample `substitute`): count it. The first time it is met under on_error="warn", return the
        warning's text, and issue it unless `warn` is False (the Loader issues it in the consumer's
        thread, where ``warnings.catch_warnings`` and filters apply); else return None."""
        line = f"{name if name else f'item {index}'}: {describe_error(exc)}"
        if stage:
            line += f" (in {stage})"
        with self._lock:
            self.count += 1
            first = index not in self._seen
            if first:
                self._seen[index] = line if len(self._seen) < MAX_NAMED else ""
        if not first or self.on_error != "warn":
            return None
        text = f"{self.who}: skipped bad sample {index} ({line})"
        if substitute is not None:
            text += f"; sample {substitute} took its place"
        if warn:
            warnings.warn(text, BadSampleWarning, stacklevel=3)
        return text

    def names(self) -> list[str]:
        """'name: cause' of each distinct bad sample, in the order met (the first MAX_NAMED)."""
        with self._lock:
            return [line for line in self._seen.values() if line]

    def summary(self) -> str:
        """One line: how many were skipped, and the first few by name."""
        if not self.count:
            return f"{self.who}: no bad samples"
        names = self.names()
        shown = "; ".join(names[:3]) + (f"; and {len(self._seen) - 3} more" if len(self._seen) > 3 else "")
        return (f"{self.who}: skipped {self.count} bad sample{'s' if self.count != 1 else ''} "
                f"({len(self._seen)} distinct): {shown}")

    def state_dict(self) -> dict:
        with self._lock:
            return {"count": self.count, "indices": sorted(self._seen), "names": dict(self._seen)}

    def load_state_dict(self, state: dict) -> None:
        if not isinstance(state, dict) or not isinstance(state.get("indices", []), (list, tuple)):
            raise ValueError(f"{self.who}.load_state_dict: expected bad_samples to be a dict from "
                             f"BadSamples.state_dict(), got {state!r:.80}")
        with self._lock:
            self.count = int(state.get("count", 0))
            named = state.get("names", {})
            self._seen = {int(i): named.get(i, named.get(str(i), "")) for i in state.get("indices", [])}

    def __repr__(self) -> str:
        return f"BadSamples({self.who!r}, on_error={self.on_error!r}, count={self.count}, indices={self.indices})"
