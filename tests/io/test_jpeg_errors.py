"""fastprep.io.decode_jpeg on bad input: clear exceptions naming the argument, the file and the
byte offset; corrupt data recovered from warns (or raises with strict); mutated files never
crash the process."""

import io
import textwrap
import warnings

import numpy as np
import pytest
import torch

import fastprep.io as fio

from helpers.jpeg_photos import child_outcomes, needs_decoder, photo_jpeg, pil_decode

pytestmark = [needs_decoder, pytest.mark.one_backend]
_jpeg = fio.jpeg._jpeg  # the native module (None when not built: every test skips)


def small() -> bytes:
    return photo_jpeg("chelsea", "4:2:0", False, (64, 96))


BAD_ARGUMENTS = [
    (dict(mode="RGBA"), ValueError, r"decode_jpeg: expected mode to be one of \('RGB', 'YCbCr', 'GRAY'\), got 'RGBA'"),
    (dict(layout="CWH"), ValueError, r"decode_jpeg: expected layout to be one of \('CHW', 'HWC'\), got 'CWH'"),
    (dict(crop=(0, 0, 65, 10)), ValueError,
     r"decode_jpeg: crop \(top=0, left=0, height=65, width=10\) is not inside the 64x96 image"),
    (dict(crop=(-1, 0, 4, 4)), ValueError, r"crop \(top=-1, left=0, height=4, width=4\) is not inside"),
    (dict(crop=(0, 90, 4, 7)), ValueError, r"crop \(top=0, left=90, height=4, width=7\) is not inside"),
    (dict(crop=(0, 0, 0, 4)), ValueError, r"crop \(top=0, left=0, height=0, width=4\) is not inside"),
    (dict(crop=(2**62, 2**62, 2**62, 2**62)), ValueError, r"is not inside the 64x96 image"),
    (dict(crop=(0, 0, 4)), ValueError, r"expected crop as 4 ints \(top, left, height, width\), got \(0, 0, 4\)"),
    (dict(crop=(0, 0, 4.0, 4)), ValueError, r"expected crop as 4 ints"),
    (dict(crop=(0, 0, True, 4)), ValueError, r"expected crop as 4 ints"),
    (dict(out=torch.empty(3, 64, 95, dtype=torch.uint8)), ValueError,
     r"expected out to be a uint8 CPU tensor of shape \(3, 64, 96\), got torch.uint8 \(3, 64, 95\)"),
    (dict(out=torch.empty(3, 64, 96)), ValueError, r"expected out to be a uint8 CPU tensor .* got torch.float32"),
    (dict(out=torch.empty(64, 96, 3, dtype=torch.uint8)), ValueError, r"of shape \(3, 64, 96\)"),
    (dict(out=np.empty((3, 64, 96), np.uint8)), ValueError, r"got ndarray"),
]


def _case_id(v):
    """A test id that does not depend on memory contents (xdist workers must collect the same ids)."""
    if isinstance(v, dict):
        return ",".join(f"{k}={_case_id(x)}" for k, x in v.items())
    if isinstance(v, (torch.Tensor, np.ndarray)):
        return f"{type(v).__name__}{tuple(v.shape)}{v.dtype}"
    return str(v)[:40]


@pytest.mark.parametrize(("kwargs", "exc", "match"), BAD_ARGUMENTS, ids=_case_id)
def test_bad_arguments_name_the_argument_and_value(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        fio.decode_jpeg(small(), **kwargs)


@pytest.mark.parametrize(("data", "match"), [
    (torch.zeros(2, 5, dtype=torch.uint8), r"expected data as a 1-D uint8 CPU tensor, got torch.uint8 \(2, 5\)"),
    (torch.zeros(5, dtype=torch.int32), r"expected data as a 1-D uint8 CPU tensor, got torch.int32"),
    (np.zeros(5, np.float32), r"expected data as a 1-D uint8 array, got float32"),
    (12, r"expected data as bytes, a 1-D uint8 tensor or array, or a path, got int"),
])
def test_bad_data_types_are_type_errors(data, match):
    with pytest.raises(TypeError, match=f"decode_jpeg: {match}"):
        fio.decode_jpeg(data)


@pytest.mark.parametrize(("data", "match"), [
    (b"", r"decode_jpeg: f.jpg: not a readable JPEG: Empty input file"),
    (b"\x89PNG\r\n\x1a\n" + bytes(50), r"decode_jpeg: f.jpg: not a readable JPEG: Not a JPEG file: starts with 0x89 0x50 \(at byte"),
    (b"\xff\xd8\xff\xd9", r"decode_jpeg: f.jpg: not a readable JPEG: .*\(at byte \d+ of 4\)"),
])
def test_data_that_is_not_a_jpeg_is_a_value_error_naming_the_file(data, match):
    with pytest.raises(ValueError, match=match):
        fio.decode_jpeg(data, name="f.jpg")


def test_a_cmyk_jpeg_decodes_as_pillow_converts_it():
    """No longer refused (tests/io/test_jpeg_cmyk.py has the cases): Pillow's convert("RGB") bits."""
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.full((16, 16, 3), 40, np.uint8)).convert("CMYK").save(buf, format="JPEG")
    data = buf.getvalue()
    assert fio.read_jpeg_header(data).color_space == "CMYK"
    assert np.array_equal(fio.decode_jpeg(data, layout="HWC").numpy(), pil_decode(data))


