"""A transform's steps as the advice reads them (fastprep.monitoring._pipeline.PipelineFacts.steps):
each step's name, whether it is fastprep's, the fused op it runs in, its jpeg_scale and its size."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Step:
    """One step of the transform: its class (or function) name, whether it is fastprep's, and the
    fused op it runs in (None: alone); `jpeg_scale` is a fastprep resize's jpeg_scale ("exact", "reduced");
    `size` its output size as its ``size`` says (an int for a square or shorter side, (h, w)), None
    when it has none."""
    name: str
    fastprep: bool = False
    fused: str | None = None
    jpeg_scale: str | None = None
    size: int | tuple[int, ...] | None = None

    def describe(self) -> str:
        return self.name + ("" if self.fastprep else " (not fastprep's)")


def steps_of(transform: Any) -> tuple[Step, ...]:
    """The steps of a transform: a Compose's (fastprep's, with its fused groups; torchvision's;
    anything with a ``transforms`` list), or the one callable."""
    if transform is None:
        return ()
    from fastprep.transforms._base import Transform  # noqa: PLC0415
    from fastprep.transforms._group import FusedGroup  # noqa: PLC0415
    from fastprep.transforms._plan import FusionPlan  # noqa: PLC0415

    plan = getattr(transform, "plan", None)
    if isinstance(plan, FusionPlan):
        out: list[Step] = []
        for seg in plan.segments:
            if isinstance(seg, FusedGroup):
                op = seg.fusion.op.removesuffix("_batch")  # the op a sample runs (its batch form: a Loader's)
                out += [_step(s, Transform, op) for s in seg.steps]
            else:
                inner = [getattr(seg, "flip", None), getattr(seg, "crop", None)] if hasattr(seg, "crop") else [seg.step]
                for s in inner:
                    out += list(steps_of(s)) if isinstance(getattr(s, "plan", None), FusionPlan) else [
                        _step(s, Transform, None)]
        return tuple(out)
    inner = getattr(transform, "transforms", None)
    if isinstance(inner, (list, tuple)) or type(inner).__name__ == "ModuleList":
        return tuple(s for t in inner for s in steps_of(t))
    return (_step(transform, Transform, None),)


def _step(step: Any, transform_class: type, fused: str | None) -> Step:
    name = getattr(step, "__name__", None) if not isinstance(step, transform_class) else None
    name = name or type(step).__name__
    jpeg_scale = getattr(step, "jpeg_scale", None) if isinstance(step, transform_class) else None
    return Step(name, isinstance(step, transform_class), fused, jpeg_scale if isinstance(jpeg_scale, str) else None,
                _size(getattr(step, "size", None)))


def _size(size: Any) -> int | tuple[int, ...] | None:
    """A step's ``size`` as torchvision spells it (an int, [int], (h, w)): an int where one number
    says it (a square, a shorter side), else the tuple; None for anything else."""
    if isinstance(size, int) and not isinstance(size, bool):
        return size
    if isinstance(size, (list, tuple)) and size and all(isinstance(v, int) and not isinstance(v, bool) for v in size):
        return size[0] if len(set(size)) == 1 else tuple(size)
    return None
