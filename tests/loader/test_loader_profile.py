"""fastprep.tools.bench.profile_loader: the Loader's time per sample around its batch op, by stage."""

import pytest

import fastprep.loader._apply as apply
from fastprep.tools.bench import profile_loader

pytestmark = pytest.mark.one_backend


def test_the_profile_times_every_stage_and_restores_the_functions_it_wraps():
    call = apply.ChunkRunner.__call__
    result = profile_loader.profile(batch_size=4, batches=2, repeat=1)
    assert apply.ChunkRunner.__call__ is call and apply.item_seeds.__name__ == "item_seeds"
    stages = [label for *_, label in profile_loader.STAGES] + [profile_loader.ROUND]
    assert {*stages, *(s + profile_loader.BESIDE for s in stages), profile_loader.BY_HAND,
            profile_loader.IN_LOADER} == set(result)
    assert all(us >= 0 for us in result.values())
    for beside in ("", profile_loader.BESIDE):
        assert result["the chunk, in all" + beside] >= result["window fold (ChunkRuns)" + beside]
    assert result["the chunk, in all" + profile_loader.BESIDE] >= result[profile_loader.IN_LOADER]


def test_the_boundary_profile_times_each_part_and_restores_the_functions_it_wraps():
    import fastprep.loader._ahead as ahead
    import fastprep.loader._pool as pool  # noqa: PLC0415

    init, take = pool.ThreadPool.__init__, ahead.take
    result = profile_loader.boundary(threads=1, epochs=3, batch_size=4)
    assert pool.ThreadPool.__init__ is init and ahead.take is take
    assert set(result) == {profile_loader.BOUNDARY, *(label for *_, label in profile_loader.BOUNDARY_PARTS)}
    assert all(median >= 0 and mean >= 0 for median, mean in result.values())
