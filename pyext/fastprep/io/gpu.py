"""Batched JPEG decoding on a CUDA device through torchvision.io.decode_jpeg (nvJPEG), for when
the CPUs are short. Needs torchvision built for the running torch and a CUDA device."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from fastprep.io.jpeg import as_bytes
from fastprep.ops.color import rgb_to_ycbcr

_GPU_MODES = ("RGB", "GRAY", "YCbCr")


def decode_jpeg_batch(datas: Sequence[Any], *, device: Any = "cuda", mode: str = "RGB") -> list[torch.Tensor]:
    """Decode JPEGs on a CUDA device in one batched ``torchvision.io.decode_jpeg`` call.

    nvJPEG's IDCT and upsampling are not libjpeg-turbo's: the pixels are close to, not the same
    bits as, :func:`fastprep.io.decode_jpeg`'s. ``mode="YCbCr"`` decodes RGB and converts it on the
    device with fastprep.rgb_to_ycbcr (its torch-ops form, the CPU kernel's bits for that RGB).

    Args:
        datas: the files' bytes (bytes, bytearray, memoryview, 1-D uint8 tensors or arrays) or paths.
        device: a CUDA device.
        mode: "RGB", "GRAY" or "YCbCr".

    Returns:
        a list of uint8 [C, H, W] tensors on `device` (the images may differ in size).

    Raises:
        RuntimeError: torchvision is missing or cannot load its ops, or CUDA is not available.
        ValueError: a bad device or mode.

    Example:
        >>> images = decode_jpeg_batch([open(p, "rb").read() for p in paths], device="cuda")
    """
    who = "decode_jpeg_batch"
    if mode not in _GPU_MODES:
        raise ValueError(f"{who}: expected mode to be one of {_GPU_MODES}, got {mode!r}")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"{who}: expected a CUDA device, got {device!r}") from exc
    if dev.type != "cuda":
        raise ValueError(f"{who}: expected a CUDA device, got {device!r}; on the CPU use fastprep.io.decode_jpeg")
    try:
        from torchvision.io import ImageReadMode  # noqa: PLC0415 (optional)
        from torchvision.io import decode_jpeg as tv_decode_jpeg  # noqa: PLC0415 (optional)
    except (ImportError, RuntimeError, OSError) as exc:
        raise RuntimeError(f"{who} needs torchvision built for torch {torch.__version__} "
                           f"(pip install torchvision from the same index as torch): {exc}") from exc
    if not torch.cuda.is_available():
        raise RuntimeError(f"{who}: CUDA is not available (torch {torch.__version__}, "
                           f"CUDA build {torch.version.cuda})")
    tensors = [torch.frombuffer(bytearray(as_bytes(who, d)[0]), dtype=torch.uint8) for d in datas]
    read_mode = ImageReadMode.GRAY if mode == "GRAY" else ImageReadMode.RGB
    images = tv_decode_jpeg(tensors, mode=read_mode, device=dev)
    if mode == "YCbCr":
        images = [rgb_to_ycbcr(im, "CHW") for im in images]
    return list(images)
