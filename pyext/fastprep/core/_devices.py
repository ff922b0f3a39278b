"""Whether a device can be used here, said once: the device argument every part takes
(DevicePrefetcher, Loader, the monitor, the tools), CUDA's presence, and torchvision's nvJPEG
decoder (decode_jpeg_batch, decode_window_batch, ``Loader(decode_on="cuda")``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


def _cuda_missing() -> str | None:
    """Why CUDA cannot run here (for the messages), or None when it can."""
    if torch.cuda.is_available():
        return None
    return f"CUDA is not available (torch {torch.__version__}, CUDA build {torch.version.cuda})"


def check_device(owner: str, device: Any) -> torch.device:
    """`device` as a torch.device that exists here, or a ValueError naming `owner` and the value.

    Example:
        >>> check_device("DevicePrefetcher", "cpu")
        device(type='cpu')
    """
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"{owner}: bad device {device!r}: {exc}") from None
    if dev.type == "cuda":
        # Otherwise the first copy fails deep in a worker loop, or non-tensor batches pass silently.
        missing = _cuda_missing()
        if missing:
            raise ValueError(f"{owner}: device={device!r} but {missing}")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(f"{owner}: device={device!r} but there are "
                             f"{torch.cuda.device_count()} CUDA devices")
    return dev


def nvjpeg_decoder(who: str) -> tuple[Callable, Any]:
    """(torchvision.io.decode_jpeg, torchvision.io.ImageReadMode): the batched nvJPEG decoder, or
    a RuntimeError naming `who` and what is missing (torchvision for this torch, or CUDA).

    Example:
        >>> decode, read_modes = nvjpeg_decoder("decode_jpeg_batch")  # doctest: +SKIP
    """
    try:
        from torchvision.io import ImageReadMode, decode_jpeg  # noqa: PLC0415 (optional)
    except (ImportError, RuntimeError, OSError) as exc:
        raise RuntimeError(f"{who} needs torchvision built for torch {torch.__version__} "
                           f"(pip install torchvision from the same index as torch): {exc}") from exc
    missing = _cuda_missing()
    if missing:
        raise RuntimeError(f"{who}: {missing}")
    return decode_jpeg, ImageReadMode
