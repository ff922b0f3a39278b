"""JPEG decoding with libjpeg-turbo, in the calling thread and without the GIL.

The decoder is the native module ``fastprep._jpeg`` (csrc/jpeg/), built when CMake finds
libjpeg-turbo >= 1.5. It decodes straight into a uint8 tensor, only the rows and columns a crop
window needs, and can hand out the JPEG's own YCbCr samples.

Beside it in this package: ``file`` (JpegFile, an image read by window), ``scale`` (reduced DCT
scales), ``exif`` and ``oriented`` (EXIF orientation, OrientedImage), ``gpu`` (nvJPEG batches).
"""

from __future__ import annotations

import os
import warnings
from typing import Any, NamedTuple

import numpy as np
import torch

from fastprep.core._args import check_bool
from fastprep.errors import CorruptJpegWarning
from fastprep.io._files import read_file
from fastprep.io.jpeg._exif import jpeg_orientation, stored_window, to_upright, upright_size
from fastprep.io.jpeg._scale import check_scale, scaled_size
from fastprep.ops._checks import has_internal_overlap
from fastprep.ops._color import rgb_to_ycbcr

try:
    from fastprep import _jpeg
except ImportError as exc:  # built only where libjpeg-turbo was found
    _jpeg = None
    _IMPORT_ERROR = f"{type(exc).__name__}: {exc}"

MODES = ("RGB", "YCbCr", "GRAY")
LAYOUTS = ("CHW", "HWC")
# Pillow's limit (twice its DecompressionBombWarning threshold): a header that claims more pixels
# is refused before anything is allocated. None lifts it.
MAX_IMAGE_PIXELS: int | None = 178_956_970
INSTALL_HINT = ("fastprep was built without libjpeg-turbo >= 1.5. Install it (apt install libjpeg62-turbo-dev "
                "on Debian, libjpeg-turbo8-dev on Ubuntu, dnf install libjpeg-turbo-devel, or conda install "
                "libjpeg-turbo) and rebuild fastprep: pip install --no-build-isolation .")


class JpegHeader(NamedTuple):
    """What a JPEG's header says, read without decoding."""

    height: int
    width: int
    components: int  # 1 grey, 3 YCbCr or RGB, 4 CMYK / YCCK
    color_space: str  # "GRAY", "YCbCr", "RGB", "CMYK", "YCCK" or "other"
    sampling: tuple[tuple[int, int], ...]  # (horizontal, vertical) sampling factor per component
    progressive: bool
    imcu: tuple[int, int]  # (height, width) in pixels of one iMCU, the unit an ROI decode rounds to

    @property
    def subsampling(self) -> str:
        """The chroma subsampling ("4:4:4", "4:2:2", "4:2:0", "4:4:0", "4:1:1"; "GRAY"; else the factors)."""
        if self.components == 1:
            return "GRAY"
        known = {(1, 1): "4:4:4", (2, 1): "4:2:2", (2, 2): "4:2:0", (1, 2): "4:4:0", (4, 1): "4:1:1"}
        if self.components == 3 and self.sampling[1] == self.sampling[2] == (1, 1) and self.sampling[0] in known:
            return known[self.sampling[0]]
        return ",".join(f"{h}x{v}" for h, v in self.sampling)


def available() -> bool:
    """Whether fastprep's JPEG decoder was built (CMake found libjpeg-turbo >= 1.5)."""
    return _jpeg is not None


def libjpeg_turbo_version() -> str | None:
    """The libjpeg-turbo version the decoder was built against, or None without it."""
    return _jpeg.libjpeg_turbo_version if _jpeg is not None else None


def check_image_args(who: str, mode: str, layout: str) -> None:
    """`mode` in MODES and `layout` in LAYOUTS, or a ValueError naming `who` and the value."""
    if mode not in MODES:
        raise ValueError(f"{who}: expected mode to be one of {MODES}, got {mode!r}")
    if layout not in LAYOUTS:
        raise ValueError(f"{who}: expected layout to be one of {LAYOUTS}, got {layout!r}")


def native(who: str):
    """The native module fastprep._jpeg, or a RuntimeError saying how to build it."""
    if _jpeg is None:
        raise RuntimeError(f"{who}: {INSTALL_HINT} ({_IMPORT_ERROR})")
    return _jpeg


