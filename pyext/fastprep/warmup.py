"""warmup(): compile (or load from Numba's cache) every Numba kernel before DataLoader workers
fork, so each worker does not pay the first-call compile itself."""

from __future__ import annotations

import time

import torch


def sample_calls() -> dict[str, tuple]:
    """Small valid arguments for every op, each argument kind included (str ones too)."""
    img = torch.zeros(8, 8, 3, dtype=torch.uint8)
    chw = torch.zeros(3, 8, 8, dtype=torch.uint8)
    mask = torch.zeros(8, 8, dtype=torch.bool)
    packed = torch.zeros(8, 1, dtype=torch.uint8)
    return {
        "pack_bits": (mask, -1, "little"),
        "unpack_bits": (packed, 8, -1, "big"),
        "crop": (img, 1, 2, 4, 4, "HWC"),
        "random_crop": (chw, 4, 4, 7, "CHW", False, 0.0),
        "rgb_to_ycbcr": (img, "HWC", None, 1.0),
        "ycbcr_to_rgb": (chw, "CHW", torch.float32, 1 / 255),
        "random_mask": ([8, 8], 0.25, 3, True),
        "random_dilated_mask": ([8, 8], 0.25, 3, "cross", 1, False),
        "dilate": (mask, "square", 1),
        "dilate_packed": (packed, 8, "cross", 1),
        "mask_fill": (chw, mask, 0.0, "CHW"),
        "mask_fill_": (chw.clone(), packed, 0.0, "CHW"),
        "crop_mask_ycbcr": (img, 4, 4, 0.25, 5, "HWC", "cross", None, 1.0, False, None),
    }


def warmup() -> dict[str, float]:
    """Run every Numba kernel once; returns the seconds each first call took (compile or cache
    load). Safe to call whatever backend is active; cheap once the kernels are cached."""
    from fastprep import numba_kernels  # noqa: PLC0415

    kernels = {**numba_kernels.CPU_KERNELS, **numba_kernels.NO_TENSOR_KERNELS}
    latency = {}
    for name, args in sample_calls().items():
        t0 = time.perf_counter()
        kernels[name](*args)
        latency[name] = time.perf_counter() - t0
    return latency
