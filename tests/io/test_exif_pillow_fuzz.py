"""EXIF orientation read as the installed Pillow reads it (``ImageOps.exif_transpose`` turns by
``getexif().get(0x0112)``), on EXIF blocks Pillow's own writer never makes: the tag typed SSHORT,
SLONG, RATIONAL, FLOAT, BYTE..., its value stored by offset, duplicated, behind skipped entries,
the EXIF split over several APP1 segments (which Pillow joins), both byte orders, odd TIFF
headers and IFD offsets, junk and fill bytes between segments.

A named table of the kinds, then a fuzzer (a fixed seed, a few hundred cases, well under a
second of parsing): wherever Pillow reads the file, fastprep.io.jpeg_orientation gives what
exif_transpose turns by; on a sample, decode_jpeg(exif=True) gives exif_transpose's pixels, and a
pack of the cases keeps the same orientation in its records (the transcoder's own reader is
C++; pack hands it the orientation read here)."""

import io
import random
import struct
import warnings

import numpy as np
import pytest
import torch

import fastprep.io as fio
from fastprep.io.jpeg._exif import jpeg_orientation, with_orientation

from helpers.jpeg_photos import encode, needs_decoder

Image = pytest.importorskip("PIL.Image")
ImageOps = pytest.importorskip("PIL.ImageOps")

pytestmark = [needs_decoder, pytest.mark.one_backend]

BASE = encode(np.random.default_rng(3).integers(0, 256, (11, 19, 3), dtype=np.uint8), subsampling="4:4:4")
SIZES = {1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 6: 1, 7: 1, 8: 2, 9: 4, 10: 8, 11: 4, 12: 8, 13: 4, 16: 8}
PACK = {1: "B", 3: "H", 4: "I", 6: "b", 8: "h", 9: "i", 11: "f", 12: "d", 13: "I", 16: "Q"}
TURNS = {k: k for k in range(2, 9)}  # exif_transpose's lookup: 6, 6.0 and IFDRational(12, 2) alike


def pillow_orientation(data: bytes) -> int | None:
    """What exif_transpose turns `data` by (1: nothing), or None where Pillow cannot read it."""
    try:
        with warnings.catch_warnings():  # Pillow warns of the EXIF it skips, from Image.open on
            warnings.simplefilter("ignore")
            with Image.open(io.BytesIO(data)) as im:
                return TURNS.get(im.getexif().get(0x0112, 1), 1)
    except Exception:  # noqa: BLE001 (any failure: Pillow does not turn this file)
        return None


def value_bytes(kind: int, values: list, endian: str) -> bytes:
    if kind in (5, 10):
        return b"".join(struct.pack(endian + ("ii" if kind == 10 else "II"), *v) for v in values)
    if kind in (2, 7):
        return bytes(values)
    return struct.pack(endian + PACK[kind] * len(values), *values)


def tiff_block(entries: list[tuple[int, int, int, bytes | int]], endian: str = ">", head: bytes | None = None,
               ifd: int = 8, claimed: int | None = None, pad: bytes = b"") -> bytes:
    """A TIFF of one IFD at `ifd` with `entries` (tag, type, count, inline bytes or an offset into
    the data placed after the IFD, written as given when an int)."""
    head = head or (b"MM\x00*" if endian == ">" else b"II*\x00")
    body = struct.pack(endian + "H", len(entries) if claimed is None else claimed)
    for tag, kind, count, value in entries:
        field = struct.pack(endian + "I", value) if isinstance(value, int) else value.ljust(4, b"\x00")[:4]
        body += struct.pack(endian + "HHI", tag, kind, count) + field
    return head + struct.pack(endian + "I", ifd) + pad + body + b"\x00" * 4


def with_segments(*payloads: bytes, junk: bytes = b"") -> bytes:
    segments = b"".join(b"\xff\xe1" + struct.pack(">H", len(p) + 2) + p + junk for p in payloads)
    return BASE[:2] + segments + BASE[2:]


def _exif(tiff: bytes) -> bytes:
    return b"Exif\x00\x00" + tiff


def _by_offset(kind: int, values: list, endian: str = ">") -> bytes:
    """A TIFF whose only entry, the orientation, holds `values` of `kind` after the IFD (at 26)."""
    data = value_bytes(kind, values, endian)
    return tiff_block([(0x0112, kind, len(values), 26)], endian) + data


