"""seeded_draws: what draw_seed() takes from torch's generator seeded with each seed, at once,
on both backends and in the torch definition; its bad inputs."""

import pytest
import torch

import fastprep
from fastprep.ops._seeded_draws import MAX_DRAWS, seeded_draws_torch

from helpers.op_calls import bad_input_tests, call

pytestmark = pytest.mark.kernel

SEEDS = torch.tensor([0, 1, -1, 7, 2**32, 2**32 + 5, 2**62 + 11, -(2**63), 2**63 - 1, 123456789], dtype=torch.int64)


def _draw_seed_after_manual_seed(seed: int, count: int) -> list[int]:
    g = torch.Generator().manual_seed(seed)
    return [fastprep.draw_seed(g) for _ in range(count)]


@pytest.mark.parametrize("count", [0, 1, 3, MAX_DRAWS])
def test_draws_are_draw_seeds_after_manual_seed_on_every_backend(count):
    seeds = torch.cat([SEEDS, torch.randint(-2**63, 2**63 - 1, (37,), generator=torch.Generator().manual_seed(2))])
    want = torch.tensor([_draw_seed_after_manual_seed(int(s), count) for s in seeds], dtype=torch.int64)
    want = want.reshape(len(seeds), count)
    for got in (fastprep.seeded_draws(seeds, count), call("seeded_draws", seeds, count).numba(),
                seeded_draws_torch(seeds, count)):
        assert got.shape == (len(seeds), count) and got.dtype == torch.int64 and torch.equal(got, want)


def test_the_default_generator_seeded_gives_the_same_draws():
    with fastprep.core._rng.seeded(int(SEEDS[3])):  # SeedByIndex's seeding
        want = [fastprep.draw_seed() for _ in range(3)]
    assert fastprep.seeded_draws(SEEDS[3:4], 3)[0].tolist() == want


def test_views_and_empty_inputs():
    strided = SEEDS[::3]
    assert torch.equal(fastprep.seeded_draws(strided, 2), fastprep.seeded_draws(strided.contiguous(), 2))
    assert fastprep.seeded_draws(SEEDS[:0], 4).shape == (0, 4)
    assert call("seeded_draws", SEEDS[:0], 4).numba().shape == (0, 4)


def test_opcheck():
    torch.library.opcheck(torch.ops.fastprep.seeded_draws.default, (SEEDS, 2))


BAD_INPUTS = [
    (call("seeded_draws", SEEDS.int(), 2), "seeded_draws: expected seeds to be a torch.int64 tensor, got torch.int32"),
    (call("seeded_draws", SEEDS.view(2, 5), 2), "seeded_draws: expected seeds to be a 1-D tensor, got a 2-D tensor"),
    (call("seeded_draws", SEEDS, -1), r"seeded_draws: expected 0 <= count <= 113, got count=-1"),
    (call("seeded_draws", SEEDS, 114), r"seeded_draws: expected 0 <= count <= 113, got count=114"),
    (call("seeded_draws", None, 1), "seeded_draws: expected seeds to be a tensor, got None"),
]
test_bad_input_op, test_bad_input_numba, test_bad_input_fake = bad_input_tests(BAD_INPUTS)
