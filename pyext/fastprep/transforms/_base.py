"""What every fastprep transform shares: torchvision v2's calling convention (one sample, or several
positional inputs treated as a tuple), the seed it draws, and its repr in error messages."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn

import fastprep.core._counter_rng as counter_rng
from fastprep.core._rng import draw_seed
from fastprep.transforms._fusion_roles import FusionRole
from fastprep.transforms._inputs import describe
from fastprep.transforms._sample import Sample


def unit_float(word: Any) -> Any:
    """A float in [0, 1) from a uint64 word: its top 53 bits, exactly representable (an int, or a
    numpy uint64 array: float64s, the same values)."""
    return (word >> 11) * 2.0 ** -53


def word(seed: Any, k: int) -> Any:
    """Word k of `seed`'s stream: an int seed, or a uint64 array of seeds (one per sample)."""
    return counter_rng.random_word(seed, k)


# Drawn parameters are computed by one code for one sample (Python ints and floats) and for a chunk
# (numpy arrays, one element per sample), with the same bits: arithmetic is shared, and these
# helpers do what differs by type.

def where(cond: Any, a: Any, b: Any) -> Any:
    """`a` where `cond`, else `b`: a Python bool and values, or arrays."""
    return np.where(cond, a, b) if isinstance(cond, np.ndarray) else (a if cond else b)


def any_of(cond: Any) -> bool:
    return bool(cond.any()) if isinstance(cond, np.ndarray) else bool(cond)


def round_int(x: Any) -> Any:
    """Python's ``int(round(x))`` (halves to even), elementwise for arrays (np.rint: the same)."""
    return np.rint(x).astype(np.int64) if isinstance(x, np.ndarray) else int(round(x))


def trunc_int(x: Any) -> Any:
    """Python's ``int(x)`` (towards zero), elementwise for arrays."""
    return x.astype(np.int64) if isinstance(x, np.ndarray) else int(x)


def sqrt(x: Any) -> Any:
    """Correctly rounded in both (IEEE), so numpy's is math's."""
    return np.sqrt(x) if isinstance(x, np.ndarray) else math.sqrt(x)


def exp(x: Any) -> Any:
    """math.exp, elementwise for arrays: numpy's own exp may differ from libm's in the last bit."""
    return np.array([math.exp(v) for v in x.tolist()]) if isinstance(x, np.ndarray) else math.exp(x)


def describe_sample(s: Sample) -> Callable[..., str]:
    """A lazy description of the sample's image (or first item) for error messages (`hint`: see describe)."""
    def text(hint: bool = True) -> str:
        item = s.image() or (s.items[0] if s.items else None)
        if item is None:
            return f"none in a {type(s.tree).__name__}"
        return describe(item.value, item.layout, hint)
    return text


class Transform(nn.Module):
    """Base of fastprep's transforms: ``forward(*inputs)`` as torchvision v2 (several inputs are
    one tuple sample, returned as a tuple), ``transform(sample)`` does the work."""

    # Takes fastprep.io.WindowedImage images (JpegFile, ...) and decodes only what it keeps
    # (ImageFolder(roi=True) hands them over undecoded to transforms that say so).
    reads_jpeg_files = True
    # A fastprep transform: every random draw it makes goes through fastprep.draw_seed (so the
    # Loader's per-sample streams make it reproducible in any thread) and it takes whole structured
    # samples. Compose is one when all its steps are.
    fastprep_only = True
    # The part this step plays in a fused op (transforms/_plan.py's table), or None: it runs alone.
    fusion_role: FusionRole | None = None

    def forward(self, *inputs: Any) -> Any:
        if not inputs:
            raise TypeError(f"{self!r}: expected a sample (an image, or a tuple, list or dict holding one)")
        return self.transform(inputs if len(inputs) > 1 else inputs[0])

    def transform(self, sample: Any) -> Any:
        raise NotImplementedError

    def extra_repr(self) -> str:
        return ", ".join(f"{k}={v!r}" for k, v in self.repr_args().items())

    def repr_args(self) -> dict[str, Any]:
        return {}


class RandomTransform(Transform):
    """A transform drawing one int64 seed per sample from torch's generator (or `generator`)."""

    def __init__(self, generator: torch.Generator | None):
        super().__init__()
        if generator is not None and not isinstance(generator, torch.Generator):
            raise ValueError(f"{type(self).__name__}: expected generator to be a torch.Generator or None, "
                             f"got {generator!r}")
        self.generator = generator

    def draw(self) -> int:
        return draw_seed(self.generator)
