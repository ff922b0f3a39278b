"""seeded_draws: the seeds :func:`fastprep.draw_seed` takes from torch's CPU generator seeded with
each of many seeds, at once. Schema, checks, fake kernel and the definition in torch calls.
Kernels: csrc/kernels/seeded_draws.cpp (native), numba_kernels/_seeded_draws.py (Numba)."""

from __future__ import annotations

import torch

import fastprep.ops._checks as checks
from fastprep.ops._library import define, impl_any_device

__all__ = ["seeded_draws"]

define("seeded_draws(Tensor seeds, int count) -> Tensor")

MAX_DRAWS = 113  # kernels::kMaxSeededDraws: the draws the generator's first state block holds


def seeded_draws(seeds: torch.Tensor, count: int) -> torch.Tensor:
    """``out[i, k]``: the k-th int64 seed :func:`fastprep.draw_seed` returns after
    ``torch.manual_seed(seeds[i])`` (or ``Generator.manual_seed``), for every i in one call.

    A fastprep transform draws one seed per random step from torch's generator, so under
    ``SeedByIndex`` sample i's steps get ``seeded_draws(item_seeds, steps)[i]``: fastprep.Loader
    draws a whole chunk's parameters with it, in the bits a DataLoader gives.

    Args:
        seeds: 1-D int64, the generator's seeds (torch's mt19937 uses their low 32 bits).
        count: draws per seed, 0 to 113.

    Example:
        >>> g = torch.Generator().manual_seed(7)
        >>> int(seeded_draws(torch.tensor([7]), 1)[0, 0]) == fastprep.draw_seed(g)
        True
    """
    return torch.ops.fastprep.seeded_draws.default(seeds, checks.op_int("seeded_draws", "count", count))


def check_seeded_draws(seeds: torch.Tensor, count: int) -> list[int]:
    """Mirror of the binding's checks; returns the output's sizes."""
    op = "seeded_draws"
    checks.check_tensor(op, "seeds", seeds)
    checks.check_dtype(op, "seeds", seeds, torch.int64)
    if seeds.dim() != 1:
        checks.fail(op, ": expected seeds to be a 1-D tensor, got a ", seeds.dim(), "-D tensor")
    if not 0 <= count <= MAX_DRAWS:
        checks.fail(op, ": expected 0 <= count <= ", MAX_DRAWS, ", got count=", count)
    sizes = [seeds.shape[0], count]
    checks.check_output_bytes(op, sizes, torch.int64, checks.shape_source("seeds", seeds))
    return sizes


@torch.library.register_fake("fastprep::seeded_draws")
def _seeded_draws_fake(seeds, count):
    sizes = check_seeded_draws(seeds, count)
    return seeds.new_empty(sizes, dtype=torch.int64)


def seeded_draws_torch(seeds: torch.Tensor, count: int) -> torch.Tensor:
    """The definition: a torch CPU generator per seed, drawing as draw_seed does."""
    sizes = check_seeded_draws(seeds, count)
    out = torch.empty(sizes, dtype=torch.int64)
    g = torch.Generator()
    for i, s in enumerate(seeds.tolist()):
        g.manual_seed(s)
        out[i].random_(checks.INT64_MIN, checks.INT64_MAX, generator=g)  # one draw per element, in order
    return out.to(seeds.device)


impl_any_device("seeded_draws", seeded_draws_torch)
