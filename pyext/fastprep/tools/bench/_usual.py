"""The usual pipeline `python -m fastprep bench` compares fastprep with: torchvision v2's ImageNet
pipelines as torchvision users write them (on the PIL images torchvision's ImageFolder hands out),
and fastprep's port of them.

- training: RandomResizedCrop(224), RandomHorizontalFlip(), ToImage(), ToDtype(float32, scale=True),
  Normalize(ImageNet mean, std);
- validation: Resize(256), CenterCrop(224), ToImage(), ToDtype, Normalize.

Where torchvision does not import (not installed, or built for another torch), `PillowStandIn` runs
the same steps the way torchvision v2 runs them on a PIL image (Pillow's crop and bilinear resize,
then the tensor conversion, ``to(float32) * (1 / 255)``, ``sub(mean).div_(std)``): a stand-in of the
same cost, named as such wherever its figures are printed.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
PIPELINES = ("train", "val")
STEPS = {"train": "RandomResizedCrop(224) + RandomHorizontalFlip + ToDtype + Normalize",
         "val": "Resize(256) + CenterCrop(224) + ToDtype + Normalize"}


def torchvision_v2() -> tuple[Any, str]:
    """(torchvision.transforms.v2, "torchvision 0.x v2"), or (None, why it does not import)."""
    try:
        import torchvision  # noqa: PLC0415 (optional: the baseline where installed)
        from torchvision.transforms import v2  # noqa: PLC0415
    except Exception as exc:  # noqa: BLE001 (not installed, or its ops built for another torch)
        return None, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return v2, f"torchvision {torchvision.__version__.split('+')[0]} v2"


def steps(lib: Any, pipeline: str) -> list[Any]:
    """The ImageNet `pipeline` ("train" or "val") in `lib` (torchvision's v2 or fastprep.transforms:
    the same names and arguments); ToImage only where `lib` has it (fastprep's steps take PIL
    images and arrays and return tensors)."""
    if pipeline not in PIPELINES:
        raise ValueError(f"steps: expected pipeline to be one of {PIPELINES}, got {pipeline!r}")
    geometry = ([lib.RandomResizedCrop(224), lib.RandomHorizontalFlip()] if pipeline == "train"
                else [lib.Resize(256), lib.CenterCrop(224)])
    to_image = [lib.ToImage()] if hasattr(lib, "ToImage") and lib.__name__.startswith("torchvision") else []
    return [*geometry, *to_image, lib.ToDtype(torch.float32, scale=True), lib.Normalize(MEAN, STD)]


def usual(pipeline: str) -> tuple[Any, str]:
    """(the usual transform, what it is): torchvision v2's Compose, else the Pillow stand-in."""
    v2, what = torchvision_v2()
    if v2 is not None:
        return v2.Compose(steps(v2, pipeline)), what
    why = "not installed" if what.startswith("ModuleNotFoundError") else f"does not import: {what}"
    return PillowStandIn(pipeline), f"a stand-in for torchvision v2's steps (Pillow + torch; torchvision {why})"


def fastprep_port(pipeline: str) -> Any:
    """The same pipeline in fastprep's transforms (fused: one op call a sample)."""
    from fastprep import transforms as T  # noqa: PLC0415

    return T.Compose(steps(T, pipeline))


def usual_folder(root: str, transform: Any) -> Any:
    """torchvision's ImageFolder over `root` with `transform`, or (without torchvision) the
    same layout, order and Pillow loader from fastprep.tools.photos."""
    try:
        from torchvision.datasets import ImageFolder  # noqa: PLC0415
    except Exception:  # noqa: BLE001
        from fastprep.tools.photos import ImageFolder  # noqa: PLC0415
    return ImageFolder(root, transform=transform)


class PillowStandIn:
    """torchvision v2's ImageNet `pipeline` on a PIL image, step for step as v2 runs it there:
    RandomResizedCrop's window drawn by its rule from torch's generator, Pillow's crop and
    bilinear resize (v2 hands PIL images to Pillow), the flip by Pillow, then ToImage's tensor
    (a CHW view of the HWC array), ToDtype's ``to(float32).mul_(1 / 255)``, Normalize's
    ``sub(mean).div_(std)``.

    Example:
        >>> PillowStandIn("train")(PIL.Image.new("RGB", (500, 375))).shape
        torch.Size([3, 224, 224])
    """

    def __init__(self, pipeline: str):
        if pipeline not in PIPELINES:
            raise ValueError(f"PillowStandIn: expected pipeline to be one of {PIPELINES}, got {pipeline!r}")
        self.pipeline = pipeline
        self.mean, self.std = torch.tensor(MEAN).view(3, 1, 1), torch.tensor(STD).view(3, 1, 1)

    def __repr__(self) -> str:
        return f"PillowStandIn({self.pipeline!r})"

    def __call__(self, image: Any) -> torch.Tensor:
        from PIL import Image  # noqa: PLC0415

        if self.pipeline == "train":
            top, left, h, w = _resized_crop_window(image.height, image.width)
            image = image.crop((left, top, left + w, top + h)).resize((224, 224), Image.BILINEAR)
            if torch.rand(1) < 0.5:
                image = image.transpose(Image.FLIP_LEFT_RIGHT)
        else:
            short, long = sorted((image.width, image.height))
            size = (256, int(256 * long / short))
            image = image.resize(size if image.width <= image.height else size[::-1], Image.BILINEAR)
            top, left = int(round((image.height - 224) / 2.0)), int(round((image.width - 224) / 2.0))
            image = image.crop((left, top, left + 224, top + 224))
        x = torch.from_numpy(np.array(image, copy=True)).permute(2, 0, 1)
        return x.to(torch.float32).mul_(1.0 / 255).sub(self.mean).div_(self.std)


def _resized_crop_window(height: int, width: int, scale: tuple[float, float] = (0.08, 1.0),
                         ratio: tuple[float, float] = (3 / 4, 4 / 3)) -> tuple[int, int, int, int]:
    """torchvision's RandomResizedCrop.get_params: (top, left, h, w), drawn from torch's generator."""
    area, log_ratio = height * width, (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(10):
        target = area * float(torch.empty(1).uniform_(*scale))
        aspect = math.exp(float(torch.empty(1).uniform_(*log_ratio)))
        w, h = round(math.sqrt(target * aspect)), round(math.sqrt(target / aspect))
        if 0 < w <= width and 0 < h <= height:
            return int(torch.randint(0, height - h + 1, (1,))), int(torch.randint(0, width - w + 1, (1,))), h, w
    in_ratio = width / height
    if in_ratio < min(ratio):
        w, h = width, round(width / min(ratio))
    elif in_ratio > max(ratio):
        h, w = height, round(height * max(ratio))
    else:
        w, h = width, height
    return (height - h) // 2, (width - w) // 2, h, w
