"""A truncated JPEG is a bad sample by default, as Pillow and torchvision's ImageFolder raise (issue
43): every source that decodes JPEGs defaults to strict=True; strict=False decodes it as libjpeg
recovers it (grey fill) with a CorruptJpegWarning; under on_error="raise" the error names the file
and how to skip it; on_error="skip" skips it."""

import inspect
import warnings

import pytest
import torch

import fastprep.io as fio
from fastprep.core._failure_text import SKIP_HINT, with_skip_hint
from fastprep.io.packed._pack import pack as local_pack

from helpers.jpeg_photos import needs_decoder, photo_jpeg

pytestmark = [needs_decoder, pytest.mark.one_backend]

GOOD = photo_jpeg("coffee", "4:2:0", False, (96, 128))
CUT = GOOD[:len(GOOD) // 2]  # cut in its scan: libjpeg recovers, filling the rest grey


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """cat/0.jpg good, cat/1.jpg truncated, cat/2.jpg good."""
    root = tmp_path_factory.mktemp("truncated")
    (root / "cat").mkdir()
    for i, data in enumerate([GOOD, CUT, GOOD]):
        (root / "cat" / f"{i}.jpg").write_bytes(data)
    return root


@pytest.mark.parametrize("roi", [False, True])
@pytest.mark.parametrize("read", ["dataset[i]", "load_raw"])
def test_imagefolder_raises_by_default_naming_the_file_and_on_error(folder, roi, read):
    ds = fio.ImageFolder(folder, roi=roi)
    bad = str(folder / "cat" / "1.jpg")
    with pytest.raises(ValueError) as err:
        image = ds[1][0] if read == "dataset[i]" else ds.load_raw(1)[0]
        if roi:  # a JpegFile: its body is read when a window is decoded
            image.decode()
    text = str(err.value)
    assert bad in text and "corrupt JPEG" in text, text
    if read == "dataset[i]" or not roi:  # the source's own read: its error says how to skip
        assert text.endswith(f"({SKIP_HINT})"), text
    assert ds.bad_samples.names() if not roi or read == "dataset[i]" else True


def test_strict_false_decodes_it_grey_filled_with_the_warning(folder):
    ds = fio.ImageFolder(folder, strict=False)
    with pytest.warns(fio.CorruptJpegWarning, match=r"1\.jpg.*libjpeg recovered from corrupt data"):
        image, label = ds[1]
    assert image.shape == (3, 96, 128) and label == 0
    assert (image[:, -16:] == 128).all()  # the part cut off: libjpeg's grey fill
    with pytest.warns(fio.CorruptJpegWarning):
        fio.ImageFolder(folder, roi=True, strict=False).load_raw(1)[0].decode()


@pytest.mark.parametrize("roi", [False, True])
def test_on_error_skip_skips_it(folder, roi):
    ds = fio.ImageFolder(folder, roi=roi, on_error="skip")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no CorruptJpegWarning: the file is skipped, not decoded grey
        items = [ds[i][0] for i in range(len(ds))]
    good = fio.decode_jpeg(GOOD)
    assert all(torch.equal(x.decode() if isinstance(x, fio.WindowedImage) else x, good) for x in items)
    assert ds.bad_samples.indices == [1] and "1.jpg" in ds.bad_samples.names()[0]


def test_every_source_defaults_to_strict():
    sources = [fio.ImageFolder, fio.JpegFile, fio.LMDBDataset, fio.HDF5Dataset, fio.WebDataset, fio.PackedDataset,
               local_pack]  # fio.pack passes its options on to it
    for source in sources:
        assert inspect.signature(source).parameters["strict"].default is True, source
    assert inspect.signature(fio.decode_jpeg).parameters["strict"].default is False  # as torchvision's decode_jpeg
    with pytest.raises(ValueError, match=r"JpegFile: expected strict to be a bool, got 'no'"):
        fio.JpegFile(GOOD, strict="no")


def test_jpegfile_raises_by_default_and_strict_false_warns():
    with pytest.raises(ValueError, match=r"cut\.jpg: corrupt JPEG"):
        fio.JpegFile(CUT, name="cut.jpg").decode()
    with pytest.warns(fio.CorruptJpegWarning, match=r"cut\.jpg"):
        fio.JpegFile(CUT, name="cut.jpg", strict=False).decode()


def test_pack_leaves_it_out_by_default_and_packs_it_with_strict_false(folder, tmp_path):
    with pytest.raises(fio.PackSourceError, match=r"cat/1\.jpg.*Premature end of JPEG file.*on_error='skip'"):
        fio.pack(folder, tmp_path / "a", progress=False)
    summary = fio.pack(folder, tmp_path / "b", progress=False, on_error="skip")
    assert [name for name, _ in summary.skipped] == ["cat/1.jpg"]
    with pytest.warns(fio.PackWarning, match=r"cat/1\.jpg: libjpeg recovered from corrupt data"):
        summary = fio.pack(folder, tmp_path / "c", progress=False, strict=False)
    assert not summary.skipped and len(fio.PackedDataset(tmp_path / "c")) == 3


def test_the_skip_hint_keeps_the_type_and_names_the_file():
    missing = FileNotFoundError(2, "No such file or directory", "x/1.jpg")
    hinted = with_skip_hint("ImageFolder", "x/1.jpg", missing)
    assert type(hinted) is FileNotFoundError and hinted.errno == 2
    assert str(hinted) == f"[Errno 2] ImageFolder: No such file or directory: 'x/1.jpg' ({SKIP_HINT})"
    assert str(with_skip_hint("LMDBDataset", "db[k]", ValueError("not an image"))) == \
        f"LMDBDataset: db[k]: not an image ({SKIP_HINT})"
    assert str(with_skip_hint("ImageFolder", "a.jpg", ValueError("ImageFolder: a.jpg: bad"))) == \
        f"ImageFolder: a.jpg: bad ({SKIP_HINT})"  # named already: not twice
    key = KeyError("k")
    assert with_skip_hint("ImageFolder", "a.jpg", key) is key  # its str() quotes: kept as it is


def test_the_pack_command_refuses_it_unless_no_strict(folder, tmp_path, capsys):
    from fastprep.tools.cli._commands import main  # noqa: PLC0415 (the command line, as test_pack_summary runs it)

    assert main(["pack", str(folder), str(tmp_path / "a"), "--no-progress"]) == 1
    assert "cat/1.jpg" in capsys.readouterr().err
    assert main(["pack", str(folder), str(tmp_path / "b"), "--no-progress", "--no-strict"]) == 0
    assert len(fio.PackedDataset(tmp_path / "b", strict=False)) == 3