def test_a_truncated_file_warns_with_the_file_name_and_strict_raises_with_the_offset(tmp_path):
    data = photo_jpeg("astronaut")
    path = tmp_path / "cut.jpg"
    path.write_bytes(data[: len(data) // 2])
    with pytest.warns(fio.CorruptJpegWarning, match=r"decode_jpeg: .*cut.jpg: libjpeg recovered from corrupt data: "
                                                      r"Premature end of JPEG file"):
        img = fio.decode_jpeg(path)
    assert torch.equal(img[:, :64], fio.decode_jpeg(data)[:, :64])  # the part before the cut is intact
    with pytest.raises(ValueError, match=rf"decode_jpeg: .*cut.jpg: corrupt JPEG: Premature end of JPEG file "
                                         rf"\(at byte \d+ of {len(data) // 2}\)"):
        fio.decode_jpeg(path, strict=True)


def test_a_window_above_a_truncation_decodes_without_warning():
    """An ROI decode of a baseline JPEG reads only as far as its window: damage below is unseen."""
    data = photo_jpeg("astronaut")
    cut = data[: len(data) // 2]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        top = fio.decode_jpeg(cut, crop=(0, 0, 32, 512), strict=True)
    assert torch.equal(top, fio.decode_jpeg(data)[:, :32])


def test_an_image_over_max_image_pixels_is_refused_before_decoding(monkeypatch):
    data = bytearray(small())
    sof = data.index(b"\xff\xc0")  # baseline SOF0: length(2) precision(1) height(2) width(2)
    data[sof + 5:sof + 9] = (60000).to_bytes(2, "big") + (60000).to_bytes(2, "big")
    assert fio.read_jpeg_header(bytes(data))[:2] == (60000, 60000)
    with pytest.raises(ValueError, match=r"60000x60000 pixels is over fastprep.io.jpeg.MAX_IMAGE_PIXELS \(178956970\)"):
        fio.decode_jpeg(bytes(data))
    monkeypatch.setattr(fio.jpeg, "MAX_IMAGE_PIXELS", 64 * 96 - 1)
    with pytest.raises(ValueError, match=r"64x96 pixels is over"):
        fio.decode_jpeg(small())


def test_the_native_module_checks_its_own_arguments():
    """What the Python layer checks first, the binding checks again (windows in int64)."""
    out = np.empty((3, 4, 4), np.uint8)
    with pytest.raises(ValueError, match=r"crop \(top=9223372036854775804, left=0, height=4, width=4\) is not inside"):
        _jpeg.decode_into(small(), out, 2**63 - 4, 0, "RGB", False)
    with pytest.raises(ValueError, match=r"out: expected a writable uint8 \[channels, height, width\] buffer with 1"):
        _jpeg.decode_into(small(), out, 0, 0, "GRAY", False)
    with pytest.raises(ValueError, match=r"out: negative strides"):
        _jpeg.decode_into(small(), out[:, ::-1], 0, 0, "RGB", False)
    with pytest.raises(ValueError, match=r"mode: expected 'RGB', 'YCbCr' or 'GRAY', got 'rgb'"):
        _jpeg.decode_into(small(), out, 0, 0, "rgb", False)
    with pytest.raises(ValueError, match=r"data: expected contiguous bytes"):
        _jpeg.decode_into(np.zeros((2, 8), np.uint8), out, 0, 0, "RGB", False)
    with pytest.raises(BufferError):  # read-only output
        _jpeg.decode_into(small(), memoryview(bytes(48)).cast("B", (3, 4, 4)), 0, 0, "RGB", False)


def test_mutated_files_never_crash_the_process():
    """Flipped bytes, cuts and spliced markers in a child process: every decode returns (maybe
    warning) or raises ValueError; a crash or exit() would fail the child."""
    code = textwrap.dedent("""
        import random, warnings, sys
        import fastprep.io as fio
        sys.path.insert(0, "tests")
        from helpers.jpeg_photos import photo_jpeg
        warnings.simplefilter("ignore", fio.CorruptJpegWarning)
        rng = random.Random(1234)
        seeds = [photo_jpeg("chelsea", s, p, (80, 120)) for s in ("4:4:4", "4:2:0") for p in (False, True)]
        outcomes = {"ok": 0, "ValueError": 0}
        for k in range(400):
            data = bytearray(rng.choice(seeds))
            for _ in range(rng.randint(1, 8)):
                op = rng.random()
                i = rng.randrange(len(data) + 1)
                if op < 0.6 and i < len(data):
                    data[i] = rng.randrange(256)
                elif op < 0.8 and i > 2:
                    data = data[:i]
                else:
                    data[i:i] = bytes([0xFF, rng.choice([0xC0, 0xC4, 0xDA, 0xDB, 0xDD, 0xD9, 0xD0])])
            crop = (rng.randint(0, 40), rng.randint(0, 60), rng.randint(1, 40), rng.randint(1, 60)) if k % 2 else None
            for strict in (False, True):
                try:
                    fio.decode_jpeg(bytes(data), crop=crop, strict=strict, mode=rng.choice(["RGB", "YCbCr", "GRAY"]))
                    outcomes["ok"] += 1
                except ValueError:
                    outcomes["ValueError"] += 1
        print(outcomes["ok"], outcomes["ValueError"])
    """)
    ok, errors = child_outcomes(code)
    assert ok > 50 and errors > 50  # both outcomes were exercised
