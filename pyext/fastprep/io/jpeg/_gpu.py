"""Batched JPEG decoding on a CUDA device, for when the CPUs are short: nvImageCodec (its hardware
JPEG engines where the device has them, else its nvJPEG) when installed, else torchvision's
nvJPEG; what a decoder refuses goes to the next (io/jpeg/_device_decoders.py).

CMYK and YCCK JPEGs (4 components) never reach a device decoder: their colour conversion is not
Pillow's (Adobe's inverted CMYK, Convert.c's integer formula), so they are decoded on the host by
:func:`fastprep.io.decode_jpeg` (Pillow's bits, only the window of a cut) and uploaded."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from fastprep.core._devices import check_device
from fastprep.io.jpeg import as_bytes
from fastprep.io.jpeg._device_decoders import shared_decoders

_GPU_MODES = ("RGB", "GRAY", "YCbCr")
def decode_jpeg_batch(datas: Sequence[Any], *, device: Any = "cuda", mode: str = "RGB",
                      jpeg_decoder: Any = "auto") -> list[torch.Tensor]:
    """Decode JPEGs on a CUDA device in one batch (nvImageCodec, else torchvision's nvJPEG).

    The device decoders' IDCT and upsampling are not libjpeg-turbo's: the pixels are close to, not
    the same bits as, :func:`fastprep.io.decode_jpeg`'s (docs/real-files.md states each one's
    tolerance). ``mode="YCbCr"`` decodes RGB and converts it on the
    device with fastprep.rgb_to_ycbcr (its torch-ops form, the CPU kernel's bits for that RGB).
    CMYK / YCCK JPEGs are decoded on the host (decode_jpeg: Pillow's bits) and uploaded.

    Args:
        datas: the files' bytes (bytes, bytearray, memoryview, 1-D uint8 tensors or arrays) or paths.
        device: a CUDA device.
        mode: "RGB", "GRAY" or "YCbCr".
        jpeg_decoder: "auto", "nvimagecodec", "torchvision" or "host" (fastprep's decoder, uploaded);
            what it refuses goes to the next decoder, the host's last.

    Returns:
        a list of uint8 [C, H, W] tensors on `device` (the images may differ in size).

    Raises:
        RuntimeError: no device decoder (neither nvImageCodec nor torchvision for this torch), or
            CUDA is not available.
        ValueError: a bad device or mode.

    Example:
        >>> images = decode_jpeg_batch([open(p, "rb").read() for p in paths], device="cuda")
    """
    who = "decode_jpeg_batch"
    _check_mode(who, mode)
    dev = _cuda(who, device)
    chain = shared_decoders(jpeg_decoder, dev, who)
    return chain.decode([as_bytes(who, d)[0] for d in datas], None, mode, dev)


def _check_mode(who: str, mode: str) -> None:
    if mode not in _GPU_MODES:
        raise ValueError(f"{who}: expected mode to be one of {_GPU_MODES}, got {mode!r}")


def _cuda(who: str, device: Any) -> torch.device:
    """`device` as a CUDA device, or the error saying what is wrong."""
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"{who}: expected a CUDA device, got {device!r}") from exc
    if dev.type != "cuda":
        raise ValueError(f"{who}: expected a CUDA device, got {device!r}; on the CPU use fastprep.io.decode_jpeg")
    return check_device(who, device)


def decode_window_batch(cuts: Sequence[Any], *, device: Any = "cuda", mode: str = "RGB",
                        jpeg_decoder: Any = "auto") -> list[torch.Tensor]:
    """Decode the windows of packed JPEG records from their cuts (:meth:`PackedJpeg.cut`,
    :meth:`PackedDataset.cut_window`: the CPU only copied the restart intervals covering each
    window) on `device`, in one batch, and crop each to its window.

    On a CUDA device the pixels are the device decoder's (close to libjpeg-turbo's, see
    decode_jpeg_batch); a CMYK / YCCK cut is decoded on the host (its window only, Pillow's bits)
    and uploaded. ``device="cpu"`` runs fastprep's libjpeg-turbo decoder instead, one cut after
    another: the stand-in for the device where there is none, giving the bits of
    ``PackedJpeg.decode(crop)`` (``jpeg_decoder="nvimagecodec"``: nvImageCodec's CPU backend).

    Args:
        cuts: WindowCut s (data, top, left, height, width).
        device: a CUDA device, or "cpu".
        mode: "RGB", "GRAY" or "YCbCr".
        jpeg_decoder: as decode_jpeg_batch's; or a Loader's DecoderChain (which counts its images).

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
    _check_mode(who, mode)
    dev = torch.device("cpu") if cpu else _cuda(who, device)
    chain = shared_decoders(jpeg_decoder, dev, who)
    return chain.decode([c[0] for c in cuts], [tuple(c[1:]) for c in cuts], mode, dev)
