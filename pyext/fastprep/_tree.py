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


def _container(x: Any) -> type | None:
    """The kind of container x is for structure comparisons: Mapping, list/tuple (one kind, as
    default_collate treats them), or None for a leaf."""
    if isinstance(x, Mapping):
        return Mapping
    return list if isinstance(x, (tuple, list)) else None


def structure_difference(ref: Any, x: Any, ref_name: str, path: str = "sample") -> tuple[str, str] | None:
    """Where `x`'s nesting differs from `ref`'s: (path, what differs, naming `ref_name`), or None when
    both have the same containers, keys and lengths (leaves may differ). A dict with the same keys
    in another order has the same structure."""
    kind = _container(ref)
    if kind is None and _container(x) is None:
        return None
    if kind is not _container(x):
        return path, f"is {type(x).__name__}, {ref_name}'s is {type(ref).__name__}"
    if kind is Mapping:
        missing, extra = [k for k in ref if k not in x], [k for k in x if k not in ref]
        if missing or extra:
            parts = ([f"lacks key(s) {missing}"] if missing else []) + ([f"has extra key(s) {extra}"] if extra else [])
            return path, f"{' and '.join(parts)} ({ref_name}'s keys: {list(ref)})"
        pairs = [(ref[k], x[k], f"{path}[{k!r}]") for k in ref]
    else:
        if len(x) != len(ref):
            return path, f"has {len(x)} fields, {ref_name}'s has {len(ref)}"
        pairs = [(a, b, f"{path}[{j}]") for j, (a, b) in enumerate(zip(ref, x))]
    for a, b, p in pairs:
        found = structure_difference(a, b, ref_name, p)
        if found is not None:
            return found
    return None


def leaves_like(tree: Any, ref: Any) -> list[Any]:
    """The leaves of `tree` in the order of `ref`'s (same structure; dict keys may be in another
    order), so that leaf k of every sample is the same field."""
    return leaves(tree_map(lambda _ref_leaf, x: x, ref, tree))
