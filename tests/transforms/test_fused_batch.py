"""The Loader's fused batch path (loader/_fused_chunks.py, ChunkRuns): its chunk-wide path for numpy
images (_plain_arrays) against its item-by-item reference (item_image per item): the same runs,
field by field, value types included."""

import numpy as np
import pytest
import torch

import fastprep.transforms as T
from fastprep.loader._fused_chunks import ChunkRuns
from fastprep.transforms import FusionPlan

pytestmark = pytest.mark.one_backend  # the fold is numpy and Python: no kernel runs

RNG = np.random.default_rng(5)


def _array(h: int, w: int, c: int = 3, dtype: type = np.uint8) -> np.ndarray:
    return RNG.integers(0, 255, (h, w, c)).astype(dtype)


SOURCES = [_array(90, 80) for _ in range(4)]
READ_ONLY = _array(90, 80)
READ_ONLY.flags.writeable = False

PIPELINES = {
    "crop": lambda: T.Compose([T.RandomCrop(40, layout="HWC"), T.RandomDilatedMask(0.1), T.RGBToYCbCr()]),
    "flip around the crop": lambda: T.Compose([T.RandomHorizontalFlip(), T.RandomCrop(32, layout="HWC"),
                                               T.RandomHorizontalFlip(), T.RandomDilatedMask(0.1), T.RGBToYCbCr()]),
    "resized crop": lambda: T.Compose([T.RandomResizedCrop(24), T.RandomVerticalFlip(),
                                       T.ToDtype(torch.float32, scale=True)]),
    "resize (output size per sample)": lambda: T.Compose([T.Resize(30), T.RandomHorizontalFlip()]),
}

# Chunks the chunk-wide path takes whole (some with crops that do not fit: runs cut around them).
CHUNKS = {
    "(image, label)": [(SOURCES[i % 4], i) for i in range(24)],
    "bare images": [SOURCES[i % 4] for i in range(24)],
    "[image, label, name]": [[SOURCES[i % 4], i, f"n{i}"] for i in range(24)],
    "sizes, some smaller than the crop": [(_array(30 + 9 * i, 20 + 13 * (i % 4)), i) for i in range(16)],
    "read-only arrays": [(READ_ONLY, i) for i in range(6)] + [(SOURCES[0], 6)],
}
# Chunks it leaves to the reference (another type, dtype, channel count, rank or field type inside).
MIXED = {
    "a float image": [(SOURCES[0], 0), (_array(90, 80, 3, np.float32), 1), (SOURCES[1], 2)],
    "an RGBA image": [(SOURCES[0], 0), (_array(90, 80, 4), 1), (SOURCES[1], 2)],
    "a 2-D image": [(SOURCES[0], 0), (SOURCES[2][:, :, 0], 1), (SOURCES[1], 2)],
    "a float label": [(SOURCES[0], 0), (SOURCES[1], 1.5), (SOURCES[2], 2)],
    "a tensor": [(SOURCES[0], 0), (torch.zeros(3, 50, 50, dtype=torch.uint8), 1), (SOURCES[1], 2)],
}


def _fused(pipeline: str):
    return FusionPlan.of(PIPELINES[pipeline]()).fused


def _runs(chunk_runs: ChunkRuns, raws: list, draws: np.ndarray) -> list[tuple]:
    out = []
    for r in chunk_runs(list(raws), draws):
        lists = [r.geometry.tolist(), *r.seeds.values()]
        out.append((r.start, r.layout, r.size, r.out_size, lists, r.geometry.dtype, r.geometry.shape,
                    [[type(v) for v in x] for x in lists],
                    [(tuple(s.shape), s.dtype, s.data_ptr()) for s in r.inputs], r.images,
                    [id(x) for x in r.raws] == [id(x) for x in raws[r.start:r.start + len(r)]]))
    return out


@pytest.mark.parametrize("pipeline", PIPELINES)
def test_the_chunk_wide_path_makes_the_runs_the_item_by_item_path_makes(pipeline, monkeypatch):
    group, reference = ChunkRuns(_fused(pipeline)), ChunkRuns(_fused(pipeline))
    monkeypatch.setattr(reference, "_plain_arrays", lambda raws: None)
    for name, raws in {**CHUNKS, **MIXED}.items():
        draws = np.random.default_rng(len(name)).integers(-2**63, 2**63 - 1, (len(raws), len(group.group.random)),
                                                          dtype=np.int64)
        taken = group._plain_arrays(list(raws)) is not None
        assert taken == (name in CHUNKS), name
        assert _runs(group, raws, draws) == _runs(reference, raws, draws), name


def test_a_chunk_like_the_last_but_for_what_the_op_takes_is_looked_at_again():
    """The kept answer is per item types, dtype and channels: an RGBA chunk after an RGB one is not taken."""
    runs = ChunkRuns(_fused("crop"))
    draws = np.zeros((4, len(runs.group.random)), dtype=np.int64)
    assert len(runs([(SOURCES[i], i) for i in range(4)], draws)) == 1
    assert runs([(_array(60, 60, 4), i) for i in range(4)], draws) == []
    assert runs([(_array(60, 60, 3, np.float32), i) for i in range(4)], draws) == []
    assert len(runs([(SOURCES[i], i) for i in range(4)], draws)) == 1
