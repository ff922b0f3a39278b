"""The fusion table's role patterns (transforms/_fusion_roles.py) against the regular expressions
they replaced: the same prefix of every run of roles (up to 5 steps, every role and None), so the
same pipelines fuse and the same are refused."""

import itertools
import re

import pytest

from fastprep.transforms._fused import CROP_MASK_YCBCR, RESIZED_CROP
from fastprep.transforms._fusion_roles import FusionRole, Many, Maybe, One, Pattern

pytestmark = pytest.mark.one_backend

_FLIPS = r"(?:[hv]flip )*"
_TURNS = r"(?:[hv]flip |rotate90 )*"  # after the resize, quarter turns too; anywhere before the mask
REFERENCE = [  # the rows' patterns as they were written before: regexes over "role " strings
    (CROP_MASK_YCBCR, rf"{_TURNS}crop {_TURNS}mask ycbcr "),
    (RESIZED_CROP, rf"{_FLIPS}(?:crop {_FLIPS})?(?:resized_crop|resize) {_TURNS}(?:crop {_TURNS})?"
                   r"(?:dtype (?:normalize )?)?"),
]
ALPHABET = [*FusionRole, None]


def _regex_count(pattern: str, roles: tuple) -> int:
    m = re.match(pattern, "".join(f"{r} " for r in roles))
    return m.group(0).count(" ") if m is not None else 0


@pytest.mark.parametrize(("row", "regex"), REFERENCE, ids=[r.op for r, _ in REFERENCE])
def test_a_row_takes_the_steps_its_old_regex_took(row, regex):
    for n in range(6):
        alphabet = ALPHABET if n <= 4 else [FusionRole.HFLIP, FusionRole.VFLIP, FusionRole.CROP, FusionRole.RESIZE,
                                            FusionRole.DTYPE, FusionRole.MASK]
        for roles in itertools.product(alphabet, repeat=n):
            assert row.pattern.match(roles) == _regex_count(regex, roles), roles


@pytest.mark.parametrize(("pattern", "roles", "taken"), [
    (Pattern(One(FusionRole.CROP)), [], 0),
    (Pattern(One(FusionRole.CROP)), ["crop", "crop"], 1),
    (Pattern(Many(FusionRole.HFLIP)), ["hflip", "hflip", "crop"], 2),
    (Pattern(Many(FusionRole.HFLIP), One(FusionRole.HFLIP)), ["hflip", "hflip"], 2),  # Many gives one back
    (Pattern(Maybe(One(FusionRole.CROP), One(FusionRole.MASK)), One(FusionRole.CROP)), ["crop", "crop"], 1),
    (Pattern(Maybe(One(FusionRole.DTYPE)), One(FusionRole.RESIZE)), ["dtype"], 0),
])
def test_pattern_parts(pattern, roles, taken):
    assert pattern.match(roles) == taken


def test_a_role_is_its_string():
    assert FusionRole.CROP == "crop" and {FusionRole.MASK: 1}["mask"] == 1
    assert repr(CROP_MASK_YCBCR.pattern) == "(hflip|rotate90|vflip)* crop (hflip|rotate90|vflip)* mask ycbcr"
