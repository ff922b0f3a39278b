"""jpeg_scale="reduced" on photos read upright by EXIF (exif=True), for every orientation 1-8 and every
parity of the stored size (odd and even height and width: a scaled decode's last pixel row or
column is then partly outside the image, at the upright image's far edge where a turn flips it).

The window read at M/8 must be Pillow's ``draft`` decode of the stored image cut at the stored
window's scaled edges and turned by ``exif_transpose``'s step (so the window's edges are rounded
where the scaled decode's grid lies), from a JpegFile(exif=True) and from a packed record read
with PackedDataset(exif=True); and its pixels must lie within the documented half scaled pixel
(4/M image pixels) of the exact window, measured on a ramp image whose pixels say where they are."""

import io

import numpy as np
import pytest

import fastprep.io as fio
from fastprep.io.jpeg._exif import stored_window, upright_size
from fastprep.io.jpeg._scale import reduced_read, scaled_crop, scaled_size
from fastprep.transforms._sample import Item
from fastprep.transforms._window import read_region

from helpers.jpeg_photos import encode, needs_decoder

Image = pytest.importorskip("PIL.Image")

pytestmark = [needs_decoder, pytest.mark.one_backend]

SIZES = [(77, 101), (77, 104), (80, 101), (80, 104)]  # stored height x width: odd / even each
SCALES = (1, 2, 4)
TRANSPOSE = {2: Image.Transpose.FLIP_LEFT_RIGHT, 3: Image.Transpose.ROTATE_180, 4: Image.Transpose.FLIP_TOP_BOTTOM,
             5: Image.Transpose.TRANSPOSE, 6: Image.Transpose.ROTATE_270, 7: Image.Transpose.TRANSVERSE,
             8: Image.Transpose.ROTATE_90}  # ImageOps.exif_transpose's steps


def _ramp(h: int, w: int) -> np.ndarray:
    """Red rises with the stored row, green with the stored column: a pixel says where it is."""
    rows = np.linspace(20, 235, h)[:, None].repeat(w, 1)
    cols = np.linspace(20, 235, w)[None, :].repeat(h, 0)
    return np.stack([rows, cols, np.full((h, w), 128.0)], axis=2).round().astype(np.uint8)


def _tagged(h: int, w: int, orientation: int) -> bytes:
    exif = Image.Exif()
    exif[0x0112] = orientation
    return encode(_ramp(h, w), quality=95, subsampling="4:4:4", exif=exif.tobytes())


def _windows(height: int, width: int) -> list[tuple[int, int, int, int]]:
    """Windows of the upright image: at every edge and corner (where the partial block lies after
    a flip) and inside, of odd and even sizes."""
    h, w = height * 2 // 3, width * 2 // 3
    return [(0, 0, h, w), (height - h, width - w, h, w), (0, width - w, h, w), (height - h, 0, h, w),
            (3, 5, h - 1, w - 3), (height - h - 1, width - w - 2, h + 1, w + 1), (0, 0, height, width)]


def _pil_reduced(data: bytes, crop: tuple[int, int, int, int], scale: int, orientation: int) -> np.ndarray:
    """Pillow's reference: the stored image drafted to M/8, cut at the scaled edges of the stored
    window under `crop` (fastprep.io.jpeg._scale.scaled_crop of an unturned image), turned by
    exif_transpose's step."""
    with Image.open(io.BytesIO(data)) as im:
        H, W = im.height, im.width
        im.draft("RGB", (W * scale // 8, H * scale // 8))
        stored = np.array(im.convert("RGB"))
    assert stored.shape[:2] == scaled_size(H, W, scale)
    t, left, h, w = scaled_crop(stored_window(crop, *upright_size(H, W, orientation), orientation), H, W, scale)
    window = Image.fromarray(np.ascontiguousarray(stored[t:t + h, left:left + w]))
    return np.array(window if orientation == 1 else window.transpose(TRANSPOSE[orientation]))


def _at_least(crop: tuple[int, int, int, int], m: int) -> tuple[int, int]:
    """An output size for which `crop` is read at M/8 (M/16 would be smaller than it)."""
    return max(1, crop[2] * m // 8 - 2), max(1, crop[3] * m // 8 - 2)


def _read(image, crop, at_least):
    top, left, h, w = crop
    return read_region(Item(0, "image", image, "HWC"), top, top + h, left, left + w, at_least).numpy()


@pytest.fixture(scope="module")
def turned(tmp_path_factory):
    """{(size, orientation): (JPEG bytes, its JpegFile(exif=True), its record of a PackedDataset(exif=True))}."""
    root = tmp_path_factory.mktemp("reduced_exif")
    files = {}
    for h, w in SIZES:
        for o in range(1, 9):
            (root / "src" / "a").mkdir(parents=True, exist_ok=True)
            path = root / "src" / "a" / f"{h}x{w}_{o}.jpg"
            path.write_bytes(_tagged(h, w, o))
            files[(h, w), o] = path
    fio.pack(root / "src", root / "pack", progress=False)
    packed = fio.PackedDataset(root / "pack", exif=True)
    records = {packed.where(i).rsplit("/", 1)[1].rstrip(")"): packed.load_raw(i)[0] for i in range(len(packed))}
    return {key: (path.read_bytes(), fio.JpegFile(path, exif=True), records[path.name]) for key, path in files.items()}


@pytest.mark.parametrize("orientation", range(1, 9))
@pytest.mark.parametrize("size", SIZES, ids=[f"{h}x{w}" for h, w in SIZES])
def test_reduced_windows_of_turned_photos_are_pillows_draft_turned(turned, size, orientation):
    data, file, record = turned[size, orientation]
    assert (file.height, file.width) == (record.height, record.width) == upright_size(*size, orientation)
    for crop in _windows(file.height, file.width):
        for m in SCALES:
            at_least = _at_least(crop, m)
            assert reduced_read(file, crop, at_least)[0] == m, (crop, at_least)  # the scale under test is chosen
            want = _pil_reduced(data, crop, m, orientation)
            for image in (file, record):
                np.testing.assert_array_equal(_read(image, crop, at_least), want,
                                              err_msg=f"{type(image).__name__} {crop} at {m}/8")


def _place(reduced: np.ndarray, exact: np.ndarray, channel: int) -> float:
    """How far (in image pixels of the ramp's axis) the reduced window's pixels sit from the exact
    window's: the difference of their mean ramp values over the ramp's slope."""
    return float(reduced[..., channel].astype(np.float64).mean() - exact[..., channel].astype(np.float64).mean())


@pytest.mark.parametrize("orientation", range(1, 9))
@pytest.mark.parametrize("size", SIZES, ids=[f"{h}x{w}" for h, w in SIZES])
def test_reduced_windows_lie_within_half_a_scaled_pixel_of_the_exact_window(turned, size, orientation):
    """The documented tolerance, measured: each edge moves by at most 4/M image pixels, so the
    window's middle does, in the stored rows (red) and columns (green) alike."""
    _, file, _ = turned[size, orientation]
    slope = {0: (235 - 20) / (size[0] - 1), 1: (235 - 20) / (size[1] - 1)}
    for crop in _windows(file.height, file.width):
        exact = _read(file, crop, None)
        for m in SCALES:
            reduced = _read(file, crop, _at_least(crop, m))
            assert reduced.shape[0] < crop[2]  # read at M/8
            for channel in (0, 1):
                shift = _place(reduced, exact, channel) / slope[channel]
                assert abs(shift) <= 4 / m + 0.5, (crop, m, "rows" if channel == 0 else "columns", shift)
