"""Where a fused op reads: :class:`Geometry`, the one read (window, flips, resize, placement, transpose)
that a group's geometric steps fold into, and :data:`FOLDS`, how each geometric role moves it
(transforms/_group.py folds a group's steps; docs/transforms.md walks through adding one)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from fastprep.ops._resize_checks import GEOMETRY_COLUMNS
from fastprep.transforms._base import where


class Geometry:
    """Where a fused op reads and what it writes: rows [top, top + height) and columns [left, left +
    width) of the source image, resized (when a step resizes) to resized_height x resized_width,
    of which the part at (out_top, out_left) of out_height x out_width is written (the size of what
    the steps made so far), flipped left-right when `hflip`, upside down when `vflip`, then its rows
    written as columns when `transpose` (out_height x out_width is then what the transpose makes:
    the placement is of out_width x out_height). `fits`: every
    crop fits the image it cuts (else the steps run one by one: padding, or their error). Each value
    is an int (one sample) or a numpy array (a chunk, one element per sample): the folds below are
    the same code for both."""

    def __init__(self, H: Any, W: Any):
        # A field no step has moved yet is one value for every sample (False: no flip, whose
        # arithmetic crop skips): a chunk's fold makes only the arrays its steps need.
        self.top, self.left, self.height, self.width = 0, 0, H, W
        self.hflip = self.vflip = self.transpose = False
        self.fits = True
        self.resized = False  # whether a step resized (every sample alike)
        self.resized_height, self.resized_width, self.out_top, self.out_left = 0, 0, 0, 0  # 0: not resized
        self.out_height, self.out_width = H, W

    def to_table(self, n: int) -> np.ndarray:
        """The op's geometry table of n samples: int64 [n, len(GEOMETRY_COLUMNS)], one row per
        sample, each column the field of its name (a field one value for all repeated)."""
        table = np.empty((n, len(GEOMETRY_COLUMNS)), np.int64)
        for k, name in enumerate(GEOMETRY_COLUMNS):
            table[:, k] = getattr(self, name)
        return table

    def flip(self, f: Any) -> None:
        """A horizontal flip of what is made so far (of a transposed output: its source's rows flip)."""
        if self.transpose is False:
            self.hflip = self.hflip ^ f
        else:
            t = self.transpose
            self.hflip, self.vflip = self.hflip ^ (f & np.logical_not(t)), self.vflip ^ (f & t)

    def flip_v(self, f: Any) -> None:
        """A vertical flip of what is made so far (of a transposed output: its source's columns flip)."""
        if self.transpose is False:
            self.vflip = self.vflip ^ f
        else:
            t = self.transpose
            self.hflip, self.vflip = self.hflip ^ (f & t), self.vflip ^ (f & np.logical_not(t))

    def rotate(self, k: Any) -> None:
        """k quarter turns counter-clockwise (torch.rot90) of what is made so far: each a horizontal
        flip, then a transpose (rot90(x) = x.flip(-1).transpose(-2, -1))."""
        for i in (1, 2, 3):
            turn = k >= i
            self.flip(turn)
            self.transpose = self.transpose ^ turn
            self.out_height, self.out_width = where(turn, self.out_width, self.out_height), \
                where(turn, self.out_height, self.out_width)

    def crop(self, top: Any, left: Any, height: Any, width: Any) -> None:
        """A crop of what is made so far (of the source, or of the resize's outputs): its rows count
        from the bottom when flipped vertically, its columns from the right when flipped horizontally."""
        self.fits = self.fits & (top >= 0) & (left >= 0) & (top + height <= self.out_height) & \
            (left + width <= self.out_width)
        made_h, made_w, out_h, out_w = height, width, self.out_height, self.out_width
        if self.transpose is not False:  # a crop of the transpose is the transpose of a crop: in its source's terms
            t = self.transpose
            top, left, height, width = where(t, left, top), where(t, top, left), where(t, width, height), \
                where(t, height, width)
            out_h, out_w = where(t, out_w, out_h), where(t, out_h, out_w)
        if self.vflip is not False:
            top = top + (out_h - 2 * top - height) * self.vflip
        if self.hflip is not False:
            left = left + (out_w - 2 * left - width) * self.hflip
        if self.resized:
            self.out_top, self.out_left = self.out_top + top, self.out_left + left
        else:
            self.top, self.left, self.height, self.width = self.top + top, self.left + left, height, width
        self.out_height, self.out_width = made_h, made_w

    def resize(self, height: Any, width: Any) -> None:
        """What is made so far resized to height x width (one resize an op call; a flip commutes with
        it: each axis table is its own mirror image, docs/resize.md). Not after a transpose: torch
        resamples columns, then rows, each rounded to uint8, so a transpose does not commute with
        it (the row's pattern turns only after its resize)."""
        if self.transpose is not False:
            raise RuntimeError("Geometry.resize: a resize after a quarter turn does not fold (the fusion row's "
                               "pattern should have left it out)")
        self.resized = True
        self.resized_height, self.resized_width = self.out_height, self.out_width = height, width

    def resized_crop(self, window: tuple[Any, Any, Any, Any], size: tuple[int, int]) -> None:
        self.crop(*window)
        self.resize(*size)


FOLDS: dict[str, Callable[[Any, Any, Geometry], None]] = {
    "hflip": lambda step, seed, g: g.flip(step.make_params(seed)),
    "vflip": lambda step, seed, g: g.flip_v(step.make_params(seed)),
    "rotate90": lambda step, seed, g: g.rotate(step.make_params(seed)),
    "crop": lambda step, seed, g: g.crop(*step.make_params(seed, g.out_height, g.out_width), *step.size),
    "resized_crop": lambda step, seed, g: g.resized_crop(step.make_params(seed, g.out_height, g.out_width), step.size),
    "resize": lambda step, seed, g: g.resize(*step.make_params(seed, g.out_height, g.out_width)),
}
"""How each geometric role moves the op's read: (step, its seed or None, Geometry) -> None."""
