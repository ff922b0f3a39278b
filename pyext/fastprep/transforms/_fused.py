"""The fused ops a FusionPlan calls (transforms/_plan.py): the samples of one op call
(:class:`FusedRun`, read where _fold.py's Geometry says), and one :class:`Fusion` per op: the roles
it fuses, the images it takes, what it makes, the call with what the steps drew, and its GPU decode split
(:class:`DeviceSplit`: what the Loader's threads make beside each window's JPEG cut, what the
device makes of the decoded windows)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from fastprep.ops._crop_mask_ycbcr import mask_ycbcr, oriented_window
from fastprep.ops._library import BELOW_AUTOGRAD
from fastprep.ops._resize_checks import GEOMETRY_COLUMNS
from fastprep.ops._resize_windows import resized_crop_windows
from fastprep.transforms._fusion_roles import FusionRole, Many, Maybe, One, Pattern
from fastprep.transforms._sample import Item
from fastprep.transforms._window import native_uint8_bilinear, read_region

_TOP, _LEFT, _HEIGHT, _WIDTH, _RESIZED_H, _RESIZED_W = (
    GEOMETRY_COLUMNS.index(c) for c in ("top", "left", "height", "width", "resized_height", "resized_width"))


class FusedRun:
    """Samples of one op call, consecutive in their chunk (sample k is the chunk's start + k): each
    one's image (its Item, or None for a plain array or tensor), input (what the op reads: its
    pixels, or its window's JPEG cut in the GPU decode split), `geometry` (row k of an
    int64 table whose columns are ops/_resize_checks.py's GEOMETRY_COLUMNS: its read, flips and
    placement, _fold.py's Geometry.to_table) and the seeds of the steps whose draws the op takes,
    by fusion role ("mask"); `out_size`: what the op writes for every sample; `size`: the read's when all
    are one size."""

    __slots__ = ("start", "layout", "size", "out_size", "images", "raws", "inputs", "geometry", "seeds")

    def __init__(self, start: int, layout: str, images: list[Item | None], raws: list[Any],
                 inputs: list[torch.Tensor | None], geometry: np.ndarray, seeds: dict[str, list[int]],
                 out_size: tuple[int, int], reduced: bool = False):
        self.start, self.layout, self.images, self.raws, self.inputs = start, layout, images, raws, inputs
        self.geometry, self.seeds, self.out_size = geometry, seeds, out_size
        g = geometry
        for k, src in enumerate(inputs):
            if src is None:  # a PIL image or WindowedImage: only its window is read (or decoded)
                top, left, height, width = (int(v) for v in g[k, :4])
                # reduced (jpeg_scale="reduced"): a JPEG window read at a scale no smaller than its resize
                place = int(g[k, _RESIZED_H]), int(g[k, _RESIZED_W])
                at_least = place if reduced and place[0] else None
                inputs[k] = read_region(images[k], top, top + height, left, left + width, at_least)
                g[k, _TOP] = g[k, _LEFT] = 0
                if at_least is not None and isinstance(inputs[k], torch.Tensor):  # a scaled read: its HWC size
                    g[k, _HEIGHT], g[k, _WIDTH] = inputs[k].shape[0], inputs[k].shape[1]
        heights, widths = g[:, _HEIGHT], g[:, _WIDTH]
        one = len(g) and (heights == heights[0]).all() and (widths == widths[0]).all()
        self.size = (int(heights[0]), int(widths[0])) if one else None

    def column(self, name: str) -> list[int]:
        """The samples' values of one geometry column, as Python ints."""
        return self.geometry[:, GEOMETRY_COLUMNS.index(name)].tolist()

    def __len__(self) -> int:
        return len(self.inputs)

    def output_like(self, k: int, image: torch.Tensor) -> Any:
        """Sample k's loaded item with the op's output image in its image's place (its type kept)."""
        raw, item = self.raws[k], self.images[k]
        image = image if item is None else item.wrap(image)
        if type(raw) in (tuple, list):
            items = [image, *raw[1:]]
            return items if type(raw) is list else tuple(items)
        return image


def whole_reads(geometry: np.ndarray, windows: list[torch.Tensor]) -> np.ndarray:
    """A copy of the geometry rows whose reads are the windows whole (the split's decoded windows)."""
    table = np.array(geometry, np.int64).reshape(len(windows), len(GEOMETRY_COLUMNS))
    for k, w in enumerate(windows):
        table[k, [_TOP, _LEFT, _HEIGHT, _WIDTH]] = 0, 0, w.shape[-2], w.shape[-1]
    return table


@dataclass(frozen=True)
class DeviceSplit:
    """A row's half for the GPU decode split (``Loader(decode_on=...)``, loader/_device_split.py).

    The Loader's threads run the row's batch path as without the split (same seeds, same draws,
    same FusedRuns), but each run's inputs are the windows' JPEG cuts (PackedJpeg.cut: the
    restart intervals covering the window; a JpegFile's whole file), not their pixels. The device
    decodes the batch's cuts, crops each to its window and hands them to `finish`, in a FusedRun
    with the threads' flips and placement: the row's op on the same pixels, on the device.

    Args:
        pipeline: the transforms the row splits, as its refusals show them.
        host: (group, run, rows) -> None: what the threads make per run beyond the cuts (the seed
            row's packed masks; nothing for a row whose draws are all geometry): ``rows(name,
            shape, dtype)`` is the run's rows ``[len(run), *shape]`` of the batch's tensor `name`
            (slot storage, pinned for a CUDA device), handed to `finish` on the device.
        finish: (group, run, extras) -> images ``[len(run), 3, h, w]`` of group.out_dtype on the
            windows' device: run.inputs are the decoded windows (uint8 CHW, the CPU run's
            inputs), run.layout "CHW"; `extras`: host's tensors, moved there.
    """
    pipeline: str
    host: Callable[[Any, FusedRun, Callable[[str, tuple[int, ...], torch.dtype], torch.Tensor]], None]
    finish: Callable[[Any, FusedRun, dict[str, torch.Tensor]], torch.Tensor]


@dataclass(frozen=True)
class Fusion:
    """A row of FusionPlan's table.

    Args:
        op: the op's name (torch.ops.fastprep.<op>).
        pattern: the steps' roles the row takes (fusion_roles.Pattern), matched at the start of a run.
        window: the roles of the step that cuts the window (crop; or resized_crop, resize, crop:
            the first such step's layout reads the image, its repr leads the op's errors).
        valid: what else the matched steps must satisfy.
        takes_pixels: (group, tensor, layout) -> whether the op takes that image's pixels.
        takes_windowed: (group, item) -> whether it takes a PIL image or WindowedImage (read by window).
        out_dtype: (group) -> the output's dtype.
        out_size: (group) -> (height, width) of every sample's output image (3 channels), as the
            steps fix it; None where it follows each image's size (a Resize of the shorter side).
        run: (group, run, out) -> None: the op on the run's samples into `out` ([n, 3, h, w]).
        split: the row's GPU decode split (None: ``decode_on`` refuses the row).
    """
    op: str
    pattern: Pattern
    window: frozenset[FusionRole]
    valid: Callable[[list], bool]
    takes_pixels: Callable[[Any, torch.Tensor, str], bool]
    takes_windowed: Callable[[Any, Item], bool]
    out_dtype: Callable[[Any], torch.dtype]
    out_size: Callable[[Any], tuple[int, int] | None]
    run: Callable[[Any, FusedRun, torch.Tensor], None]
    split: DeviceSplit | None = None


def _rgb_uint8(group: Any, t: torch.Tensor, layout: str) -> bool:
    """crop_mask_ycbcr's images: uint8, 3-D, RGB (RGBA with alpha='drop')."""
    if t.dtype != torch.uint8 or t.dim() != 3:
        return False
    c = t.shape[2] if layout == "HWC" else t.shape[0]
    return c == 3 or (c == 4 and group.by_fusion_role["ycbcr"].alpha == "drop")


def _rgb_mode(group: Any, item: Item) -> bool:
    mode = item.value.mode
    return mode == "RGB" or (mode == "RGBA" and item.pil and group.by_fusion_role["ycbcr"].alpha == "drop")


def _flips_after_crop_read_chw(steps: list) -> bool:
    """A flip after the crop flips its CHW output: one of HWC layout would flip rows. A vertical
    flip or a quarter turn anywhere: every step CHW (a turn of an HWC image gives CHW)."""
    roles = [s.fusion_role for s in steps]
    if any(r in ("vflip", "rotate90") for r in roles):
        return all(s.layout == "CHW" for s in steps if s.fusion_role in _CROP_MASK_GEOMETRY)
    return all(s.layout == "CHW" for s in steps[roles.index("crop"):] if s.fusion_role == "hflip")


def _orientations(run: FusedRun) -> list[list[bool]]:
    """The run's hflip, vflip and transpose columns as bools (the op's hflips, vflips, transposes)."""
    return [[bool(f) for f in run.column(name)] for name in ("hflip", "vflip", "transpose")]


def _run_crop_mask_ycbcr(group: Any, run: FusedRun, out: torch.Tensor) -> None:
    mask, color = group.by_fusion_role["mask"], group.by_fusion_role["ycbcr"]
    inputs = run.inputs if color.alpha != "drop" else [color.rgb(s, run.layout) for s in run.inputs]
    with BELOW_AUTOGRAD():  # the plan's own buffers, never part of a graph: skip the op's Python autograd check
        # height x width: what each sample makes (its window is width x height when transposed)
        torch.ops.fastprep.crop_mask_ycbcr_batch.default(inputs, run.column("top"), run.column("left"),
                                                         run.out_size[0], run.out_size[1], mask.p, run.seeds["mask"],
                                                         out, run.layout, mask.structure, color.scale, True, None,
                                                         *_orientations(run))


def _mask_rows(group: Any, run: FusedRun, rows: Callable) -> None:
    """The split's threads: each sample's packed mask, the one the fused op makes of its seed (on
    the output: after the turns)."""
    mask, (h, w) = group.by_fusion_role["mask"], run.out_size
    make = torch.ops.fastprep.random_dilated_mask.default
    torch.stack([make([h, w], mask.p, seed, mask.structure, 1, True) for seed in run.seeds["mask"]],
                out=rows("masks", (h, (w + 7) // 8), torch.uint8))


def _mask_ycbcr_on_device(group: Any, run: FusedRun, extras: dict[str, torch.Tensor]) -> torch.Tensor:
    """The split's device: the windows oriented as the fused op reads them (flips, a quarter turn's
    transpose), then mask + YCbCr with the threads' masks."""
    images = torch.stack([oriented_window(w, *f) for w, *f in zip(run.inputs, *_orientations(run))])
    return mask_ycbcr(images, extras["masks"], group.out_dtype, group.by_fusion_role["ycbcr"].scale)


def _out_size(group: Any) -> tuple[int, int] | None:
    """The last crop's or resize's size: what the row writes of every sample (None after a quarter
    turn of a size not square: each sample's is its turn's)."""
    size = None
    for step in group.steps:
        if step.fusion_role in (FusionRole.CROP, FusionRole.RESIZED_CROP):
            size = tuple(step.size)
        elif step.fusion_role == FusionRole.RESIZE:
            size = step.fixed_size
        elif step.fusion_role == FusionRole.ROTATE90 and size is not None and size[0] != size[1]:
            size = None
    return size


# Flips and quarter turns fold into the window's read (_fold.py: a turn is a horizontal flip then a
# transpose) before the mask, which is drawn on the output: the op draws it there and transposes it
# with the read. A turn between the mask and YCbCr stays unfused (the pattern stops there): the
# mask would then be drawn before the turn, in other coordinates than the output's, which needs the
# mask's own flips and transpose per sample (three more values), not the read's.
_CROP_MASK_GEOMETRY = (FusionRole.HFLIP, FusionRole.VFLIP, FusionRole.ROTATE90, FusionRole.CROP)
_CROP_MASK_TURNS = Many(FusionRole.HFLIP, FusionRole.VFLIP, FusionRole.ROTATE90)

CROP_MASK_YCBCR = Fusion(
    op="crop_mask_ycbcr_batch",
    pattern=Pattern(_CROP_MASK_TURNS, One(FusionRole.CROP), _CROP_MASK_TURNS, One(FusionRole.MASK),
                    One(FusionRole.YCBCR)),
    window=frozenset({FusionRole.CROP}),
    valid=_flips_after_crop_read_chw,
    takes_pixels=_rgb_uint8,
    takes_windowed=_rgb_mode,
    out_dtype=lambda group: group.by_fusion_role["ycbcr"].out_dtype or torch.uint8,
    out_size=_out_size,
    run=_run_crop_mask_ycbcr,
    split=DeviceSplit(pipeline="RandomCrop(size) -> RandomDilatedMask(p) -> RGBToYCbCr(), with "
                               "flips and RandomRotate90 before or after the crop if you like",
                      host=_mask_rows, finish=_mask_ycbcr_on_device),
)


_WINDOW_ROLES = (FusionRole.CROP, FusionRole.RESIZED_CROP, FusionRole.RESIZE)


def _resized_crop_valid(steps: list) -> bool:
    """Layouts: steps before the window step read the image as it does (all CHW, or the one flip a
    RandomCrop / RandomResizedCrop reads mirrored), steps after it its CHW output. Normalize only on
    float32 (torchvision normalises float16 in float16) with one value or one per RGB channel."""
    roles = [s.fusion_role for s in steps]
    first = next(i for i, r in enumerate(roles) if r in _WINDOW_ROLES)
    window, before = steps[first], steps[:first]
    reads_mirrored = roles[:first] == ["hflip"] and roles[first] in ("crop", "resized_crop")
    if any(s.layout != window.layout for s in before) or (before and window.layout != "CHW" and not reads_mirrored):
        return False
    if any(s.layout != "CHW" for s in steps[first + 1:]):
        return False
    norm = next((s for s in steps if s.fusion_role == "normalize"), None)
    if norm is None:
        return True
    to_dtype = next(s for s in steps if s.fusion_role == "dtype")
    return to_dtype.dtype == torch.float32 and len(norm.mean) in (1, 3) and len(norm.std) in (1, 3)


def _op_resizes(group: Any, t: torch.Tensor, layout: str) -> bool:
    """resized_crop's images: uint8 RGB on a CPU where torchvision keeps uint8 for a bilinear resize."""
    return t.dtype == torch.uint8 and t.dim() == 3 and (t.shape[2] if layout == "HWC" else t.shape[0]) == 3 and \
        t.device.type == "cpu" and native_uint8_bilinear()


def _op_resizes_windowed(group: Any, item: Item) -> bool:
    return item.value.mode == "RGB" and native_uint8_bilinear()


def _resize_args(group: Any) -> tuple[bool, float, list[float] | None, list[float] | None]:
    """(antialias, scale, mean, std) of the resized-crop row's op."""
    to_dtype, norm = group.by_fusion_role.get("dtype"), group.by_fusion_role.get("normalize")
    resize = group.by_fusion_role.get("resized_crop") or group.by_fusion_role["resize"]
    mean, std = (None, None) if norm is None else (list(norm.mean), list(norm.std))
    return resize.antialias, 1.0 if to_dtype is None else to_dtype.op_scale, mean, std


def _run_resized_crop(group: Any, run: FusedRun, out: torch.Tensor) -> None:
    antialias, scale, mean, std = _resize_args(group)
    with BELOW_AUTOGRAD():
        torch.ops.fastprep.resized_crop_batch.default(run.inputs, torch.from_numpy(run.geometry), out, run.layout,
                                                      antialias, scale, mean, std)


def _resized_crop_on_device(group: Any, run: FusedRun, extras: dict[str, torch.Tensor]) -> torch.Tensor:
    """The split's device: the row's op on the decoded windows, batched in torch ops on their device
    (ops/_resize_windows.py: the kernel's bits on those pixels; the CPU stand-in runs the same)."""
    out = torch.empty(len(run), 3, *run.out_size, dtype=group.out_dtype, device=run.inputs[0].device)
    return resized_crop_windows(run.inputs, torch.from_numpy(run.geometry), out, *_resize_args(group))


_FLIPS = Many(FusionRole.HFLIP, FusionRole.VFLIP)
_CROP = Maybe(One(FusionRole.CROP), _FLIPS)
# After the resize a quarter turn joins the flips (the op writes transposed); before it, it cannot:
# torch resamples columns, then rows, each rounded to uint8, so a resize does not commute with it.
_TURNS = Many(FusionRole.HFLIP, FusionRole.VFLIP, FusionRole.ROTATE90)

RESIZED_CROP = Fusion(
    op="resized_crop_batch",
    pattern=Pattern(_FLIPS, _CROP, One(FusionRole.RESIZED_CROP, FusionRole.RESIZE), _TURNS,
                    Maybe(One(FusionRole.CROP), _TURNS),
                    Maybe(One(FusionRole.DTYPE), Maybe(One(FusionRole.NORMALIZE)))),
    window=frozenset(_WINDOW_ROLES),
    valid=_resized_crop_valid,
    takes_pixels=_op_resizes,
    takes_windowed=_op_resizes_windowed,
    out_dtype=lambda group: group.by_fusion_role["dtype"].dtype if "dtype" in group.by_fusion_role else torch.uint8,
    out_size=_out_size,
    run=_run_resized_crop,
    split=DeviceSplit(pipeline="RandomResizedCrop(size) or Resize(size) (+ CenterCrop / RandomCrop), flips "
                               "before or after, RandomRotate90 after, ToDtype(scale=True) (+ Normalize)",
                      host=lambda group, run, rows: None, finish=_resized_crop_on_device),
)
"""RandomResizedCrop or Resize (+ CenterCrop / RandomCrop), horizontal and vertical flips before or
after, quarter turns (RandomRotate90) after, ToDtype (+ Normalize): one resized_crop_batch call
(docs/transforms.md)."""
