"""Seeds for fastprep's random ops.

Every random op takes an explicit int64 `seed` and draws all its randomness from the counter-based
generator defined in fastprep/core/_counter_rng.py (csrc/kernels/counter_rng.h in C++). The helpers
here draw those seeds from torch's generator, so `torch.manual_seed` and the DataLoader's
per-worker seeding make fastprep pipelines reproducible with no extra state.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

import fastprep.core._args as args
import fastprep.core._counter_rng as counter_rng

# The SampleStream draw_seed() takes from in this thread when given no generator.
_thread = threading.local()


def _draw(generator: torch.Generator | None, count: int = 1) -> int:
    """The next int64 seed from `generator` (torch's default one when None), `count - 1` skipped."""
    out = getattr(_thread, "seed_out", None)
    if out is None:
        with torch.inference_mode(False):  # a normal tensor: refilled in place in and out of inference mode
            out = _thread.seed_out = torch.empty((), dtype=torch.int64)
    if count > 1:
        torch.empty(count - 1, dtype=torch.int64).random_(args.INT64_MIN, args.INT64_MAX, generator=generator)
    # torch.randint(lo, hi, ()) is empty(()).random_(lo, hi): the same draw, less the allocation
    # and size parsing (0.6 us of 1.6, twice per sample in a fused pipeline).
    return int(out.random_(args.INT64_MIN, args.INT64_MAX, generator=generator))


def draw_seed(generator: torch.Generator | None = None) -> int:
    """A fresh int64 seed from `generator`; when None, from this thread's sample stream (inside
    :func:`thread_seeded` or a :class:`SampleStream`: fastprep.Loader's threads), else from torch's
    default generator."""
    if generator is None:
        stream = getattr(_thread, "stream", None)
        if stream is not None:
            return stream.next()
    return _draw(generator)


def draw_seeds(count: int) -> list[int]:
    """The next `count` seeds draw_seed() would return (this thread's stream, else torch's default
    generator), in one call: a tensor's elements are drawn one after another, as single draws."""
    stream = getattr(_thread, "stream", None)
    if stream is not None:
        return [stream.next() for _ in range(count)]
    outs = getattr(_thread, "seed_outs", None)
    if outs is None:
        outs = _thread.seed_outs = {}
    out = outs.get(count)
    if out is None:
        with torch.inference_mode(False):  # refilled in place in and out of inference mode, as draw_seed's
            out = outs[count] = torch.empty(count, dtype=torch.int64)
    return out.random_(args.INT64_MIN, args.INT64_MAX).tolist()


class SampleStream:
    """The seeds draw_seed() hands out in this thread inside ``with stream:``: those torch's
    generator seeded with `seed` gives (what :func:`seeded`, and SeedByIndex, make draw_seed
    return), without touching state other threads share. The first ``len(draws)`` come from
    `draws` (``seeded_draws`` of a whole chunk's seeds), the rest from a generator seeded when one
    is first needed; `pos` counts the seeds handed out."""

    __slots__ = ("seed", "draws", "pos", "generator", "outer")

    def __init__(self, seed: int, draws: Any = ()):
        self.reset(seed, draws)

    def reset(self, seed: int, draws: Any = ()) -> SampleStream:
        """This stream for another sample (a chunk's samples reuse one)."""
        self.seed, self.draws, self.pos, self.generator = seed, draws, 0, None
        return self

    def next(self) -> int:
        pos = self.pos
        self.pos = pos + 1
        if pos < len(self.draws):
            return int(self.draws[pos])
        if self.generator is not None:
            return _draw(self.generator)
        own = getattr(_thread, "own", None)
        if own is None:
            own = _thread.own = torch.Generator()
        self.generator = own.manual_seed(self.seed)  # this thread's: one stream at a time uses it
        return _draw(own, pos + 1)

    def __enter__(self) -> SampleStream:
        self.outer = getattr(_thread, "stream", None)
        if self.outer is not None:
            self.outer.generator = None  # an outer stream's generator is reseeded when it resumes
        _thread.stream = self
        return self

    def __exit__(self, *exc: Any) -> None:
        _thread.stream = self.outer
        if self.generator is not None and self.outer is not None:
            self.outer.generator = None


def thread_seeded(seed: int) -> SampleStream:
    """Inside the block, draw_seed() in this thread (every fastprep transform's draws) returns what
    torch's generator seeded with `seed` would (as :func:`seeded`), without touching state other
    threads share."""
    return SampleStream(args.check_seed("seed", seed))


# One seed check for the ops and the seed helpers (fastprep/core/_args.py, which ops.checks re-exports); the owner's
# name (SeedByIndex, Loader, CompactMap, ...) leads its message as an op's name does.
seed_argument = args.op_seed


def check_epoch(owner: str, epoch: Any) -> int:
    """An epoch number: an int (Python or numpy) in [0, 2^63 - 1]."""
    if isinstance(epoch, (bool, np.bool_)) or not isinstance(epoch, (int, np.integer)) or \
            not 0 <= epoch <= args.INT64_MAX:
        raise ValueError(f"{owner}: expected epoch to be an int >= 0, got {epoch!r}")
    return int(epoch)


def random_word(seed: int, counter: int) -> int:
    """Word `counter` (a uint64, as a Python int) of the stream of `seed`."""
    seed = args.check_seed("seed", seed)
    if isinstance(counter, (bool, np.bool_)) or not isinstance(counter, (int, np.integer)) \
            or not 0 <= counter < 2**64:
        raise ValueError(f"expected counter to be an int in [0, 2**64), got {counter!r}")
    return counter_rng.random_word(seed, int(counter))


def derive_seed(seed: int, stream: int) -> int:
    """The int64 seed of sub-stream `stream` of `seed` (sample i of a batch uses stream i)."""
    return counter_rng.derive_seed(args.check_seed("seed", seed), args.check_seed("stream", stream))


def key_stream(key: int | str | bytes) -> int:
    """The sub-stream number of a sample key: an int index as it is; a str or bytes key (a file
    path, a record id) through a 64-bit BLAKE2b hash, stable across processes and machines
    (Python's hash() is salted per process)."""
    if isinstance(key, (int, np.integer)) and not isinstance(key, (bool, np.bool_)):
        return args.check_seed("key", key)
    if isinstance(key, str):
        key = key.encode()
    if isinstance(key, bytes):
        return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little", signed=True)
    raise TypeError(f"expected key to be an int, str or bytes, got {type(key).__name__} ({key!r})")


def item_seed(seed: int, key: int | str | bytes, epoch: int = 0) -> int:
    """The seed that sample `key` of epoch `epoch` runs under: one function for SeedByIndex in a
    DataLoader and for fastprep.ray on a Ray cluster, so both give the same samples."""
    return derive_seed(derive_seed(seed, args.check_seed("epoch", epoch)), key_stream(key))


def item_seeds(seed: int, keys: Any, epoch: int = 0) -> np.ndarray:
    """:func:`item_seed` of many int keys (indices, positions) at once: an int64 array."""
    base = derive_seed(seed, args.check_seed("epoch", epoch)) & counter_rng.MASK64
    return counter_rng.derive_seed(base, np.asarray(keys, dtype=np.int64).view(np.uint64))


_owner = threading.local()  # .depth: how many seeded() blocks this thread is inside


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """torch's CPU generator seeded with `seed` inside the block and restored after it. It is
    what ``fork_rng(devices=[])`` + ``torch.manual_seed`` do, at about 2 us instead of 90 per
    sample (torch.manual_seed also seeds every accelerator's generators, and leaves them so)."""
    seed = args.check_seed("seed", seed)
    generator = torch.default_generator
    state = generator.get_state()
    generator.manual_seed(seed)
    _owner.depth = getattr(_owner, "depth", 0) + 1
    try:
        yield
    finally:
        _owner.depth -= 1
        generator.set_state(state)


def owns_generator() -> bool:
    """Whether this thread may rewind torch's (process-wide) default generator: the main thread
    (a DataLoader worker's too), or a thread inside a seeded() block (the Loader's deterministic
    samples, one at a time under its lock). Another thread doing so would replay the draws of the
    training loop and of the other threads."""
    return threading.current_thread() is threading.main_thread() or getattr(_owner, "depth", 0) > 0
