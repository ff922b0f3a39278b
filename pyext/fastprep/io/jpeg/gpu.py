"""Batched JPEG decoding on a CUDA device through torchvision.io.decode_jpeg (nvJPEG), for when
the CPUs are short. Needs torchvision built for the running torch and a CUDA device.

CMYK and YCCK JPEGs (4 components) never reach nvJPEG: its colour conversion is not Pillow's
(Adobe's inverted CMYK, Convert.c's integer formula), so they are decoded on the host by
:func:`fastprep.io.decode_jpeg` (Pillow's bits, only the window of a cut) and uploaded."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from fastprep.core.devices import nvjpeg_decoder
from fastprep.io.jpeg import as_bytes, decode_jpeg
from fastprep.ops.color import rgb_to_ycbcr

_GPU_MODES = ("RGB", "GRAY", "YCbCr")
_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}  # frame headers (not DHT, JPG, DAC)


def frame_components(data: Any) -> int:
    """The component count of a JPEG's frame header (SOFn), read from its markers alone; 0 when the
    header ends, or is not a JPEG's, before one (the decoder that gets it then says why)."""
    data = memoryview(data).cast("B")
    pos = 2 if data[:2] == b"\xff\xd8" else len(data)
    while pos + 4 <= len(data) and data[pos] == 0xFF:
        marker = data[pos + 1]
        if marker == 0xFF:  # fill byte
            pos += 1
            continue
        if marker in _SOF:
            return data[pos + 9] if pos + 10 <= len(data) else 0
        if marker == 0xDA:
            return 0
        pos += 2 + int.from_bytes(data[pos + 2:pos + 4], "big")
    return 0


def split_device_host(buffers: Sequence[Any], crops: Sequence[tuple[int, int, int, int]] | None, mode: str,
                      dev: torch.device, device_decode: Callable[[list[Any]], list[torch.Tensor]]
                      ) -> list[torch.Tensor]:
    """Decodes `buffers` (each cropped to its `crops` window, when given): 4-component JPEGs on the
    host with fastprep's decoder, uploaded to `dev`; the rest in one ``device_decode`` call."""
    host = {i for i, b in enumerate(buffers) if frame_components(b) == 4}
    rest = [i for i in range(len(buffers)) if i not in host]
    out: list[torch.Tensor | None] = [None] * len(buffers)
    for i, image in zip(rest, device_decode([buffers[i] for i in rest]) if rest else [], strict=True):
        top, left, h, w = crops[i] if crops is not None else (0, 0, image.shape[1], image.shape[2])
        out[i] = image[:, top:top + h, left:left + w]
    for i in sorted(host):
        out[i] = decode_jpeg(buffers[i], crop=None if crops is None else crops[i], mode=mode).to(dev)
    return out


def decode_jpeg_batch(datas: Sequence[Any], *, device: Any = "cuda", mode: str = "RGB") -> list[torch.Tensor]:
    """Decode JPEGs on a CUDA device in one batched ``torchvision.io.decode_jpeg`` call.

    nvJPEG's IDCT and upsampling are not libjpeg-turbo's: the pixels are close to, not the same
    bits as, :func:`fastprep.io.decode_jpeg`'s. ``mode="YCbCr"`` decodes RGB and converts it on the
    device with fastprep.rgb_to_ycbcr (its torch-ops form, the CPU kernel's bits for that RGB).
    CMYK / YCCK JPEGs are decoded on the host (decode_jpeg: Pillow's bits) and uploaded.

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
    dev, tv_decode_jpeg, read_modes = _nvjpeg(who, device, mode)
    return _decode_batch(who, [as_bytes(who, d)[0] for d in datas], None, mode, dev, tv_decode_jpeg, read_modes)


def _nvjpeg(who: str, device: Any, mode: str) -> tuple[torch.device, Callable, Any]:
    """(the CUDA device, torchvision's decode_jpeg, its ImageReadMode), or the error saying what is missing."""
    if mode not in _GPU_MODES:
        raise ValueError(f"{who}: expected mode to be one of {_GPU_MODES}, got {mode!r}")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"{who}: expected a CUDA device, got {device!r}") from exc
    if dev.type != "cuda":
        raise ValueError(f"{who}: expected a CUDA device, got {device!r}; on the CPU use fastprep.io.decode_jpeg")
    return (dev, *nvjpeg_decoder(who))


def _decode_batch(who: str, buffers: list[Any], crops: Sequence[tuple[int, int, int, int]] | None, mode: str,
                  dev: torch.device, tv_decode_jpeg: Callable, read_modes: Any) -> list[torch.Tensor]:
    read_mode = read_modes.GRAY if mode == "GRAY" else read_modes.RGB

    def on_device(batch: list[Any]) -> list[torch.Tensor]:
        tensors = [torch.frombuffer(bytearray(b), dtype=torch.uint8) for b in batch]
        images = tv_decode_jpeg(tensors, mode=read_mode, device=dev)
        return [rgb_to_ycbcr(im, "CHW") for im in images] if mode == "YCbCr" else list(images)

    return split_device_host(buffers, crops, mode, dev, on_device)


def decode_window_batch(cuts: Sequence[Any], *, device: Any = "cuda", mode: str = "RGB") -> list[torch.Tensor]:
    """Decode the windows of packed JPEG records from their cuts (:meth:`PackedJpeg.cut`,
    :meth:`PackedDataset.cut_window`: the CPU only copied the restart intervals covering each
    window) on `device`, in one batched nvJPEG call, and crop each to its window.

    On a CUDA device the pixels are nvJPEG's (close to libjpeg-turbo's, see decode_jpeg_batch); a
    CMYK / YCCK cut is decoded on the host (its window only, Pillow's bits) and uploaded.
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
        if mode not in _GPU_MODES:
            raise ValueError(f"{who}: expected mode to be one of {_GPU_MODES}, got {mode!r}")
        return [decode_jpeg(c[0], crop=tuple(c[1:]), mode=mode) for c in cuts]
    dev, tv_decode_jpeg, read_modes = _nvjpeg(who, device, mode)
    return _decode_batch(who, [c[0] for c in cuts], [tuple(c[1:]) for c in cuts], mode, dev, tv_decode_jpeg,
                         read_modes)
