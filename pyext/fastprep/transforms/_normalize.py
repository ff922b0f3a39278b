"""Normalize: torchvision v2's ``(x - mean) / std`` per channel of float images, in its torch calls."""

from __future__ import annotations

from typing import Any

import torch

from fastprep.core._args import check_bool, check_real
from fastprep.transforms._base import Transform
from fastprep.transforms._fusion_roles import FusionRole
from fastprep.transforms._inputs import check_layout, chw
from fastprep.transforms._pixels import map_pixels


def _values(name: str, value: Any) -> tuple[float, ...]:
    values = value if isinstance(value, (tuple, list)) else (value,)
    if not values:
        raise ValueError(f"Normalize: expected {name} to be a number or a sequence of them (one per channel), "
                         f"got {value!r}")
    return tuple(check_real("Normalize", name, v) for v in values)


class Normalize(Transform):
    """torchvision v2's ``Normalize(mean, std, inplace=False)`` on the CPU (any device in fact): each
    channel c of a float image (or video) becomes ``(x - mean[c]) / std[c]``, in the image's dtype,
    as ``x.sub(mean).div_(std)`` with mean and std as tensors of that dtype: torchvision's bits.
    Masks, boxes and other values pass through. Integer images are refused (convert them first:
    ``ToDtype(torch.float32, scale=True)``).

    In :class:`Compose`, ``ToDtype(torch.float32, ...)`` + ``Normalize`` after RandomResizedCrop or
    Resize (+ CenterCrop) are part of the one op call (the same float32 operations). Where images
    travel to the GPU as uint8 (a Loader without ToDtype), ``CompactBatch.expand(dtype, scale, mean,
    std)`` normalises on the device with the same operations.

    Args:
        mean, std: one value per channel, or one for all; std may not hold 0 (torchvision's error).
        inplace: normalise the image tensor itself (a float tensor given; numpy arrays too).
        layout: "CHW", or "HWC" for plain HWC tensors (the result is CHW).

    Example:
        >>> Normalize([0.5], [0.25])(torch.ones(1, 1, 2))
        tensor([[[2., 2.]]])
    """

    fusion_role = FusionRole.NORMALIZE

    def __init__(self, mean: Any, std: Any, inplace: bool = False, layout: str = "CHW"):
        super().__init__()
        self.mean, self.std = _values("mean", mean), _values("std", std)
        if not all(self.std):
            raise ValueError(f"Normalize: expected std to hold no 0 (it divides by it), got std={std!r}")
        self.inplace = check_bool("Normalize", "inplace", inplace)
        self.layout = check_layout("Normalize", layout)

    def repr_args(self) -> dict[str, Any]:
        args: dict[str, Any] = {"mean": list(self.mean), "std": list(self.std)}
        if self.inplace:
            args["inplace"] = True
        return args | ({"layout": self.layout} if self.layout != "CHW" else {})

    def transform(self, sample: Any) -> Any:
        def normalize(t: torch.Tensor, layout: str) -> torch.Tensor:
            x = chw(t, layout)
            if not x.is_floating_point():
                raise TypeError(f"expected a float image, got {x.dtype}; convert it first: "
                                f"ToDtype(torch.float32, scale=True)")
            mean = torch.as_tensor(self.mean, dtype=x.dtype, device=x.device).view(-1, 1, 1)
            std = torch.as_tensor(self.std, dtype=x.dtype, device=x.device).view(-1, 1, 1)
            return (x.sub_(mean) if self.inplace else x.sub(mean)).div_(std)

        return map_pixels(self, sample, self.layout, normalize)
