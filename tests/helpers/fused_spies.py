"""Spies on the fused path (each records the calls a FusionPlan makes from now on) and the transform
pipelines the transform and Loader tests share."""

import dataclasses

import torch

import fastprep.transforms._plan as plan_mod
from fastprep import transforms as T


def fused_calls(monkeypatch) -> list[list[bool]]:
    """Records every fused op call a FusionPlan makes from now on: each call's per-sample hflips."""
    calls = []
    row = plan_mod.FUSIONS[0]
    spy = dataclasses.replace(row, run=lambda group, run, out: calls.append(list(map(bool, run.column("hflip")))) or row.run(group, run, out))
    monkeypatch.setattr(plan_mod, "FUSIONS", (spy, *plan_mod.FUSIONS[1:]))
    return calls


def fused_and_unfused(steps, sample, seed):
    """(fused, unfused) Compose of `steps` on `sample` under torch seed `seed`, which drew alike."""
    torch.manual_seed(seed)
    fused = T.Compose(steps)(sample)
    after = torch.randint(0, 2**30, ())
    torch.manual_seed(seed)
    unfused = T.Compose(steps, fuse=False)(sample)
    assert torch.equal(torch.randint(0, 2**30, ()), after)  # the same draws
    return fused, unfused


MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def resized_crop_calls(monkeypatch) -> list[int]:
    """Records every resized_crop_batch call a FusionPlan makes from now on: its number of samples."""
    calls = []
    rows = list(plan_mod.FUSIONS)
    k = next(i for i, row in enumerate(rows) if row.op == "resized_crop_batch")
    row = rows[k]
    rows[k] = dataclasses.replace(row, run=lambda group, run, out: calls.append(len(run)) or row.run(group, run, out))
    monkeypatch.setattr(plan_mod, "FUSIONS", tuple(rows))
    return calls


PIPELINES = {
    "imagenet": lambda: [T.RandomResizedCrop(24), T.RandomHorizontalFlip(), T.ToDtype(torch.float32, scale=True),
                         T.Normalize(MEAN, STD)],
    "flips before, float16": lambda: [T.RandomHorizontalFlip(), T.RandomVerticalFlip(), T.RandomResizedCrop((20, 28)),
                                      T.ToDtype(torch.float16, scale=True)],
    "validation": lambda: [T.Resize(40), T.CenterCrop(32), T.ToDtype(torch.float32, scale=True),
                           T.Normalize(MEAN, STD)],
    "validation, flips, bfloat16": lambda: [T.RandomVerticalFlip(), T.Resize((50, 61)), T.RandomHorizontalFlip(),
                                            T.CenterCrop(33), T.ToDtype(torch.bfloat16, scale=True)],
    "crop, resize, max_size": lambda: [T.RandomCrop(40), T.Resize(30, max_size=35), T.CenterCrop((21, 27)),
                                       T.ToDtype(torch.float32), T.Normalize([100.0], [50.0])],
    "uint8 out": lambda: [T.RandomResizedCrop(16, scale=(0.5, 1.0)), T.RandomVerticalFlip()],
    "quarter turns": lambda: [T.RandomHorizontalFlip(), T.Resize((30, 38)), T.RandomRotate90(), T.RandomVerticalFlip(),
                              T.RandomCrop(24), T.RandomRotate90(p=0.8), T.ToDtype(torch.float32, scale=True),
                              T.Normalize(MEAN, STD)],
}


def per_sample_items(monkeypatch):
    """Records every item the Loader sends through its plan one by one (not the fused batch op)."""
    items = []
    apply_item = T.FusionPlan.apply_item
    monkeypatch.setattr(T.FusionPlan, "apply_item", lambda self, raw: items.append(raw) or apply_item(self, raw))
    return items
