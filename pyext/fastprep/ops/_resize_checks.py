"""The checks of resized_crop / resized_crop_batch (ops/_resize.py): csrc/ops/resize.cpp's, word for
word, for the fake kernels, the torch-ops implementation and the Numba backend."""

from __future__ import annotations

from typing import NamedTuple

import torch

import fastprep.ops._checks as checks
from fastprep.ops._output_checks import check_output

GEOMETRY_COLUMNS = ("top", "left", "height", "width", "hflip", "vflip", "resized_height", "resized_width", "out_top",
                    "out_left", "transpose")
"""The columns of resized_crop_batch's geometry table, in order (csrc/ops/resize.cpp's GeometryColumn):
one int64 row per image, its window (top, left, height, width) in the image, its flips (0 or 1),
its placement in the resize (resized height, width, out top, left; 0s: not resized), and whether
it is written transposed (0 or 1: resized and placed as out's width x height, written with its
rows as out's columns; a quarter turn). Named here only: Geometry (transforms/_fold.py) writes rows
by these names, the kernels read them by index."""

COLUMN = {name: k for k, name in enumerate(GEOMETRY_COLUMNS)}
"""A column's index in the table by its name."""


def _check_window(op: str, v: checks.ImageView, top, left, height, width, prefix: str = "",
                  image: str = "the image") -> None:
    t, lf, h, w = ("top", "left", "height", "width") if not prefix else (prefix + c for c in GEOMETRY_COLUMNS[:4])
    for name, value in ((h, height), (w, width)):
        if value <= 0:
            checks.fail(op, ": expected ", name, " > 0, got ", name, "=", value)
    for name, value in ((t, top), (lf, left)):
        if value < 0:
            checks.fail(op, ": expected ", name, " >= 0, got ", name, "=", value)
    for a, av, b, bv, limit, what in ((t, top, h, height, v.h, "height"), (lf, left, w, width, v.w, "width")):
        if av + bv > limit:
            checks.fail(op, ": expected ", a, " + ", b, " <= ", limit, " (the ", what, " of ", image, "), got ", a, "=",
                        av, ", ", b, "=", bv)


MAX_RESIZED = 1 << 24  # the largest resized size a placement takes (csrc/ops/resize.cpp's kMaxResized)


class Placement(NamedTuple):
    """Where an output lies in its resized window: rows [top, top + out_h), columns [left, left +
    out_w) of the window resized to height x width; written upside down when `vflip`."""
    height: int
    width: int
    top: int
    left: int
    vflip: bool


def check_placement(op: str, resized_h, resized_w, top, left, out_h: int, out_w: int, vflip, prefix: str = "",
                    out_names: tuple[str, str] = ("out_height", "out_width")) -> Placement:
    """The placement from the op's arguments (named `prefix` + "resized_height", ...; the output's
    sizes `out_names`); a resized size of 0 is the output's."""
    rh, rw, ot, ol = (prefix + name for name in ("resized_height", "resized_width", "out_top", "out_left"))
    oh, ow = out_names
    for name, value in ((rh, resized_h), (rw, resized_w)):
        if value < 0:
            checks.fail(op, ": expected ", name, " >= 0 (0: the output's), got ", name, "=", value)
    for name, value, what in ((rh, resized_h, "row"), (rw, resized_w, "column")):  # weight tables computed whole
        if value > MAX_RESIZED:
            checks.fail(op, ": expected ", name, " <= ", MAX_RESIZED, " (the resize's weights are computed for every ",
                        what, "), got ", name, "=", value)
    for name, value in ((ot, top), (ol, left)):
        if value < 0:
            checks.fail(op, ": expected ", name, " >= 0, got ", name, "=", value)
    p = Placement(resized_h or out_h, resized_w or out_w, top, left, bool(vflip))
    for a, av, b, bv, r, limit in ((ot, top, oh, out_h, rh, p.height), (ol, left, ow, out_w, rw, p.width)):
        if av + bv > limit:
            checks.fail(op, ": expected ", a, " + ", b, " <= ", r, " (", limit, "), got ", a, "=", av, ", ", b, "=", bv)
    return p


def out_shape(v: checks.ImageView, out_height: int, out_width: int) -> list[int]:
    return ([v.n] if v.batched else []) + [v.c, out_height, out_width]


def check_resized_crop(img, top, left, height, width, out_height, out_width, layout, out_dtype, scale, mean, std,
                       vflip=False, resized_height=0, resized_width=0, out_top=0, out_left=0):
    """Returns (ImageView, OutputArgs, Placement)."""
    op = "resized_crop"
    checks.check_tensor(op, "img", img)
    checks.check_dtype(op, "img", img, torch.uint8)
    v = checks.image_view(op, "img", img, checks.parse_layout(op, layout))
    _check_window(op, v, top, left, height, width)
    for name, value in (("out_height", out_height), ("out_width", out_width)):
        if value <= 0:
            checks.fail(op, ": expected ", name, " > 0, got ", name, "=", value)
    a = check_output(op, torch.uint8 if out_dtype is None else out_dtype, scale, mean, std, v.c)
    p = check_placement(op, resized_height, resized_width, out_top, out_left, out_height, out_width, vflip)
    checks.check_output_bytes(op, out_shape(v, out_height, out_width), a.dtype,
                              lambda: f"out_height={out_height}, out_width={out_width}")
    return v, a, p


