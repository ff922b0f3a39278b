"""PackedDataset(exif=True).cut_window: a cut is a JPEG of the stored pixels, so a record stored
turned is refused by name (its windows are the upright image's); records that are not turned cut
as they do without exif, and exif=False cuts the stored image."""

import numpy as np
import pytest
import torch

import fastprep.io as fio

from helpers.jpeg_photos import encode, needs_decoder, photo

Image = pytest.importorskip("PIL.Image")

pytestmark = [needs_decoder, pytest.mark.one_backend]


def _tagged(orientation: int | None) -> bytes:
    arr = np.ascontiguousarray(photo("astronaut")[:90, :130])
    if orientation is None:
        return encode(arr)
    exif = Image.Exif()
    exif[0x0112] = orientation
    return encode(arr, exif=exif.tobytes())


@pytest.fixture(scope="module")
def pack(tmp_path_factory):
    """Records 0: no EXIF, 1: tagged 1, 2: tagged 3, 3: tagged 6 (the files' sorted order)."""
    root = tmp_path_factory.mktemp("cut_exif")
    (root / "src" / "a").mkdir(parents=True)
    for name, orientation in (("0_plain", None), ("1_upright", 1), ("2_turned3", 3), ("3_turned6", 6)):
        (root / "src" / "a" / f"{name}.jpg").write_bytes(_tagged(orientation))
    fio.pack(root / "src", root / "p", progress=False)
    return root / "p"


@pytest.mark.parametrize("i, orientation", [(2, 3), (3, 6)])
def test_a_turned_record_is_refused_by_name(pack, i, orientation):
    ds = fio.PackedDataset(pack, exif=True)
    with pytest.raises(ValueError, match=rf"cut_window: .*record {i} .*EXIF orientation {orientation}\) .*exif=True"):
        ds.cut_window(i, (8, 16, 24, 32))
    with pytest.raises(ValueError, match="exif=True"):
        ds.cut_window(i)


@pytest.mark.parametrize("i", [0, 1])
def test_records_not_turned_cut_as_without_exif(pack, i):
    ds, plain = fio.PackedDataset(pack, exif=True), fio.PackedDataset(pack)
    crop = (8, 16, 24, 32)
    cut = ds.cut_window(i, crop)
    assert cut == plain.cut_window(i, crop)
    got = fio.decode_window_batch([cut], device="cpu")[0]
    assert torch.equal(got, ds.load_raw(i)[0].decode(crop))


def test_exif_false_cuts_the_stored_image(pack):
    plain = fio.PackedDataset(pack)
    crop = (8, 16, 24, 32)
    got = fio.decode_window_batch([plain.cut_window(3, crop)], device="cpu")[0]
    assert torch.equal(got, plain.load_raw(3)[0].decode(crop))
    upright = fio.PackedDataset(pack, exif=True).load_raw(3)[0]
    assert (upright.height, upright.width) == (130, 90) and not torch.equal(got, upright.decode(crop))
