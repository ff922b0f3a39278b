"""Every int argument of every op (ops/_registry.py, read from the schemas) at the int64 extremes:
each call either raises RuntimeError with the same text on the native op, the Numba kernel and
the fake kernel, or gives the same bits on both backends and in the torch composition. Sums and
products of such values are where undefined behaviour hides in C++ (crop's top + height once
overflowed): .ci/sanitize runs this file under ASan + UBSan, where any report aborts the run.

A result is computed for real only when the fake kernel says it is small; larger ones (a random
mask of [8, 2**62]) are checked for their shape on fake tensors alone."""

import importlib

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._pytree import tree_flatten, tree_map_only

from fastprep import numba_kernels
from fastprep.ops._registry import OPS

pytestmark = pytest.mark.op_layer

EXTREMES = [0, -1, 2**31, 2**32, 2**62, 2**63 - 1, -2**63]
REAL_LIMIT = 1 << 24  # bytes of output computed for real


def _stride0(*shape, dtype=torch.uint8):
    """A `shape` tensor over one element: huge sizes for free."""
    return torch.zeros([1] * len(shape), dtype=dtype).expand(*shape)


# More samples than the registry's, to reach the sizes the extremes interact with: padded random
# crops, images with no channels or huge stride-0 ones, empty masks, packed rows of a huge image.
EXTRA_SAMPLES = {
    "random_crop": [lambda: (torch.zeros(0, 8, 8, dtype=torch.uint8), 4, 4, 7, "CHW", True, 0.0),
                    lambda: (_stride0(1, 2**31, 2**31), 4, 4, 7, "CHW", True, 0.0)],
    "crop": [lambda: (_stride0(1, 2**31, 2**31), 0, 0, 1, 1, "CHW"),
             lambda: (_stride0(2**31, 2**31, 1), 3, 5, 2, 2, "HWC")],
    "dilate": [lambda: (torch.zeros(0, 8, 8, dtype=torch.bool), "cross", 1),
               lambda: (torch.zeros(3, 9, dtype=torch.bool), "square", 1)],
    "dilate_packed": [lambda: (torch.zeros(0, 3, 2, dtype=torch.uint8), 9, "cross", 1)],
    "unpack_bits": [lambda: (_stride0(2, 2**61), 8, -1, "little"), lambda: (_stride0(2**61, 2), 2, 0, "big")],
    "pack_bits": [lambda: (torch.zeros(0, 5, 9, dtype=torch.bool), 1, "big")],
    "random_mask": [lambda: ([0, 5], 0.5, 1, False)],
    "random_dilated_mask": [lambda: ([2, 0, 5], 0.5, 1, "square", 2, True)],
    "crop_mask_ycbcr": [lambda: (_stride0(2**30, 2**31, 3), 2, 3, 0.5, 1, "HWC", "cross", None, 1.0, True, True,
                                 None)],
}


def _int_slots(name, sample):
    """(argument index, element index or None) of every int in op `name`'s arguments."""
    schema = getattr(torch.ops.fastprep, name).default._schema
    for i, arg in enumerate(schema.arguments):
        kind = str(arg.real_type)
        if kind in ("int", "Optional[int]"):
            yield i, None
        elif kind in ("List[int]", "Optional[List[int]]"):
            value = sample[i]
            if value is None:
                yield i, "all"  # an absent optional list: the extreme for every element
            else:
                yield from ((i, k) for k in range(len(value)))


def _with(sample, slot, x):
    args = list(sample)
    i, k = slot
    if k is None:
        args[i] = x
    elif k == "all":
        n = len(args[0])  # crop_mask_ycbcr_batch: one element per image
        args[i] = [x] * n
    else:
        args[i] = list(args[i])
        args[i][k] = x
    return tuple(args)


def _cases():
    for row in OPS:
        makers = [row.sample] + EXTRA_SAMPLES.get(row.name, [])
        for m, make in enumerate(makers):
            for slot in _int_slots(row.name, make()):
                for x in EXTREMES:
                    yield pytest.param(row.name, make, slot, x, id=f"{row.name}-{m}-arg{slot[0]}.{slot[1]}={x}")


def _outcome(fn, *args):
    try:
        return "ok", fn(*args)
    except RuntimeError as exc:
        return "error", str(exc)


def _fake(name, args):
    mode = FakeTensorMode()
    fake_args = tree_map_only(torch.Tensor, mode.from_tensor, args)
    with mode:
        return _outcome(getattr(torch.ops.fastprep, name), *fake_args)


def _nbytes(result) -> int:
    leaves, _ = tree_flatten(result)
    return sum(t.numel() * t.element_size() for t in leaves if isinstance(t, torch.Tensor))


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(torch.uint8) if t.dtype != torch.bool else t


def _written(name, result, args):
    """What a call produced: its outputs and the arguments it writes (in-place ops)."""
    schema = getattr(torch.ops.fastprep, name).default._schema
    written = [a for a, arg in zip(args, schema.arguments) if arg.alias_info is not None and arg.alias_info.is_write]
    leaves, _ = tree_flatten((result, written))
    return [_bits(t) for t in leaves if isinstance(t, torch.Tensor)]


def _composition(name):
    """The op's torch-ops implementation (ops/<family>.py's <name>_torch), when it has one."""
    family = next(row.family for row in OPS if row.name == name)
    return getattr(importlib.import_module(f"fastprep.ops._{family}"), f"{name}_torch", None)


@pytest.mark.slow  # 7 extremes x every int argument of every op: .ci/slow and .ci/sanitize run it
@pytest.mark.parametrize("name,make,slot,x", list(_cases()))
def test_int_argument_extremes(name, make, slot, x):
    args = _with(make(), slot, x)
    fake = _fake(name, args)
    if fake[0] == "ok" and _nbytes(fake[1]) > REAL_LIMIT:
        pytest.skip(f"valid and {_nbytes(fake[1])} bytes, too large to compute here: the fake kernel gave its shape")
    runs = {"op": getattr(torch.ops.fastprep, name), "numba": numba_kernels.kernel(name)}
    if _composition(name) is not None:
        runs["torch composition"] = _composition(name)
    outcomes = {}
    for what, fn in runs.items():
        a = _with(make(), slot, x)  # fresh tensors: in-place ops write their arguments
        kind, value = _outcome(fn, *a)
        outcomes[what] = (kind, _written(name, value, a) if kind == "ok" else value)
    if fake[0] == "ok" and outcomes["op"][0] == "error" and "could not allocate" in outcomes["op"][1]:
        # A valid call whose input copy no machine holds (stride-0 sources): the same text on both
        # backends; plain torch (the composition) fails in its own words.
        assert outcomes["op"] == outcomes["numba"], outcomes
        return
    for what, (kind, value) in outcomes.items():
        assert kind == fake[0], f"{what}: {kind} {value!r}, fake kernel: {fake}"
        if kind == "error":
            assert value == fake[1], f"{what} says {value!r}, fake kernel {fake[1]!r}"
    if fake[0] == "ok":
        first = outcomes.pop("op")[1]
        for what, (_, got) in outcomes.items():
            assert len(got) == len(first) and all(torch.equal(g, f) for g, f in zip(got, first)), what