def check_geometry(op: str, geometry, n: int, values: bool = True) -> list[list[int]] | None:
    """The geometry table's rows as Python ints (its shape and dtype checked); None without
    `values` (a fake kernel: the values are not known until the op runs)."""
    checks.check_tensor(op, "geometry", geometry)
    checks.check_dtype(op, "geometry", geometry, torch.int64)
    if geometry.dim() != 2 or geometry.shape[0] != n or geometry.shape[1] != len(GEOMETRY_COLUMNS):
        checks.fail(op, ": expected geometry to be a [", n, ", ", len(GEOMETRY_COLUMNS), "] table (one row per image; "
                    "columns ", ", ".join(GEOMETRY_COLUMNS), "), got ", list(geometry.shape))
    return geometry.tolist() if values else None


def _flip(op: str, row: list[int], i: int, name: str) -> bool:
    v = row[COLUMN[name]]
    if v not in (0, 1):
        checks.fail(op, ": expected geometry[", i, "].", name, " to be 0 or 1, got geometry[", i, "].", name, "=", v)
    return bool(v)


class Row(NamedTuple):
    """One image's checked row of the geometry table: its window and flips, its Placement."""
    top: int
    left: int
    height: int
    width: int
    hflip: bool
    place: Placement  # in the size written before the transpose (out's, or its width x height)
    transpose: bool


def check_row(op: str, i: int, row: list[int], v: checks.ImageView, out_h: int, out_w: int, image: str) -> Row:
    """Row i of the geometry table, for image `image` (its view v) into out_h x out_w outputs."""
    prefix = f"geometry[{i}]."
    top, left, height, width = row[:4]
    _check_window(op, v, top, left, height, width, prefix, image)
    hflip, vflip = _flip(op, row, i, "hflip"), _flip(op, row, i, "vflip")
    # A transposed image is resized and placed as out_w x out_h, then written as out's out_h x out_w.
    turned = _flip(op, row, i, "transpose")
    names = ("out's width (transposed)", "out's height (transposed)") if turned else ("out's height", "out's width")
    place = check_placement(op, *(row[COLUMN[k]] for k in ("resized_height", "resized_width", "out_top", "out_left")),
                            *((out_w, out_h) if turned else (out_h, out_w)), vflip, prefix, names)
    return Row(top, left, height, width, hflip, place, turned)


def check_resized_crop_batch(imgs, geometry, out, layout, scale, mean, std, values: bool = True):
    """Returns (each image's ImageView, OutputArgs, each image's checked Row); without `values` (a
    fake kernel) the table's shape is checked, not its rows."""
    op = "resized_crop_batch"
    checks.check_tensor(op, "out", out)
    hwc = checks.parse_layout(op, layout)
    checks.check_image_dtype(op, "out", out)
    n = len(imgs)
    if out.dim() != 4 or not out.is_contiguous() or out.shape[0] != n:
        checks.fail(op, ": expected out to be a contiguous [", n, ", C, out_height, out_width] tensor (one image per "
                    "input), got ", list(out.shape), "" if out.is_contiguous() else " (not contiguous)")
    c, out_h, out_w = out.shape[1:]
    if out_h <= 0 or out_w <= 0:
        checks.fail(op, ": expected out's height and width > 0, got out of shape ", list(out.shape))
    table = check_geometry(op, geometry, n, values)
    a = check_output(op, out.dtype, scale, mean, std, c)
    views, rows = [], []
    for i, img in enumerate(imgs):  # nothing read may share memory with what is written
        arg = f"imgs[{i}]"
        checks.check_tensor(op, arg, img)
        checks.check_same_device(op, arg, img, "out", out)
        checks.check_dtype(op, arg, img, torch.uint8)
        if img.dim() != 3:
            checks.fail(op, ": expected ", arg, " to be a 3-D ", "[H, W, C]" if hwc else "[C, H, W]",
                        " image, got a ", img.dim(), "-D tensor")
        views.append(checks.image_view(op, arg, img, hwc))
        if views[-1].c != c:
            checks.fail(op, ": expected ", arg, " to have ", c, " channels (as out), got ", views[-1].c)
        checks.check_no_overlap(op, "out", out, arg, img)
        if table is None:
            continue
        rows.append(check_row(op, i, table[i], views[-1], out_h, out_w, arg))
    return views, a, rows
