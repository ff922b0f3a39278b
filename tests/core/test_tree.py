"""fastprep.core._tree: the leaves of nested samples, in one order everywhere."""

from collections import OrderedDict, namedtuple

import numpy as np
import pytest
import torch

from fastprep.core._tree import leaves, leaves_like, structure_difference, tree_map

pytestmark = pytest.mark.one_backend

Pair = namedtuple("Pair", "image label")


def _sample(label=3, extra=None):
    return {"pair": Pair(torch.zeros(2), label), "list": [np.int64(1), None, "s"], "extra": extra}


def test_leaves_walk_dicts_tuples_lists_and_namedtuples_in_order():
    s = _sample()
    got = leaves(s)
    assert [type(x) for x in got] == [torch.Tensor, int, np.int64, type(None), str, type(None)]
    seen = []
    tree_map(seen.append, s)  # tree_map visits the leaves in the same order
    assert len(seen) == len(got) and all(a is b for a, b in zip(seen, got))


def test_leaves_like_follows_the_reference_key_order_and_keeps_none_leaves():
    ref = _sample()
    x = OrderedDict([("extra", "e"), ("list", [np.int64(5), None, "t"]), ("pair", Pair(torch.ones(2), 9))])
    assert structure_difference(ref, x, "ref") is None
    got = leaves_like(x, ref)
    assert got[1:] == [9, np.int64(5), None, "t", "e"] and torch.equal(got[0], torch.ones(2))


def test_leaves_like_takes_a_leaf_where_the_reference_nests_as_tree_map_does():
    ref = {"a": [1, 2], "b": 3}
    assert leaves_like({"a": "whole", "b": 4}, ref) == ["whole", 4]
    assert leaves(tree_map(lambda _r, v: v, ref, {"a": "whole", "b": 4})) == ["whole", 4]


def test_tensors_arrays_and_strings_are_leaves_not_sequences():
    for leaf in (torch.zeros(3), np.zeros(3), "abc", b"ab", 1.5, np.float32(2)):
        got = leaves(leaf)
        assert len(got) == 1 and got[0] is leaf
        assert structure_difference(leaf, leaf, "ref") is None
    assert structure_difference((1, 2), [1, 2], "ref") is None  # tuples and lists are one kind
    assert structure_difference((1, 2), (1,), "ref") == ("sample", "has 1 fields, ref's has 2")
