"""The list of fastprep ops: one row per op, read by everything that must cover every op.

A row names the op (``torch.ops.fastprep.<name>``, the Python wrapper ``fastprep.<name>`` and the
Numba kernel, all the same name) and its family: the module that defines its schema, fake and
torch-ops implementation (``fastprep.ops.<family>``), the Numba module with its kernel
(``fastprep.numba_kernels.<family>``) and the C++ binding (``csrc/ops/<family>.cpp``).
``fastprep.ops`` imports the families from here, the Numba backend registers its kernels from
here, and ``fastprep.warmup()``, the exports and the leak and registration tests read it, so
adding an op is its own files plus one row (CONTRIBUTING in README.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch


class OpRow(NamedTuple):
    name: str
    family: str
    # Small valid arguments, every argument kind included: warmup() compiles each Numba kernel
    # with them and the tests call every op with them.
    sample: Callable[[], tuple]
    # An op with no tensor argument has no dispatch key to reach a CPU kernel: its kernels
    # register under CompositeExplicitAutograd (csrc/ops/random_mask.cpp says more).
    takes_tensor: bool = True


def _hwc() -> torch.Tensor:
    return torch.zeros(8, 8, 3, dtype=torch.uint8)


def _chw() -> torch.Tensor:
    return torch.zeros(3, 8, 8, dtype=torch.uint8)


def _mask() -> torch.Tensor:
    return torch.zeros(8, 8, dtype=torch.bool)


def _packed() -> torch.Tensor:
    return torch.zeros(8, 1, dtype=torch.uint8)


OPS: tuple[OpRow, ...] = (
    OpRow("crop", "crop", lambda: (_hwc(), 1, 2, 4, 4, "HWC")),
    OpRow("random_crop", "crop", lambda: (_chw(), 4, 4, 7, "CHW", False, 0.0)),
    OpRow("rgb_to_ycbcr", "color", lambda: (_hwc(), "HWC", None, 1.0)),
    OpRow("ycbcr_to_rgb", "color", lambda: (_chw(), "CHW", torch.float32, 1 / 255)),
    OpRow("random_mask", "random_mask", lambda: ([8, 8], 0.25, 3, True), takes_tensor=False),
    OpRow("random_dilated_mask", "random_mask", lambda: ([8, 8], 0.25, 3, "cross", 1, False),
          takes_tensor=False),
    OpRow("dilate", "dilate", lambda: (_mask(), "square", 1)),
    OpRow("dilate_packed", "dilate", lambda: (_packed(), 8, "cross", 1)),
    OpRow("mask_fill", "mask_fill", lambda: (_chw(), _mask(), 0.0, "CHW")),
    OpRow("mask_fill_", "mask_fill", lambda: (_chw(), _packed(), 0.0, "CHW")),
    OpRow("pack_bits", "pack_bits", lambda: (_mask(), -1, "little")),
    OpRow("unpack_bits", "pack_bits", lambda: (_packed(), 8, -1, "big")),
    OpRow("crop_mask_ycbcr", "crop_mask_ycbcr",
          lambda: (_hwc(), 4, 4, 0.25, 5, "HWC", "cross", None, 1.0, True, False, None)),
    OpRow("crop_mask_ycbcr_batch", "crop_mask_ycbcr",
          lambda: ([_hwc(), _chw().permute(1, 2, 0)], [1, 4], [2, 0], 4, 4, 0.25, [5, 6], torch.empty(2, 3, 4, 4),
                   "HWC", "cross", 1 / 255, True, torch.empty(2, 4, 1, dtype=torch.uint8), [False, True], [True, False],
                   [False, True])),
    OpRow("resized_crop", "resize", lambda: (_hwc(), 1, 2, 6, 5, 4, 3, "HWC", True, True, torch.float32, 1 / 255,
                                             [0.5], [0.25], True, 6, 5, 1, 2)),
    OpRow("resized_crop_batch", "resize",
          lambda: ([_hwc(), _chw().permute(1, 2, 0)],  # rows: the geometry table's columns (_resize_checks.py)
                   torch.tensor([[0, 0, 8, 8, 0, 1, 6, 5, 1, 0, 0], [1, 2, 6, 5, 1, 0, 0, 0, 0, 0, 1]]),
                   torch.empty(2, 3, 4, 4), "HWC", True, 1 / 255, [0.5, 0.4, 0.3], [0.2, 0.25, 0.3])),
    OpRow("seeded_draws", "seeded_draws", lambda: (torch.tensor([3, -4], dtype=torch.int64), 3)),
)

FAMILIES: tuple[str, ...] = tuple(dict.fromkeys(row.family for row in OPS))
