"""Compose (a plain loop over its FusionPlan's segments) and SeedByIndex."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from fastprep.core._args import check_bool
from fastprep.core._rng import check_epoch, draw_seed, item_seed, seed_argument, seeded
from fastprep.transforms._base import Transform
from fastprep.transforms._plan import FusionPlan


def fusable(steps: list[nn.Module]) -> bool:
    """Whether `steps` run as one fused op call (a row of transforms/_plan.py's table), e.g.
    RandomCrop, RandomDilatedMask, RGBToYCbCr as crop_mask_ycbcr runs them."""
    return FusionPlan(steps).fused is not None


class Steps(nn.ModuleList):
    """Compose's steps: a ModuleList whose changes drop the Compose's plan (made again when next
    called), so a call does not check the steps for changes."""

    def __init__(self, owner: nn.Module, modules: Any):
        super().__init__(modules)
        self.__dict__["_owner"] = owner  # not a submodule: the owner holds this list

    def _get_name(self) -> str:
        return "ModuleList"  # Compose's repr as it always was

    def _changed(self) -> None:
        owner = self.__dict__.get("_owner")
        if owner is not None:
            owner.__dict__["_plan"] = None

    def __setitem__(self, idx: Any, module: nn.Module) -> None:
        super().__setitem__(idx, module)
        self._changed()

    def __delitem__(self, idx: Any) -> None:
        super().__delitem__(idx)
        self._changed()

    def __iadd__(self, modules: Any) -> Steps:
        self.extend(modules)
        return self

    def insert(self, index: int, module: nn.Module) -> None:
        super().insert(index, module)
        self._changed()

    def append(self, module: nn.Module) -> Steps:
        super().append(module)
        self._changed()
        return self

    def extend(self, modules: Any) -> Steps:
        super().extend(modules)
        self._changed()
        return self


class Compose(Transform):
    """Run transforms in order (fastprep's, torchvision's, any callable module), passing the whole
    sample to each. Steps that one fastprep op runs together are one op call, with the bits and
    the random draws of the steps (:class:`~fastprep.transforms._plan.FusionPlan` decides):

    - RandomCrop -> RandomDilatedMask -> RGBToYCbCr on a uint8 RGB image runs as the one op
      ``crop_mask_ycbcr``, reading only the crop window (of a PIL image too); the sample's masks,
      boxes and key points are cropped at the same window. Horizontal flips in front of the crop,
      or right after it (torchvision's usual order), ride along: the op reads the window's
      columns right to left.
    - RandomResizedCrop, or Resize (+ CenterCrop), with horizontal and vertical flips before or
      after, then ToDtype (+ Normalize), on a uint8 RGB image run as the one op ``resized_crop``
      (torchvision's ImageNet training and validation pipelines): the window read, resized (only
      the kept outputs of a resize), flipped, converted and normalised in one pass.
    - RandomHorizontalFlip -> RandomCrop / RandomResizedCrop never flips the whole image: the crop
      reads the mirrored window and reverses it.

    Args:
        transforms: the steps.
        fuse: False runs every step alone (the same bits, slower).
    """

    def __init__(self, transforms: list[nn.Module], fuse: bool = True):
        super().__init__()
        if not isinstance(transforms, (list, tuple, nn.ModuleList)) or not all(
                isinstance(t, nn.Module) for t in transforms):
            raise ValueError(f"Compose: expected transforms to be a list of nn.Modules (fastprep's or "
                             f"torchvision's transforms), got {transforms!r}")
        self.transforms = Steps(self, transforms)
        self.fuse = check_bool("Compose", "fuse", fuse)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in ("fuse", "transforms"):
            self.__dict__["_plan"] = None  # made again at the next call
        super().__setattr__(name, value)

    @property
    def plan(self) -> FusionPlan:
        """The steps' plan, made again when `fuse` or the steps change."""
        plan = self.__dict__.get("_plan")
        if plan is None:
            plan = self.__dict__["_plan"] = FusionPlan(list(self.transforms), self.fuse)
        return plan

    @property
    def fastprep_only(self) -> bool:  # type: ignore[override]
        return self.plan.fastprep_only

    def transform(self, sample: Any) -> Any:
        return self.plan(sample)


class SeedByIndex(torch.utils.data.Dataset):
    """Makes every random transform of item i draw from a generator seeded by (seed, i), so an
    item is the same whatever num_workers, worker order or epoch shuffling is.

    `seed` defaults to one drawn from torch's generator when the wrapper is made, so
    torch.manual_seed before building the dataset fixes everything. Call set_epoch(e) to get
    fresh (still reproducible) randomness every epoch.
    """

    def __init__(self, dataset: Any, seed: int | None = None):
        self.dataset = dataset
        self.seed = draw_seed() if seed is None else seed_argument("SeedByIndex", "seed", seed)
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = check_epoch("SeedByIndex", epoch)

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, i: int) -> Any:
        with seeded(item_seed(self.seed, i, self.epoch)):
            return self.dataset[i]