TABLE = [  # (what, JPEG bytes); each is checked against Pillow, and the turned ones against the numbers given
    ("SSHORT 6", with_segments(_exif(tiff_block([(0x0112, 8, 1, struct.pack(">h", 6))]))), 6),
    ("SSHORT -6", with_segments(_exif(tiff_block([(0x0112, 8, 1, struct.pack(">h", -6))]))), 1),
    ("SLONG 3 little-endian", with_segments(_exif(tiff_block([(0x0112, 9, 1, struct.pack("<i", 3))], "<"))), 3),
    ("SBYTE 8", with_segments(_exif(tiff_block([(0x0112, 6, 1, b"\x08")]))), 8),
    ("BYTE 6 (bytes: not turned)", with_segments(_exif(tiff_block([(0x0112, 1, 1, b"\x06")]))), 1),
    ("RATIONAL 12/2 by offset", with_segments(_exif(_by_offset(5, [(12, 2)]))), 6),
    ("RATIONAL 7/0", with_segments(_exif(_by_offset(5, [(7, 0)]))), 1),
    ("SRATIONAL -10/-2", with_segments(_exif(_by_offset(10, [(-10, -2)], "<"))), 5),
    ("FLOAT 8.0", with_segments(_exif(tiff_block([(0x0112, 11, 1, struct.pack(">f", 8.0))]))), 8),
    ("DOUBLE 2.0 by offset", with_segments(_exif(_by_offset(12, [2.0]))), 2),
    ("DOUBLE 2.5", with_segments(_exif(_by_offset(12, [2.5]))), 1),
    ("SHORTs by offset, first taken", with_segments(_exif(_by_offset(3, [7, 2, 3]))), 7),
    ("LONG8 by offset", with_segments(_exif(_by_offset(16, [4], "<"))), 4),
    ("IFD type", with_segments(_exif(tiff_block([(0x0112, 13, 1, struct.pack(">I", 5))]))), 5),
    ("offset past the end", with_segments(_exif(tiff_block([(0x0112, 3, 3, 4000)]))), 1),
    ("split over two APP1 segments", with_segments(*(lambda t: (_exif(t[:14]), _exif(t[14:])))(
        tiff_block([(0x010F, 2, 4, b"abc\x00"), (0x0112, 3, 1, struct.pack(">H", 3))]))), 3),
    ("value in the second segment", with_segments(*(lambda t: (_exif(t[:30]), _exif(t[30:])))(
        _by_offset(3, [8, 8, 8]))), 8),
    ("a doubled Exif prefix", with_segments(b"Exif\x00\x00" + _exif(tiff_block([(0x0112, 3, 1, b"\x00\x06")]))), 6),
    ("an unknown type first, then a SHORT", with_segments(_exif(tiff_block(
        [(0x0112, 99, 1, b"\x00\x02"), (0x0112, 3, 1, b"\x00\x06")]))), 6),
    ("a count 0 first, then a SHORT", with_segments(_exif(tiff_block(
        [(0x0112, 3, 0, b""), (0x0112, 3, 1, b"\x00\x04")]))), 4),
    ("two SHORTs: the first kept", with_segments(_exif(tiff_block(
        [(0x0112, 3, 1, b"\x00\x03"), (0x0112, 3, 1, b"\x00\x06")]))), 3),
    ("a tag read past the end stops the IFD", with_segments(_exif(tiff_block(
        [(0x010F, 2, 9, 4000), (0x0112, 3, 1, b"\x00\x06")]))), 1),
    ("header MM*\\0", with_segments(_exif(tiff_block([(0x0112, 3, 1, b"\x00\x06")], head=b"MM*\x00"))), 6),
    ("header II\\0*", with_segments(_exif(tiff_block([(0x0112, 3, 1, b"\x06\x00")], "<", head=b"II\x00*"))), 6),
    ("junk between segments", with_segments(b"http://ns.adobe.com/xap/1.0/\x00<x/>",
                                            _exif(tiff_block([(0x0112, 3, 1, b"\x00\x07")])), junk=b"\x00\x13"), 7),
]


@pytest.mark.parametrize(("what", "data", "turned"), TABLE, ids=[t[0] for t in TABLE])
def test_the_kinds_pillow_reads(what, data, turned):
    assert pillow_orientation(data) == turned, "the case is not what it says"
    assert jpeg_orientation(data) == turned


def _random_entry(rng: random.Random, endian: str, orientation: bool) -> tuple[int, int, list]:
    tag = 0x0112 if orientation else rng.choice([0x010F, 0x0110, 0x011A, 0x0128, 0x8769, rng.randrange(1 << 16)])
    kind = rng.choice([3] * 12 + [4, 4, 8, 9, 5, 10, 11, 12, 1, 2, 6, 7, 13, 16, 0, 14, 17])
    n = rng.choice([1] * 5 + [2, 3, 0])
    if kind in (5, 10):
        values = [(rng.choice([1, 2, 3, 6, 8, 9, -4]) * (d := rng.choice([1, 2, 3, 0])), d) for _ in range(n)]
        if kind == 5:
            values = [(abs(a), abs(b)) for a, b in values]
    elif kind in (11, 12):
        values = [rng.choice([2.0, 6.0, 8.0, 3.5, -1.0, float("nan")]) for _ in range(n)]
    elif kind in (6, 8, 9):
        values = [rng.choice([2, 5, 8, 6, -3, 0]) for _ in range(n)]
    else:
        values = [rng.choice([2, 3, 4, 5, 6, 7, 8] * 3 + [0, 1, 9, 255]) for _ in range(n)]
    return tag, kind, values


