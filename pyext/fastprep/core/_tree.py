"""Mapping over the nested containers a dataset sample or batch is made of.

These run for every sample a loader writes, so the container test looks at exact types first
(a sample is mostly tuples, dicts, tensors, arrays and ints) before the slower ABC checks."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch

_LEAF_TYPES = (torch.Tensor, np.ndarray, np.generic, int, float, str, bytes)


def _container(x: Any) -> type | None:
    """The kind of container x is: Mapping, list (for tuples and lists alike, as default_collate
    treats them; namedtuples included), or None for a leaf."""
    t = type(x)
    if t is tuple or t is list:
        return list
    if t is dict:
        return Mapping
    if isinstance(x, _LEAF_TYPES):
        return None
    if isinstance(x, Mapping):
        return Mapping
    return list if isinstance(x, (tuple, list)) else None


def is_leaf(x: Any) -> bool:
    """x is no container (tuple, list, dict, ...): a leaf of the trees below."""
    return _container(x) is None


def is_namedtuple(x: Any) -> bool:
    return isinstance(x, tuple) and hasattr(x, "_fields")


def tree_map(fn: Callable[..., Any], tree: Any, *others: Any) -> Any:
    """Apply fn to the leaves of `tree` (and the matching leaves of `others`), keeping tuples,
    namedtuples, lists and dicts (and Mapping subclasses that can be rebuilt) as they are.
    The first tree sets the structure: where an `others` tree holds a leaf (a batch layout's
    Leaf over default_collate's list of strings, say), fn gets the whole subtree."""
    if others and any(_container(o) is None for o in others):
        return fn(tree, *others)
    kind = _container(tree)
    if kind is Mapping:
        items = {k: tree_map(fn, v, *(o[k] for o in others)) for k, v in tree.items()}
        try:
            return type(tree)(items)
        except TypeError:
            return items
    if kind is list:
        if is_namedtuple(tree):
            return type(tree)(*(tree_map(fn, *vs) for vs in zip(tree, *others)))
        return type(tree)(tree_map(fn, *vs) for vs in zip(tree, *others))
    return fn(tree, *others)


def leaves(tree: Any) -> list[Any]:
    """The leaves of `tree` in tree_map's order."""
    out: list[Any] = []
    _collect(tree, out)
    return out


def _collect(tree: Any, out: list[Any]) -> None:
    kind = _container(tree)
    if kind is list:
        for x in tree:
            _collect(x, out)
    elif kind is Mapping:
        for x in tree.values():
            _collect(x, out)
    else:
        out.append(tree)


def _collect_like(ref: Any, tree: Any, out: list[Any]) -> None:
    """Append the leaves of `tree`, walked by `ref`'s structure, to out."""
    kind = _container(ref)
    if kind is None or _container(tree) is None:
        out.append(tree)  # as tree_map: a leaf of `tree` where `ref` nests is one leaf
    elif kind is list:
        for r, x in zip(ref, tree):
            _collect_like(r, x, out)
    else:
        for k, r in ref.items():
            _collect_like(r, tree[k], out)


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
    out: list[Any] = []
    _collect_like(ref, tree, out)
    return out
