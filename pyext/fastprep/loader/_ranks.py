"""fastprep.Loader over many ranks: which rank this process is, and its part of an epoch.

Every rank computes the same global order of the epoch (from seed, epoch and the world size the
epoch began with); the ranks consume it in lock-step: rank r takes global positions
``c + r, c + r + world, ...`` (`c`: where the pass starts, 0 or a checkpoint's), so that after each
rank has received p samples the first ``c + p * world`` of the global order are consumed, whatever
the rank. A checkpoint from any rank records that number; a pass resumed at another world size
splits the rest of the global order among its own ranks (elastic resume: every sample of the
epoch exactly once overall).

Every rank gets as many samples, hence batches (DDP's collectives need equal counts): with
``drop_last=False`` the rest is padded by wrapping around to the epoch's first samples (fewer
than `world` samples repeated, as DistributedSampler pads; nothing lost); with ``drop_last=True``
the rest is cut to a multiple of `world` (fewer than `world` samples left out; nothing repeated).
"""

from __future__ import annotations

import logging
import os
from typing import Any

import numpy as np
import torch.distributed as dist

from fastprep.core._args import check_int

log = logging.getLogger("fastprep")
_told: set[tuple[int, int, str]] = set()


def resolve(rank: Any, world_size: Any) -> tuple[int, int]:
    """(rank, world size): the arguments when given (both, or ``world_size=1`` alone: rank 0, the
    opt-out of the split), else the initialised process group's, else the RANK / WORLD_SIZE
    environment variables (torchrun's), else (0, 1)."""
    if rank is None and world_size is not None and not isinstance(world_size, bool) and world_size == 1:
        rank = 0
    if (rank is None) != (world_size is None):
        raise ValueError(f"Loader: rank and world_size go together: got rank={rank!r}, world_size={world_size!r}")
    if world_size is not None:
        world = check_int("Loader", "world_size", world_size, 1)
        rank = check_int("Loader", "rank", rank, 0)
        if rank >= world:
            raise ValueError(f"Loader: expected rank in [0, world_size={world}), got rank={rank}")
        return rank, world
    told_by = None
    if dist.is_available() and dist.is_initialized():
        rank, world, told_by = dist.get_rank(), dist.get_world_size(), "the torch.distributed process group"
    if told_by is None and "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        try:
            rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        except ValueError:
            raise ValueError(f"Loader: expected the RANK and WORLD_SIZE environment variables to be ints, got "
                             f"RANK={os.environ['RANK']!r}, WORLD_SIZE={os.environ['WORLD_SIZE']!r}") from None
        if not 0 <= rank < world:
            raise ValueError(f"Loader: the RANK environment variable {rank} is outside [0, WORLD_SIZE={world})")
        told_by = "the RANK / WORLD_SIZE environment variables"
    if told_by is None or world == 1:
        return 0, 1
    if (rank, world, told_by) not in _told:  # once per process
        _told.add((rank, world, told_by))
        log.warning("fastprep.Loader: rank %d of %d (from %s): each epoch's order is split by rank, this "
                    "process reads 1/%d of it; pass world_size=1 to read everything on every rank, or a sampler "
                    "(e.g. DistributedSampler) to split it yourself", rank, world, told_by, world)
    return rank, world


def part(order: np.ndarray | list[int], consumed: int, world: int, rank: int, drop_last: bool) -> list[int]:
    """Rank `rank`'s indices of the global `order` from global position `consumed` on (see the module)."""
    order = np.asarray(order, dtype=np.int64)
    n = len(order)
    rest = max(0, n - consumed)
    if drop_last:
        positions = np.arange(consumed, consumed + rest - rest % world)
    else:
        positions = (consumed + np.arange(rest + (-rest) % world)) % max(n, 1)
    return order[positions[rank::world]].tolist()


def consumed(start: int, position: int, world: int, indices: list[int], batch_size: int, drop_last: bool,
             total: int) -> int:
    """Global samples of the epoch consumed once this rank has received `position` of `indices` (its
    part from global position `start`): `total` when the rank's part is over."""
    deliverable = len(indices) - len(indices) % batch_size if drop_last else len(indices)
    return total if position >= deliverable else start + position * world
