"""fastprep.tools.profile_loader: the Loader's time per sample around its batch op, by stage."""

import pytest

from fastprep.loader import apply
from fastprep.tools import profile_loader

pytestmark = pytest.mark.one_backend


def test_the_profile_times_every_stage_and_restores_the_functions_it_wraps():
    call = apply.ChunkRunner.__call__
    result = profile_loader.profile(batch_size=4, batches=2, repeat=1)
    assert apply.ChunkRunner.__call__ is call and apply.item_seeds.__name__ == "item_seeds"
    stages = [label for *_, label in profile_loader.STAGES]
    assert set(stages) | {"op by hand (the same draws)", "op in the Loader", "chunk with the op, and the hand-off"} \
        == set(result)
    assert all(us >= 0 for us in result.values())
    assert result["the chunk, in all"] >= result["window fold (FusedGroup.batch)"]
