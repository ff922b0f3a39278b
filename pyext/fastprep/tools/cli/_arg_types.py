"""argparse value types shared by the `python -m fastprep` commands: a bad value is refused with
its text and what was expected, before anything runs."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any


def number(kind: type, ok: Callable[[Any], bool], expected: str) -> Callable[[str], Any]:
    """`text` as `kind` (int or float), refused (with the text) unless ok(value)."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {'an' if kind is int else 'a'} {kind.__name__}, "
                                             f"got {text!r}") from None
        if not ok(value):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
        return value
    return parse


def positive(kind: type) -> Callable[[str], Any]:
    return number(kind, lambda v: v > 0, "a value > 0")


def at_least(least: int) -> Callable[[str], int]:
    return number(int, lambda v: v >= least, f"an int >= {least}")


fraction = number(float, lambda v: 0 < v < 1, "a share between 0 and 1 (0.1: +-10%)")
count = at_least(0)


def int_list(least: int) -> Callable[[str], list[int]]:
    """Comma-separated ints, each >= `least` ("0,1,2"), refused whole with the text."""
    def parse(text: str) -> list[int]:
        try:
            values = [int(x) for x in text.split(",")]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected comma-separated ints >= {least}, got {text!r}") from None
        if not values or any(v < least for v in values):
            raise argparse.ArgumentTypeError(f"expected comma-separated ints >= {least}, got {text!r}")
        return values
    return parse
