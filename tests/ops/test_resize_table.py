"""resized_crop_batch's geometry table: its columns are named once (GEOMETRY_COLUMNS) and the C++
binding's GeometryColumn list agrees with them, in order; Geometry (the fold's record) writes the
table by those names; geometry_table builds one from lists."""

import re

import numpy as np
import pytest
import torch

import fastprep
import fastprep.numba_kernels._resize as numba_resize
from fastprep.ops._resize import geometry_table
from fastprep.ops._resize_checks import GEOMETRY_COLUMNS
from fastprep.transforms._fold import Geometry

from helpers.op_calls import requires_native

pytestmark = pytest.mark.kernel


def _columns_named_by(impl) -> list[str]:
    """The columns an implementation names when the table has the wrong number of them."""
    img, out = torch.zeros(4, 4, 3, dtype=torch.uint8), torch.empty(1, 3, 2, 2)
    with pytest.raises(RuntimeError) as info:
        impl([img], torch.zeros(1, len(GEOMETRY_COLUMNS) + 1, dtype=torch.int64), out, "HWC")
    found = re.search(r"columns (.*)\), got", str(info.value))
    assert found, str(info.value)
    return found.group(1).split(", ")


@requires_native
def test_the_native_binding_names_the_columns_in_order():
    assert _columns_named_by(torch.ops.fastprep.resized_crop_batch.default) == list(GEOMETRY_COLUMNS)


def test_the_numba_kernel_names_the_columns_in_order():
    assert _columns_named_by(numba_resize.resized_crop_batch) == list(GEOMETRY_COLUMNS)


def test_each_column_moves_what_its_name_says():
    """A table with one column changed gives what the per-sample op gives for that argument."""
    img = torch.from_numpy(np.random.default_rng(1).integers(0, 256, (30, 40, 3), dtype=np.uint8))
    base = dict(top=[2], left=[3], height=[24], width=[30])
    cases = [({}, {}), ({"hflip": [1]}, {"hflip": True}), ({"vflip": [1]}, {"vflip": True}),
             ({"resized_height": [20], "out_top": [3]}, {"resized_height": 20, "out_top": 3}),
             ({"resized_width": [19], "out_left": [2]}, {"resized_width": 19, "out_left": 2})]
    for columns, kwargs in cases:
        out = torch.empty(1, 3, 16, 17, dtype=torch.uint8)
        fastprep.resized_crop_batch([img], geometry_table(1, **base, **columns), out, "HWC")
        want = fastprep.resized_crop(img, 2, 3, 24, 30, 16, 17, "HWC", **kwargs)
        assert torch.equal(out[0], want), columns


def test_geometry_writes_its_fields_by_column_name():
    g = Geometry(np.array([50, 60]), np.array([70, 80]))
    g.crop(np.array([1, 2]), np.array([3, 4]), 40, 50)
    g.flip(np.array([True, False]))
    g.resize(20, 30)
    table = g.to_table(2)
    assert table.dtype == np.int64 and table.shape == (2, len(GEOMETRY_COLUMNS))
    for k, name in enumerate(GEOMETRY_COLUMNS):
        assert table[:, k].tolist() == np.broadcast_to(getattr(g, name), 2).astype(np.int64).tolist(), name


def test_geometry_table_refuses_unknown_columns_and_lengths():
    with pytest.raises(ValueError, match=r"geometry_table: expected columns among top, left, .*, got 'tops'"):
        geometry_table(1, tops=[0])
    with pytest.raises(ValueError, match=r"geometry_table: expected hflip to have one value per image \(2\), got 1"):
        geometry_table(2, hflip=[True])
