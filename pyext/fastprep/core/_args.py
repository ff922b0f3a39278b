"""Argument checks shared by the library's Python API (collate, batch, transforms, Loader,
DevicePrefetcher, fastprep.ray): each names its owner, the argument and the bad value, the way
torchvision's messages do, so a wrong option fails where it is given, not batches later."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def check_bool(owner: str, name: str, value: Any) -> bool:
    """A bool (numpy's too); 0, 1, "yes" or None are not: a truthy string would silently enable."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise ValueError(f"{owner}: expected {name} to be a bool, got {value!r}")


def check_int(owner: str, name: str, value: Any, low: int) -> int:
    """An int >= low (Python or numpy; not a bool, not a float that happens to be whole)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f"{owner}: expected {name} to be an int >= {low}, got {value!r}")
    return int(value)


def check_real(owner: str, name: str, value: Any) -> float:
    """A real number (int or float, Python or numpy; not a bool)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ValueError(f"{owner}: expected {name} to be a number, got {value!r}")
    return value


def check_seed(name: str, value: Any) -> int:
    """`value` as an int64 seed: a Python int or a numpy integer in [-2^63, 2^63 - 1] (np.uint64 too,
    when it fits), returned as a Python int. A bool (numpy's too), a float (even 1.0), a tensor or
    anything else is a TypeError, an int out of range a ValueError: torch's own int parsing takes
    True and tensor(1) silently. The one seed check of fastprep, for the ops and the seed helpers."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"expected {name} to be an int, got {type(value).__name__} ({value!r})")
    value = int(value)
    if not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"expected {name} to fit in int64, got {value}")
    return value


def op_seed(op: str, name: str, value: Any) -> int:
    """check_seed for argument `name` of op `op`, the message naming the op."""
    if type(value) is int and INT64_MIN <= value <= INT64_MAX:  # the usual seed, without the ABC checks (0.25 us)
        return value
    try:
        return check_seed(name, value)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"{op}: {exc}") from None