def random_jpeg(rng: random.Random) -> bytes:
    """A JPEG with a random EXIF: types, counts, values inline or by offset (some past the end),
    duplicate and other tags, either byte order, odd headers and IFD offsets, split over
    segments, other segments and junk between them."""
    endian = rng.choice("<>")
    entries, data = [], b""
    specs = [_random_entry(rng, endian, False) for _ in range(rng.randrange(3))]
    specs += [_random_entry(rng, endian, True) for _ in range(rng.choice([1, 1, 1, 2, 0]))]
    rng.shuffle(specs)
    pad = b"\x00" * rng.choice([0, 0, 4])
    ifd = 8 + len(pad)
    area = ifd + 2 + 12 * len(specs) + 4
    for tag, kind, values in specs:
        raw = value_bytes(kind, values, endian) if kind in PACK or kind in (2, 5, 7, 10) else b"\x00" * 4
        count = rng.choice([len(values)] * 12 + [len(values) + 1, 1 << 31])
        if len(raw) > 4:
            offset = rng.choice([area + len(data)] * 5 + [rng.randrange(0, area + len(data) + 16)])
            entries.append((tag, kind, count, offset))
            data += raw
        else:
            entries.append((tag, kind, count, raw))
    head = rng.choice([None] * 12 + [b"MM*\x00", b"II\x00*", b"MM\x00+", b"II+\x00", b"XX\x00*"])
    ifd = rng.choice([ifd] * 16 + [0, 4, 3000])
    claimed = rng.choice([None] * 16 + [len(entries) + 3, max(len(entries) - 1, 0)])
    tiff = tiff_block(entries, endian, head, ifd, claimed, pad) + data
    payload = rng.choice([b""] * 9 + [b"Exif\x00\x00"]) + tiff
    cuts = sorted(rng.sample(range(1, len(payload)), k=min(rng.choice([0, 0, 1, 2]), len(payload) - 1)))
    pieces = [_exif(payload[a:b]) for a, b in zip([0, *cuts], [*cuts, len(payload)])]
    others = [b"http://ns.adobe.com/xap/1.0/\x00<x/>", b"\xff\xe2\x00\x06ICC0", b"\xff\xff"]
    segments = b""
    for piece in pieces:
        extra = rng.choice([b""] * 6 + others)
        if extra.startswith(b"http"):
            segments += b"\xff\xe1" + struct.pack(">H", len(extra) + 2) + extra
        else:
            segments += extra
        segments += b"\xff\xe1" + struct.pack(">H", len(piece) + 2) + piece + rng.choice([b""] * 8 + [b"\x00\x17"])
    return BASE[:2] + segments + BASE[2:]


def fuzz_cases(n: int = 400, seed: int = 20261129) -> list[bytes]:
    rng = random.Random(seed)
    return [random_jpeg(rng) for _ in range(n)]


def test_fuzzed_exif_blocks_turn_as_pillow_turns_them():
    cases = fuzz_cases()
    read = turned = 0
    for k, data in enumerate(cases):
        want = pillow_orientation(data)
        got = jpeg_orientation(data)
        assert got in range(1, 9), k
        if want is None:
            continue
        assert got == want, (k, data[:200])
        assert jpeg_orientation(with_orientation(data, got)) == got, k  # what pack hands the transcoder
        read += 1
        turned += want != 1
    assert read > 300 and turned > 60, (read, turned)  # the fuzzer reaches both outcomes, often


def test_fuzzed_cases_decode_and_pack_as_exif_transpose_turns_them(tmp_path):
    """A sample of the cases: decode_jpeg(exif=True) gives exif_transpose's pixels, and a pack of
    them keeps each file's orientation (PackedDataset(exif=True) reads the same upright pixels)."""
    (tmp_path / "src" / "a").mkdir(parents=True)
    picked = []
    for k, data in enumerate(fuzz_cases()):
        if k % 5 or pillow_orientation(data) is None:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with Image.open(io.BytesIO(data)) as im:
                want = torch.from_numpy(np.array(ImageOps.exif_transpose(im).convert("RGB"))).permute(2, 0, 1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", fio.CorruptJpegWarning)  # the junk between segments
            assert torch.equal(fio.decode_jpeg(data, exif=True), want), k
        (tmp_path / "src" / "a" / f"{len(picked):03d}.jpg").write_bytes(data)
        picked.append((jpeg_orientation(data), want))
    assert len(picked) > 50
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # The junk between segments is corrupt data libjpeg recovers from (Pillow decodes it too):
        # strict=False packs and reads it as decoded, the orientation being what is tested here.
        fio.pack(tmp_path / "src", tmp_path / "p", progress=False, strict=False)
        packed = fio.PackedDataset(tmp_path / "p", exif=True, strict=False)
        for i, (orientation, want) in enumerate(picked):
            assert packed.record_image(i).orientation() == orientation, i
            assert torch.equal(packed.load_raw(i)[0].decode(), want), i
