"""Field roles: what each field of a sample is, decided once for CompactCollate, fastprep.Loader and
fastprep.ray, and recorded in the batch so that CompactBatch.expand() restores every field by role.

A role is never guessed from the dtype alone; a uint8 token list is not an image. The rules:

- ``"image"``: a torchvision ``tv_tensors.Image`` of uint8 ``[C, H, W]``, or a uint8 tensor or
  array shaped ``[C, H, W]`` with C in {1, 3, 4}. Shipped as uint8; expand() scales it to floats.
- ``"mask"``: a bool ``tv_tensors.Mask``, or a bool tensor or array shaped ``[H, W]`` or
  ``[1, H, W]``. Shipped as bits along the last dim; expand() unpacks it, bit for bit.
- ``"label"``: a Python or numpy int, or a 0-d integer tensor. Shipped in the smallest integer
  dtype holding the batch's labels; expand() gives int64 (or one-hot rows).
- ``"boxes"``: a ``tv_tensors.BoundingBoxes`` or ``tv_tensors.KeyPoints``. Their counts differ from
  sample to sample, so the batch holds the list of them as they are, each with its format,
  canvas size and type (what detection collates do); expand() returns that list.
- ``"tensor"``: any other tensor or array (a float tv_tensors.Image, a Video, an integer Mask too).
  Stacked and moved as it is, never rescaled; only ``float_dtype`` narrows floats on request.

A Mask is packed only when its dtype is bool: an integer Mask (class ids, or 0/1 in uint8) ships
as it is, since packing by value would change a batch's layout with its content; ``mask.bool()``
before collating packs a 0/1 mask. Image, Mask and Video fields stacked into a batch are plain
tensors; the role's Leaf records the tv_tensors type and expand() restores it when torchvision
imports.
- ``"other"``: what is not a tensor (strings, None, Python floats): default_collate's batch.

An explicit ``fields={name: role}`` spec overrides the rules for top-level fields (dict keys,
namedtuple field names, tuple positions); the value must suit the role it is given.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

ROLES = ("image", "mask", "label", "tensor", "boxes")
"""The roles a `fields=` spec may name."""

IMAGE_CHANNELS = (1, 3, 4)  # grey, RGB, RGBA: the channel counts a plain [C, H, W] uint8 image has


def check_fields(owner: str, fields: Any) -> dict[Any, str]:
    """`fields` as a dict {name: role}, or a ValueError naming the bad entry."""
    if fields is None:
        return {}
    if not isinstance(fields, Mapping):
        raise ValueError(f"{owner}: expected fields to be a dict {{name: role}} or None, got {fields!r}")
    for name, role in fields.items():
        if isinstance(name, bool) or not isinstance(name, (str, int)):
            raise ValueError(f"{owner}: expected the field names in fields to be str (dict keys, namedtuple "
                             f"fields) or int (tuple positions), got {name!r}")
        if role not in ROLES:
            raise ValueError(f"{owner}: fields[{name!r}] is {role!r}; expected one of {list(ROLES)}")
    return dict(fields)


def field_name(sample: Any, key: Any) -> Any:
    """The name a `fields=` spec gives the top-level field `key` of `sample` (a namedtuple's field
    may be named or numbered)."""
    fields = getattr(sample, "_fields", None)
    return fields[key] if fields is not None and isinstance(key, int) else key


def check_fields_present(owner: str, fields: dict[Any, str], sample: Any) -> None:
    """Every name in `fields` must be a top-level field of `sample`."""
    if not fields:
        return
    if isinstance(sample, Mapping):
        names = list(sample)
    elif isinstance(sample, (tuple, list)):
        names = list(range(len(sample))) + list(getattr(sample, "_fields", ()))
    else:
        raise ValueError(f"{owner}: fields names {list(fields)}, but a sample is a "
                         f"{type(sample).__name__}, which has no named fields")
    missing = [name for name in fields if name not in names]
    if missing:
        shown = list(sample) if isinstance(sample, Mapping) else names
        raise ValueError(f"{owner}: fields names {missing}, which the samples do not have "
                         f"(their fields: {shown})")


def tv_class(name: str) -> type | None:
    # Only when the user's code has imported torchvision: importing it here would cost seconds.
    tv = sys.modules.get("torchvision.tv_tensors")
    return getattr(tv, name, None) if tv is not None else None


GEOMETRY_TV = ("BoundingBoxes", "KeyPoints")
RESTORED_TV = ("Image", "Mask", "Video")
"""tv_tensors types a stacked batch field gets back in expand()."""


def tv_name(x: Any) -> str | None:
    """The tv_tensors class name of x ("Image", "Mask", "Video", "BoundingBoxes", "KeyPoints"), or None."""
    if not isinstance(x, torch.Tensor) or type(x) is torch.Tensor:
        return None
    for name in RESTORED_TV + GEOMETRY_TV:
        cls = tv_class(name)
        if cls is not None and isinstance(x, cls):
            return name
    return None


def tv_module() -> Any:
    """torchvision.tv_tensors when it imports (expand() restoring types), else None."""
    tv = sys.modules.get("torchvision.tv_tensors")
    if tv is not None:
        return tv
    try:
        import torchvision.tv_tensors as tv  # noqa: PLC0415 (only when a batch holds tv_tensors types)
    except Exception:  # noqa: BLE001 (not installed, or a build that cannot load its ops)
        return None
    return tv


def is_int_label(x: Any) -> bool:
    """A Python or numpy int (not a bool), or a 0-d integer tensor or array."""
    if isinstance(x, (bool, np.bool_)):
        return False
    if isinstance(x, (int, np.integer)):
        return True
    if isinstance(x, np.ndarray):
        return x.ndim == 0 and x.dtype.kind in "iu"
    if isinstance(x, torch.Tensor):
        return x.dim() == 0 and not (x.dtype.is_floating_point or x.dtype.is_complex or x.dtype == torch.bool)
    return False


def as_tensor(x: Any) -> Any:
    """x as a tensor when it is a tensor or a numpy array torch can wrap (no copy); else x."""
    if isinstance(x, np.ndarray) and x.dtype.kind in "biufc":
        return torch.from_numpy(x)
    return x


def _describe(x: Any) -> str:
    t = as_tensor(x)
    if isinstance(t, torch.Tensor):
        return f"a {t.dtype} {type(x).__name__} of shape {list(t.shape)}"
    return f"{type(x).__name__} {x!r}"[:120]


def auto_role(x: Any) -> str:
    """The role of field value `x` by the rules above."""
    if is_int_label(x):
        return "label"
    t = as_tensor(x)
    if not isinstance(t, torch.Tensor):
        return "other"
    image_cls, mask_cls, tv_base = tv_class("Image"), tv_class("Mask"), tv_class("TVTensor")
    if image_cls is not None and isinstance(t, image_cls):
        return "image" if t.dtype == torch.uint8 and t.dim() == 3 else "tensor"
    if mask_cls is not None and isinstance(t, mask_cls):
        return "mask" if t.dtype == torch.bool and t.dim() >= 1 else "tensor"
    if tv_base is not None and isinstance(t, tv_base):
        return "boxes" if tv_name(t) in GEOMETRY_TV else "tensor"  # videos, other tv_tensors: as they are
    if t.dtype == torch.uint8 and t.dim() == 3 and t.shape[0] in IMAGE_CHANNELS:
        return "image"
    if t.dtype == torch.bool and (t.dim() == 2 or (t.dim() == 3 and t.shape[0] == 1)):
        return "mask"
    return "tensor"


def field_role(owner: str, x: Any, role: str | None, where: str) -> str:
    """The role of field value `x` (sample 0's): `role` when the spec gives one and `x` suits it,
    else the rules'. A value that does not suit its given role is a ValueError naming the field."""
    if role is None:
        return auto_role(x)
    t = as_tensor(x)
    is_tensor = isinstance(t, torch.Tensor)
    ok = {"image": is_tensor and t.dtype == torch.uint8 and t.dim() == 3,
          "mask": is_tensor and t.dtype == torch.bool and t.dim() >= 1,
          "label": is_int_label(x),
          "tensor": is_tensor or isinstance(x, (int, float, np.number, np.bool_)),
          "boxes": is_tensor and t.dim() >= 1,
          }[role]
    if not ok:
        want = {"image": "a uint8 [C, H, W] tensor or array", "mask": "a bool tensor or array (at least 1-D)",
                "label": "an int or a 0-d integer tensor", "tensor": "a tensor, an array or a number",
                "boxes": "a tensor of boxes or points (tv_tensors.BoundingBoxes, KeyPoints)"}[role]
        raise ValueError(f"{owner}: fields gives {where} the role {role!r}, which needs {want}; "
                         f"got {_describe(x)}")
    return role
