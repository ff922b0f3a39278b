"""The `fastprep` op namespace: every schema is defined here once, whatever backend runs it.

Callers in the package use each op's `.default` overload (``torch.ops.fastprep.dilate.default``):
every op has one schema, and calling the overload skips the packet's resolution, about 0.3 us of
a small op's ~2.5 us call."""

import torch

# Held for the life of the process: dropping a Library object deregisters what it defined.
LIB = torch.library.Library("fastprep", "DEF")


def define(schema: str) -> None:
    LIB.define(schema)


def impl_any_device(name: str, fn) -> None:
    """Register a pure-torch-ops implementation used on every device that has no kernel of its
    own (CUDA, MPS, ...). A backend's CPU kernel is more specific and wins on CPU."""
    LIB.impl(name, fn, "CompositeExplicitAutograd")