def as_bytes(who: str, data: Any) -> tuple[Any, str | None]:
    """(a contiguous byte buffer, the file name if `data` was a path)."""
    if isinstance(data, (str, os.PathLike)):
        return read_file(who, data), os.fspath(data)
    if isinstance(data, (bytes, bytearray, memoryview)):
        return data, None
    if isinstance(data, torch.Tensor):
        if data.dtype != torch.uint8 or data.dim() != 1 or data.device.type != "cpu":
            raise TypeError(f"{who}: expected data as a 1-D uint8 CPU tensor, got {data.dtype} "
                            f"{tuple(data.shape)} on {data.device}")
        return data.contiguous().numpy(), None
    if isinstance(data, np.ndarray):
        if data.dtype != np.uint8 or data.ndim != 1:
            raise TypeError(f"{who}: expected data as a 1-D uint8 array, got {data.dtype} {data.shape}")
        return np.ascontiguousarray(data), None
    raise TypeError(f"{who}: expected data as bytes, a 1-D uint8 tensor or array, or a path, got {type(data).__name__}")


def _where(name: str | None) -> str:
    return f"{name}: " if name else ""


def read_jpeg_header(data: Any, *, name: str | None = None) -> JpegHeader:
    """Size, colour space, sampling and iMCU size of a JPEG, from its header alone (microseconds).

    Args:
        data: the file's bytes (bytes, bytearray, memoryview, 1-D uint8 tensor or array) or its path.
        name: what to call the data in errors (default: the path, if one was given).

    Raises:
        ValueError: the data is not a JPEG, or its header is corrupt.

    Example:
        >>> read_jpeg_header("cat.jpg").subsampling
        '4:2:0'
    """
    buf, path = as_bytes("read_jpeg_header", data)
    return _header("read_jpeg_header", buf, name or path)


def _header(who: str, buf: Any, name: str | None) -> JpegHeader:
    try:
        h = native(who).read_header(buf)
    except ValueError as exc:
        raise ValueError(f"{who}: {_where(name)}{exc}") from None
    return JpegHeader(h["height"], h["width"], h["components"], h["color_space"],
                      tuple(zip(h["h_samp"], h["v_samp"])), h["progressive"], (h["imcu_height"], h["imcu_width"]))


def check_crop(who: str, crop: Any, height: int, width: int, where: str = "") -> tuple[int, int, int, int]:
    """`crop` as (top, left, height, width) inside a height x width image (None: all of it), or ValueError."""
    if crop is None:
        return 0, 0, height, width
    if (not isinstance(crop, (tuple, list)) or len(crop) != 4
            or not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in crop)):
        raise ValueError(f"{who}: expected crop as 4 ints (top, left, height, width), got {crop!r}")
    top, left, h, w = (int(v) for v in crop)
    if top < 0 or left < 0 or h < 1 or w < 1 or top + h > height or left + w > width:
        raise ValueError(f"{who}: {where}crop (top={top}, left={left}, height={h}, width={w}) is not "
                         f"inside the {height}x{width} image")
    return top, left, h, w


def check_out(who: str, out: Any, shape: tuple[int, ...], layout: str | None = None) -> None:
    """`out` is a tensor a reader may write `shape` uint8 pixels into: a dense uint8 CPU tensor of
    that shape with any strides (a slice of a batch, a permuted view) whose elements do not share
    memory. Else a ValueError naming `out` and what is wrong with it (`layout`, the layout `shape`
    is in, lets it say when `out` has the other layout's shape)."""
    want = f"{who}: expected out to be a uint8 CPU tensor of shape {shape}"
    if not isinstance(out, torch.Tensor):
        raise ValueError(f"{want}, got {type(out).__name__}")
    wrong = [what for what, bad in (("wrong device: the decoders write host memory", out.device.type != "cpu"),
                                    (f"not dense: layout {out.layout}", out.layout != torch.strided),
                                    ("wrong dtype", out.dtype != torch.uint8),
                                    ("wrong shape" + _layout_hint(tuple(out.shape), shape, layout),
                                     tuple(out.shape) != shape)) if bad]
    if wrong:
        raise ValueError(f"{want}, got {out.dtype} {tuple(out.shape)} on {out.device} ({'; '.join(wrong)})")
    if has_internal_overlap(out):
        raise ValueError(f"{who}: out has elements that share memory (shape {tuple(out.shape)}, strides "
                         f"{out.stride()}, e.g. from expand()): each pixel needs its own byte; pass out.clone()")


