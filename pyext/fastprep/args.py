"""Argument checks shared by the library's Python API (collate, batch, transforms, Loader,
DevicePrefetcher, fastprep.ray): each names its owner, the argument and the bad value, the way
torchvision's messages do, so a wrong option fails where it is given, not batches later."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np


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
