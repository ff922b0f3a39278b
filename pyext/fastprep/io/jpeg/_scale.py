"""Reduced-scale JPEG decoding: which of libjpeg-turbo's M/8 scales a window is decoded at when it
is only going to be resized smaller (``RandomResizedCrop(..., jpeg_scale="reduced")``, docs/resize.md).

A JPEG decoded at scale M/8 runs a reduced inverse DCT (M x M output pixels per 8 x 8 block) and
colour-converts M^2/64 of the pixels; its entropy decoding is not reduced, so the saving has a
floor (docs/resize.md measures it). Only M in :data:`DCT_SCALES` are chosen: the scales whose
inverse DCT libjpeg-turbo has in SIMD (3/8, 5/8, 6/8 and 7/8 are plain C, and measured here no
faster than 4/8 or than the exact decode).
"""

from __future__ import annotations

from typing import Any

from fastprep.io.jpeg._exif import stored_window, upright_size, upright_window

DENOMINATOR = 8
"""libjpeg-turbo's scale_denom: a scale is M / 8."""

DCT_SCALES = (1, 2, 4)
"""The M of the reduced scales M / 8 chosen, smallest first."""


def check_scale(who: str, scale: Any) -> int:
    """`scale` (the M of M / 8) as an int in 1..8, or a ValueError naming `who` and the value."""
    if isinstance(scale, bool) or not isinstance(scale, int) or not 1 <= scale <= DENOMINATOR:
        raise ValueError(f"{who}: expected scale to be an int M in 1..8 (the image decoded at M/8 of its size), "
                         f"got {scale!r}")
    return scale


def scaled_size(height: int, width: int, scale: int) -> tuple[int, int]:
    """The size of a height x width JPEG decoded at scale / 8 (libjpeg-turbo rounds up).

    Example:
        >>> scaled_size(1024, 683, 4)
        (512, 342)
    """
    return -(-height * scale // DENOMINATOR), -(-width * scale // DENOMINATOR)


def reducible(height: int, width: int, at_least: tuple[int, int]) -> bool:
    """Whether some scale of DCT_SCALES could keep a height x width window at least `at_least` =
    (out_h, out_w): False where even the largest, 4/8, cannot, and the window is read exactly
    without choosing (a 500 x 375 photo's windows, resized to 224^2, all but never reach 448 px).

    A scaled window's edges are rounded to the nearest scaled pixel, each by at most half of one,
    so at M/8 it is at most ceil(height * M / 8) rows (and columns likewise), in every orientation.

    Example:
        >>> reducible(448, 700, (224, 224)), reducible(446, 700, (224, 224))
        (True, False)
    """
    m = DCT_SCALES[-1]
    return -(-height * m // DENOMINATOR) >= at_least[0] and -(-width * m // DENOMINATOR) >= at_least[1]


def reduced_crop(crop: tuple[int, int, int, int], height: int, width: int,
                 at_least: tuple[int, int], orientation: int = 1) -> tuple[int, tuple[int, int, int, int]]:
    """(M, the window in the M/8-scaled image) for window `crop` = (top, left, h, w) of a height x
    width JPEG that will be resized to `at_least` = (out_h, out_w): the smallest M of DCT_SCALES
    whose scaled window is still at least that size on both axes, else (8, crop) unchanged.

    The scaled window's edges are the window's edges times M/8, rounded to the nearest scaled
    pixel (half up): its pixels cover the window to within half a scaled pixel (4/M image pixels)
    at each edge, the whole difference of geometry from the exact window.

    `orientation`: the EXIF orientation the image is read upright by (`height`, `width`, `crop`
    and the result are then the upright image's, as OrientedImage's). The scaled decode's pixel
    grid starts at the stored image's top-left corner, which a flip moves to the upright image's
    far edge: where the stored size is not a multiple of 8/M, the grid's last pixel is partly
    outside the image, and rounding the upright edges would misplace the window by up to one
    scaled pixel more. So the edges are rounded in the stored image (:func:`scaled_crop` of the
    stored window under `crop`), then turned upright: the same half scaled pixel at each edge.

    Example:
        >>> reduced_crop((150, 170, 700, 700), 1024, 1024, (224, 224))
        (4, (75, 85, 350, 350))
        >>> reduced_crop((0, 0, 300, 300), 1024, 1024, (224, 224))[0]   # 1/2 would be 150 < 224
        8
    """
    if not reducible(crop[2], crop[3], at_least):
        return DENOMINATOR, tuple(crop)
    for m in DCT_SCALES:
        scaled = scaled_crop(crop, height, width, m, orientation)
        if scaled[2] >= at_least[0] and scaled[3] >= at_least[1]:
            return m, scaled
    return DENOMINATOR, tuple(crop)


def scaled_crop(crop: tuple[int, int, int, int], height: int, width: int, scale: int,
                orientation: int = 1) -> tuple[int, int, int, int]:
    """Window `crop` = (top, left, h, w) of a height x width JPEG as a window of it decoded at
    scale / 8: each edge times scale / 8, rounded half up, inside the scaled image (h or w 0
    where it rounds away). With `orientation` (the image, `crop` and the result read upright by
    it), the edges are rounded in the stored image, where the scaled decode's grid starts
    (see :func:`reduced_crop`)."""
    if orientation != 1:
        stored_h, stored_w = upright_size(height, width, orientation)
        window = scaled_crop(stored_window(crop, height, width, orientation), stored_h, stored_w, scale)
        return upright_window(window, *upright_size(*scaled_size(stored_h, stored_w, scale), orientation),
                              orientation)
    top, left, h, w = crop
    sh, sw = scaled_size(height, width, scale)
    t, b = (top * scale + 4) // DENOMINATOR, min(sh, ((top + h) * scale + 4) // DENOMINATOR)
    s, e = (left * scale + 4) // DENOMINATOR, min(sw, ((left + w) * scale + 4) // DENOMINATOR)
    return t, s, b - t, e - s


def reduced_read(image: Any, crop: tuple[int, int, int, int],
                 at_least: tuple[int, int]) -> tuple[int, tuple[int, int, int, int]]:
    """:func:`reduced_crop` for `image`, a WindowedImage that decodes at M/8 (``scaled_decode``):
    its own ``reduced_window(crop, at_least)`` where it has one (an image read upright by EXIF,
    whose scaled grid does not start at its top-left corner), else reduced_crop of its size.
    A window no scale can reduce (:func:`reducible`) is (8, crop) at once: the exact read's work."""
    if not reducible(crop[2], crop[3], at_least):
        return DENOMINATOR, tuple(crop)
    own = getattr(image, "reduced_window", None)
    return own(crop, at_least) if own is not None else reduced_crop(crop, image.height, image.width, at_least)