def _layout_hint(got: tuple[int, ...], shape: tuple[int, ...], layout: str | None) -> str:
    """': that is the HWC shape, ...' when `got` is `shape` (laid out as `layout`) in the other layout."""
    if layout not in LAYOUTS or len(got) != 3:
        return ""
    other = "HWC" if layout == "CHW" else "CHW"
    moved = (shape[1], shape[2], shape[0]) if layout == "CHW" else (shape[2], shape[0], shape[1])
    return f": that is the {other} shape, pass layout={other!r} or an out of {layout} shape" if got == moved else ""


def ycbcr_in_layout(rgb: torch.Tensor, layout: str, out: torch.Tensor | None = None) -> torch.Tensor:
    """fastprep's exact YCbCr of uint8 RGB pixels laid out as `layout`, in that same layout (the op
    returns CHW whatever it reads): how every reader converts an RGB-coded image for mode="YCbCr".
    `out` (checked by the caller) receives it."""
    ycc = rgb_to_ycbcr(rgb, layout)
    ycc = ycc if layout == "CHW" else ycc.permute(1, 2, 0)
    return ycc.contiguous() if out is None else out.copy_(ycc)


def decode_jpeg(data: Any, *, crop: tuple[int, int, int, int] | None = None, mode: str = "RGB",
                layout: str = "CHW", out: torch.Tensor | None = None, strict: bool = False,
                name: str | None = None, scale: int = 8, exif: bool = False) -> torch.Tensor:
    """Decode a JPEG (or a window of it) into a uint8 tensor, without the GIL.

    Same bits as Pillow's ``Image.open(f).convert("RGB")`` (both run libjpeg-turbo with its
    default ISLOW DCT and fancy upsampling; tested equal). With `crop`, only the iMCU rows and
    columns covering the window are decoded (``jpeg_skip_scanlines`` / ``jpeg_crop_scanline``),
    with one iMCU column of margin each side where chroma is upsampled horizontally: libjpeg's
    fancy upsampling treats a cropped region's edge columns as image edges, and the margin keeps
    those columns outside the window. The window equals the full decode cropped, bit for bit
    (tested: 4:4:4, 4:2:2, 4:2:0, grey, baseline and progressive, windows at every edge).

    ``mode="YCbCr"`` returns the JPEG's own Y, Cb, Cr samples (upsampled, no colour conversion),
    skipping the YCbCr -> RGB -> YCbCr round trip. ``fastprep.rgb_to_ycbcr(decode_jpeg(data))``
    gives the same bits wherever libjpeg's YCbCr -> RGB needs no clamping (tested over all 2^24
    triples and on photos), and differs where it clamps: saturated colours, whose YCbCr lies
    outside the RGB cube, come back from the round trip moved into it. On scikit-image's photos
    that is 0.02-4.3% of the pixels, by up to 32. The direct samples are the ones the encoder
    stored. A grey JPEG gives Cb = Cr = 128; an RGB-coded JPEG (Adobe, no transform) is decoded to
    RGB and converted with fastprep.rgb_to_ycbcr. ``mode="GRAY"`` gives the Y samples of a colour
    JPEG (not Pillow's ``convert("L")``, which is computed from rounded RGB).

    A CMYK or YCCK JPEG (4 components, Adobe) decodes with Pillow's bits: ``mode="RGB"`` and
    ``"GRAY"`` equal ``Image.open(f).convert("RGB")`` and ``convert("L")`` (Adobe's inverted CMYK,
    Pillow's integer CMYK -> RGB -> L), ``"YCbCr"`` is fastprep.rgb_to_ycbcr of that RGB; windows
    and scales as for any JPEG.

    Args:
        data: the file's bytes (bytes, bytearray, memoryview, 1-D uint8 tensor or array) or its path.
        crop: (top, left, height, width) of the window to decode; None decodes everything.
        mode: "RGB" (grey JPEGs repeat Y), "YCbCr" or "GRAY" (one channel).
        layout: "CHW" (torchvision's) or "HWC" (the decoder's own order, no de-interleave).
        out: a uint8 CPU tensor of the output's shape (any strides) to decode into.
        strict: raise ValueError on the corrupt data libjpeg would recover from, instead of a
            :class:`CorruptJpegWarning`. Default False here (torchvision's ``decode_jpeg`` warns
            too); the sources (ImageFolder, JpegFile, ...) default to True, as Pillow raises.
        name: what to call the data in errors (default: the path, if one was given).
        scale: M of libjpeg-turbo's reduced decode at M/8 of the image's size (8: full size, the
            default); `crop` is then in the scaled image's pixels (fastprep.io.jpeg._scale.scaled_size).
            The same bits as libjpeg-turbo's (Pillow's ``draft``) scaled decode of the whole image.
        exif: turn the image upright by its EXIF orientation (torchvision's
            ``apply_exif_orientation=True``; the bits of Pillow's ``ImageOps.exif_transpose``);
            `crop` and `out` are then in the upright image, and only the stored pixels under the
            window are decoded (fastprep.io.jpeg._exif). Default False: the pixels as stored, as Pillow's
            ``Image.open(f).convert("RGB")`` (torchvision's ImageFolder) gives them.

    Returns:
        uint8 tensor [C, height, width] (CHW) or [height, width, C] (HWC); `out` if given.

    Raises:
        ValueError: not a JPEG, corrupt data (naming `name` and the byte offset), a crop outside
            the image, a JPEG of 2 components or 12-bit samples, or an image over ``MAX_IMAGE_PIXELS``.
        RuntimeError: fastprep was built without libjpeg-turbo.

    Example:
        >>> img = decode_jpeg("cat.jpg", crop=(10, 20, 256, 256))   # [3, 256, 256] uint8
        >>> ycc = decode_jpeg(data, mode="YCbCr", layout="HWC")
    """
    who = "decode_jpeg"
    mod = native(who)
    check_image_args(who, mode, layout)
    buf, path = as_bytes(who, data)
    name = name or path
    header = _header(who, buf, name)
    where = _where(name)
    if MAX_IMAGE_PIXELS is not None and header.height * header.width > MAX_IMAGE_PIXELS:
        raise ValueError(f"{who}: {where}{header.height}x{header.width} pixels is over "
                         f"fastprep.io.jpeg.MAX_IMAGE_PIXELS ({MAX_IMAGE_PIXELS}): a decompression bomb?")
    orientation = jpeg_orientation(buf) if check_bool(who, "exif", exif) else 1
    scaled = upright_size(*scaled_size(header.height, header.width, check_scale(who, scale)), orientation)
    top, left, height, width = check_crop(who, crop, *scaled, where if scale == 8 else f"{where}at scale {scale}/8: ")
    channels = 1 if mode == "GRAY" else 3
    shape = (channels, height, width) if layout == "CHW" else (height, width, channels)
    if out is not None:
        check_out(who, out, shape, layout)
    if orientation != 1:  # the stored window under the upright one, decoded, then turned upright
        window = stored_window((top, left, height, width), *scaled, orientation)
        stored = decode_jpeg(buf, crop=window, mode=mode, layout="HWC", strict=strict, name=name, scale=scale)
        return to_upright(stored, orientation, layout, out)
    if mode == "YCbCr" and header.color_space == "RGB":
        return ycbcr_in_layout(decode_jpeg(buf, crop=crop, mode="RGB", layout=layout, strict=strict, name=name,
                                           scale=scale), layout, out)
    if out is None:
        out = torch.empty(shape, dtype=torch.uint8)
    planes = out if layout == "CHW" else out.permute(2, 0, 1)
    try:
        notes = mod.decode_into(buf, planes.numpy(), top, left, mode, strict, scale)
    except ValueError as exc:
        raise ValueError(f"{who}: {where}{exc}") from None
    if notes:
        warnings.warn(CorruptJpegWarning(f"{who}: {where}libjpeg recovered from corrupt data: {'; '.join(notes)}"),
                      stacklevel=2)
    return out
