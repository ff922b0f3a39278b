"""Mapping over the nested containers a dataset sample or batch is made of."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any


def is_namedtuple(x: Any) -> bool:
    return isinstance(x, tuple) and hasattr(x, "_fields")


def tree_map(fn: Callable[..., Any], tree: Any, *others: Any) -> Any:
    """Apply fn to the leaves of `tree` (and the matching leaves of `others`), keeping tuples,
    namedtuples, lists and dicts (and Mapping subclasses that can be rebuilt) as they are.
    The first tree sets the structure: where an `others` tree holds a leaf (a batch layout's
    Leaf over default_collate's list of strings, say), fn gets the whole subtree."""
    if any(not isinstance(o, (Mapping, tuple, list)) for o in others):
        return fn(tree, *others)
    if isinstance(tree, Mapping):
        items = {k: tree_map(fn, v, *(o[k] for o in others)) for k, v in tree.items()}
        try:
            return type(tree)(items)
        except TypeError:
            return items
    if is_namedtuple(tree):
        return type(tree)(*(tree_map(fn, *vs) for vs in zip(tree, *others)))
    if isinstance(tree, (tuple, list)):
        return type(tree)(tree_map(fn, *vs) for vs in zip(tree, *others))
    return fn(tree, *others)


def leaves(tree: Any) -> list[Any]:
    out: list[Any] = []
    tree_map(out.append, tree)
    return out
