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


def decode_window_batch(cuts: Sequence[Any], *, device: Any = "cuda", mode: str = "RGB") -> list[torch.Tensor]:
    """Decode the windows of packed JPEG records from their cuts (:meth:`PackedJpeg.cut`,
    :meth:`PackedDataset.cut_window`: the CPU only copied the restart intervals covering each
    window) on `device`, in one batched nvJPEG call, and crop each to its window.

    On a CUDA device the pixels are nvJPEG's (close to libjpeg-turbo's, see decode_jpeg_batch).
    ``device="cpu"`` runs fastprep's libjpeg-turbo decoder instead, one cut after another: the
    stand-in for the device where there is none, giving the bits of ``PackedJpeg.decode(crop)``.

    Args:
        cuts: WindowCut s (data, top, left, height, width).
        device: a CUDA device, or "cpu".
        mode: "RGB", "GRAY" or "YCbCr".

    Returns:
        a list of uint8 [C, height, width] tensors on `device`, one per cut.

    Example:
        >>> cuts = [ds.cut_window(i, crop) for i, crop in zip(indices, crops)]   # loader threads
        >>> windows = decode_window_batch(cuts, device="cuda")                  # one nvJPEG batch
    """
    who = "decode_window_batch"
    for c in cuts:
        if not (isinstance(c, tuple) and len(c) == 5 and isinstance(c[0], (bytes, bytearray, memoryview))):
            raise TypeError(f"{who}: expected WindowCut s (data, top, left, height, width), got {type(c).__name__}")
    try:
        cpu = torch.device(device).type == "cpu"
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"{who}: expected a CUDA device or 'cpu', got {device!r}") from exc
    if cpu:
        from fastprep.io.jpeg import decode_jpeg  # noqa: PLC0415 (the CPU stand-in only)

        if mode not in _GPU_MODES:
            raise ValueError(f"{who}: expected mode to be one of {_GPU_MODES}, got {mode!r}")
        return [decode_jpeg(c[0], crop=tuple(c[1:]), mode=mode) for c in cuts]
    images = decode_jpeg_batch([c[0] for c in cuts], device=device, mode=mode)
    return [im[:, top:top + h, left:left + w] for im, (_, top, left, h, w) in zip(images, cuts, strict=True)]
