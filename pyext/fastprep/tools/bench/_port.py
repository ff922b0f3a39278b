"""A torchvision transform ported to fastprep's transforms, step by step, for `python -m fastprep
bench --data`: the same names and arguments (fastprep.transforms follows torchvision v2's), read
from the torchvision object's attributes.

`port(transform)` walks a torchvision Compose (v2 or v1; nested ones flattened) and returns a
`Port`: fastprep's Compose when every step has a fastprep counterpart, else None, with what
happened to each step. Conversions fastprep does by itself (ToImage, PILToTensor, ToPureTensor:
fastprep's steps take PIL images and arrays and return CHW tensors) are dropped and said; v1's
ToTensor becomes ToDtype(float32, scale=True) (what it does to a uint8 image).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

# torchvision class name -> the attributes read, as fastprep's keyword arguments (same names)
ARGUMENTS = {
    "RandomResizedCrop": ("size", "scale", "ratio", "interpolation", "antialias"),
    "Resize": ("size", "interpolation", "max_size", "antialias"),
    "CenterCrop": ("size",),
    "RandomCrop": ("size", "padding", "pad_if_needed", "fill", "padding_mode"),
    "RandomHorizontalFlip": ("p",),
    "RandomVerticalFlip": ("p",),
    "ToDtype": ("dtype", "scale"),
    "Normalize": ("mean", "std", "inplace"),
}
DROPPED = ("ToImage", "PILToTensor", "ToPureTensor")


@dataclass
class Port:
    """`compose`: fastprep's Compose of the ported steps (None when a step has no port); `steps`:
    (torchvision step, what became of it) in order; `unported`: the steps without a port."""

    compose: Any
    steps: list[tuple[str, str]] = field(default_factory=list)
    unported: list[str] = field(default_factory=list)

    @property
    def fused(self) -> bool:
        return self.compose is not None and getattr(self.compose.plan, "fused", None) is not None

    def code(self) -> str:
        """fastprep's Compose as code (T = fastprep.transforms)."""
        if self.compose is None:
            return ""
        return "T.Compose([" + ", ".join(f"T.{t!r}" for t in self.compose.transforms) + "])"


def flatten(transform: Any) -> list[Any]:
    """The steps of `transform`: a Compose's (any library's: a `transforms` list), nested ones
    flattened; anything else is one step."""
    inner = getattr(transform, "transforms", None)
    if isinstance(inner, (list, tuple, torch.nn.ModuleList)) and type(transform).__name__ == "Compose":
        return [s for t in inner for s in flatten(t)]
    return [transform]


def _library(step: Any) -> str:
    module = type(step).__module__
    return module.split(".")[0] if module else ""


def _one(step: Any) -> tuple[Any, str]:
    """(fastprep step or None, what became of it) for one torchvision step."""
    from fastprep import transforms as T  # noqa: PLC0415

    name = type(step).__name__
    lib = _library(step)
    if lib == "fastprep":
        return step, "fastprep's already"
    if lib != "torchvision":
        return None, f"not torchvision's ({type(step).__module__}.{name}): no port"
    if name in DROPPED:
        return "drop", "dropped (fastprep's steps take PIL images and arrays and return tensors)"
    if name == "ToTensor":
        return T.ToDtype(torch.float32, scale=True), "ToDtype(float32, scale=True): v1's ToTensor on uint8 images"
    if name not in ARGUMENTS:
        return None, "no port in fastprep.transforms"
    kwargs = {a: getattr(step, a) for a in ARGUMENTS[name] if hasattr(step, a)}
    if name == "ToDtype" and isinstance(kwargs.get("dtype"), dict):
        return None, "no port: a ToDtype by tv_tensor type (a dict of dtypes)"
    if name == "Resize" and isinstance(kwargs.get("size"), (list, tuple)) and len(kwargs["size"]) == 1:
        kwargs["size"] = kwargs["size"][0]
    for key in ("size", "scale", "ratio", "padding"):
        if isinstance(kwargs.get(key), list):
            kwargs[key] = tuple(kwargs[key])
    try:
        return getattr(T, name)(**kwargs), "ported"
    except (TypeError, ValueError) as exc:
        return None, f"no port for these arguments: {exc}"


def port(transform: Any) -> Port:
    """Port `transform` (a torchvision v2 or v1 Compose, or one step) to fastprep.transforms.

    Example:
        >>> from torchvision.transforms import v2
        >>> port(v2.Compose([v2.RandomResizedCrop(224), v2.ToImage()])).code()
        'T.Compose([T.RandomResizedCrop(size=(224, 224), scale=(0.08, 1.0), ratio=(0.75, 1.33...))])'
    """
    from fastprep import transforms as T  # noqa: PLC0415

    made, result = [], Port(None)
    for step in flatten(transform):
        name = type(step).__name__
        got, how = _one(step)
        result.steps.append((name, how))
        if got is None:
            result.unported.append(name)
        elif got != "drop":
            made.append(got)
    if not result.unported:
        result.compose = T.Compose(made)
    return result
