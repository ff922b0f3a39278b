"""The parts a transform can play in a fused op (:class:`FusionRole`, a step's ``fusion_role``) and
the declarative patterns a row of the fusion table (_fused.py) matches over a run of steps' roles:
:class:`One` role, :class:`Many` (zero or more), :class:`Maybe` (an optional run of parts), in a
:class:`Pattern`. A pattern matches the longest prefix its parts allow, earlier parts taking as
many steps as they can first (as a regular expression's greedy match would, with backtracking)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from enum import Enum


class FusionRole(str, Enum):
    """What a step does inside a fused op (a str: ``FusionRole.CROP == "crop"``, printed as its value).
    Not enum.StrEnum, which Python 3.10 (the oldest fastprep claims) does not have."""

    __str__ = str.__str__
    __format__ = str.__format__
    HFLIP = "hflip"
    VFLIP = "vflip"
    ROTATE90 = "rotate90"
    CROP = "crop"
    RESIZED_CROP = "resized_crop"
    RESIZE = "resize"
    MASK = "mask"
    YCBCR = "ycbcr"
    DTYPE = "dtype"
    NORMALIZE = "normalize"


class One:
    """Exactly one step whose role is one of `roles`."""

    def __init__(self, *roles: FusionRole):
        self.roles = frozenset(roles)

    def ends(self, roles: Sequence[object], i: int) -> Iterator[int]:
        if i < len(roles) and roles[i] in self.roles:
            yield i + 1

    def __repr__(self) -> str:
        return "|".join(sorted(self.roles))


class Many(One):
    """Zero or more steps whose roles are among `roles` (as many as there are first)."""

    def ends(self, roles: Sequence[object], i: int) -> Iterator[int]:
        j = i
        while j < len(roles) and roles[j] in self.roles:
            j += 1
        yield from range(j, i - 1, -1)

    def __repr__(self) -> str:
        return f"({super().__repr__()})*"


class Maybe:
    """The parts in order, or nothing (the parts first)."""

    def __init__(self, *parts: One | Many | Maybe):
        self.parts = parts

    def ends(self, roles: Sequence[object], i: int) -> Iterator[int]:
        yield from _ends(self.parts, roles, i)
        yield i

    def __repr__(self) -> str:
        return f"({' '.join(map(repr, self.parts))})?"


class Pattern:
    """A row's steps: its parts in order, matched at the start of a run of roles.

    Example:
        >>> Pattern(Many(FusionRole.HFLIP), One(FusionRole.CROP)).match(["hflip", "crop", "mask"])
        2
    """

    def __init__(self, *parts: One | Many | Maybe):
        self.parts = parts

    def match(self, roles: Sequence[object]) -> int:
        """How many of the leading `roles` the pattern takes (0: it does not match)."""
        return next(_ends(self.parts, list(roles), 0), 0)

    def __repr__(self) -> str:
        return " ".join(map(repr, self.parts))


def _ends(parts: Sequence[One | Many | Maybe], roles: Sequence[object], i: int) -> Iterator[int]:
    """Where the parts can end when they start at position i, in order of preference."""
    if not parts:
        yield i
        return
    for j in parts[0].ends(roles, i):
        yield from _ends(parts[1:], roles, j)
