"""Packed shards on bad input: corrupt or truncated indexes and shards, newer format versions,
failing checksums, huge declared sizes, records whose JPEG is not what a window cut can read
(a restart interval that does not divide the row, progressive, arithmetic, 5 components, 12-bit): a clear
error naming the shard and record, never a crash, never a wrong image. Random mutations of a
shard run in a child process."""

import os
import shutil
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import fastprep.io as fio
import fastprep.io._pack_format as fmt

from helpers.jpeg_photos import child_outcomes, needs_decoder, photo_jpeg

pytestmark = [needs_decoder, pytest.mark.one_backend]
_jpeg = fio.jpeg._jpeg  # the native module (None when not built: every test skips)


@pytest.fixture(scope="module")
def pack_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("src")
    (root / "k").mkdir()
    (root / "k" / "a.jpg").write_bytes(photo_jpeg("coffee", "4:2:0", False, (301, 333)))
    (root / "k" / "b.jpg").write_bytes(photo_jpeg("chelsea", "4:4:4", True, (120, 150)))
    out = tmp_path_factory.mktemp("pack") / "p"
    fio.pack(root, out, progress=False)
    fio.pack(root, out.parent / "raw", mode="raw", progress=False)
    return out


def damaged(pack_dir, tmp_path, name="p"):
    dst = tmp_path / name
    shutil.copytree(pack_dir if name == "p" else pack_dir.parent / name, dst)
    return dst


# -- the index ---------------------------------------------------------------------------------


def reseal_index(path, entries_edit=None, version=None):
    """Rewrite an index with its entries edited (and valid checksums), or another format version."""
    data = bytearray(path.read_bytes())
    count = struct.unpack_from("<I", data, 12)[0]
    table_at, json_at, json_len = struct.unpack_from("<QQQ", data, 32)
    entries = np.frombuffer(bytes(data[table_at:json_at]), fmt.ENTRY).copy()
    if entries_edit:
        entries_edit(entries)
    data[table_at:json_at] = entries.tobytes()
    struct.pack_into("<I", data, 56, _jpeg.crc32c(bytes(data[table_at:json_at + json_len])))
    if version is not None:
        struct.pack_into("<I", data, 8, version)
    struct.pack_into("<I", data, 60, _jpeg.crc32c(bytes(data[:60])))
    assert count == len(entries)
    path.write_bytes(bytes(data))


def flip(path, offset):
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x40
    path.write_bytes(bytes(data))


def _set(field, value):
    def edit(e):
        e[field][0] = value
    return edit


BAD_INDEXES = [
    ("truncated", lambda p: p.write_bytes(p.read_bytes()[:100]), r"index.fpi: 2 records .* do not fit the 100-byte"),
    ("shorter than a header", lambda p: p.write_bytes(p.read_bytes()[:40]), r"40 bytes, shorter than its 64-byte"),
    ("not an index", lambda p: p.write_bytes(b"x" * 200), r"does not start with b'FPINDEX\\x00'"),
    ("a flipped table byte", lambda p: flip(p, 70), r"index.fpi: checksum mismatch: the index is corrupt"),
    ("a flipped header byte", lambda p: flip(p, 20), r"index.fpi: header checksum mismatch: the file is corrupt"),
    ("a newer version", lambda p: reseal_index(p, version=4),
     r"index.fpi: format version 4 is newer than this fastprep reads \(3\): upgrade fastprep"),
    ("a huge offset", lambda p: reseal_index(p, _set("offset", 2**63)),
     r"record 0 \(shard 0, offset 9223372036854775808, \d+ bytes, kind 1\) is not inside the pack's shards"),
    ("a huge length", lambda p: reseal_index(p, _set("length", 2**64 - 1)), r"record 0 .* is not inside the pack's"),
    ("a missing shard", lambda p: reseal_index(p, _set("shard", 7)), r"record 0 \(shard 7, .* is not inside"),
    ("an unknown kind", lambda p: reseal_index(p, _set("kind", 9)), r"record 0 .* kind 9\) is not inside"),
]


@pytest.mark.parametrize(("edit", "match"), [c[1:] for c in BAD_INDEXES], ids=[c[0] for c in BAD_INDEXES])
def test_a_bad_index_is_refused_when_opened(pack_dir, tmp_path, edit, match):
    p = damaged(pack_dir, tmp_path)
    edit(p / "index.fpi")
    with pytest.raises(fio.ShardFormatError, match=match):
        fio.PackedDataset(p)


# -- shards ------------------------------------------------------------------------------------


def _record_at(ds, i):
    e = ds._entries[i]
    return int(e["offset"]), int(e["length"])


def test_a_truncated_or_replaced_shard_names_the_file(pack_dir, tmp_path):
    p = damaged(pack_dir, tmp_path)
    shard = p / "shard-00000.fpk"
    shard.write_bytes(shard.read_bytes()[:-10])
    ds = fio.PackedDataset(p)
    with pytest.raises(fio.ShardFormatError, match=r"shard-00000.fpk is \d+ bytes where the index says \d+: truncated"):
        ds.load_raw(0)
    flip(shard, 10)
    shard.write_bytes(shard.read_bytes() + bytes(10))
    with pytest.raises(fio.ShardFormatError, match=r"shard-00000.fpk: header checksum mismatch"):
        fio.PackedDataset(p)[0]


def test_a_corrupt_row_fails_the_windows_that_read_it_and_no_other(pack_dir, tmp_path):
    p = damaged(pack_dir, tmp_path)
    good = fio.PackedDataset(pack_dir)
    offset, length = _record_at(good, 0)
    info = _jpeg.record_info(good.record(0), int(good._entries["checksum"][0]))
    record = bytes(good.record(0))
    jpeg_at = struct.unpack_from("<I", record, 8)[0]
    row10 = struct.unpack_from("<I", record, 64 + 4 * 10)[0]
    flip(p / "shard-00000.fpk", offset + jpeg_at + row10 + 5)  # a byte of MCU row 10 (pixel rows 160-175)
    image = fio.PackedDataset(p).load_raw(0)[0]
    assert info["mcu"] == (16, 16)
    with pytest.raises(fio.ShardFormatError, match=r"PackedJpeg.decode: .*shard-00000.fpk record 0 \(k/a.jpg\): "
                                                   r"checksum mismatch in MCU row 10: the shard is corrupt"):
        image.decode((150, 0, 20, 20))
    with pytest.raises(fio.ShardFormatError, match=r"checksum mismatch in MCU row 10"):
        image.decode()
    with pytest.raises(fio.ShardFormatError, match=r"PackedJpeg.cut: .*record 0 .*MCU row 10"):
        image.cut((150, 0, 20, 20))
    assert torch.equal(image.decode((0, 0, 100, 333)), good.load_raw(0)[0].decode((0, 0, 100, 333)))  # rows 0-6
    with pytest.raises(fio.ShardFormatError, match=r"record 0 .* MCU row 10"):
        fio.PackedDataset(p).verify_records()


@pytest.mark.parametrize(("where", "match"), [
    (lambda rec: 3, r"record 1 \(k/b.jpg\): record does not start with FPRJ"),
    (lambda rec: 70, r"checksum mismatch in the record's header and restart index"),
    (lambda rec: struct.unpack_from("<I", rec, 8)[0] + 30, r"checksum mismatch in the JPEG header"),
])
def test_corrupt_record_headers_name_the_record(pack_dir, tmp_path, where, match):
    p = damaged(pack_dir, tmp_path)
    good = fio.PackedDataset(pack_dir)
    offset, _ = _record_at(good, 1)
    flip(p / "shard-00000.fpk", offset + where(bytes(good.record(1))))
    with pytest.raises(fio.ShardFormatError, match=match):
        fio.PackedDataset(p).load_raw(1)[0].decode((0, 0, 8, 8))


def test_a_corrupt_raw_band_fails_the_windows_that_read_it(pack_dir, tmp_path):
    p = damaged(pack_dir, tmp_path, "raw")
    good = fio.PackedDataset(p)
    offset, _ = _record_at(good, 0)
    pixels_at = struct.unpack_from("<Q", bytes(good.record(0)), 24)[0]
    flip(p / "shard-00000.fpk", offset + pixels_at + 200 * 333 * 3 + 70 * 3)  # row 200, band 1
    image = fio.PackedDataset(p).load_raw(0)[0]
    with pytest.raises(fio.ShardFormatError, match=r"PackedRaw.decode: .*record 0 \(k/a.jpg\): checksum mismatch in "
                                                   r"pixel row 200, band 1"):
        image.decode((190, 60, 20, 20))
    assert image.decode((190, 0, 20, 64)).shape == (3, 20, 64)  # band 0 only
    unchecked = fio.PackedDataset(p, verify=False).load_raw(0)[0].decode((190, 60, 20, 20))  # the opt-out's risk
    assert not torch.equal(unchecked, fio.PackedDataset(pack_dir.parent / "raw").load_raw(0)[0].decode((190, 60, 20, 20)))


# -- records whose JPEG a cut cannot read (crafted, with valid checksums) -------------------------


def record_of(data):
    rec, checksum, info, _ = _jpeg.transcode_record(data, 4, True)
    return bytearray(rec), info


def reseal_record(rec):
    """Valid checksums for an edited JPEG record: its JPEG header's CRC, then the record's."""
    jpeg_at = struct.unpack_from("<I", rec, 8)[0]
    sos = rec.index(b"\xff\xda", jpeg_at)
    scan = sos + 2 + struct.unpack_from(">H", rec, sos + 2)[0] - jpeg_at
    struct.pack_into("<I", rec, 32, _jpeg.crc32c(bytes(rec[jpeg_at:jpeg_at + scan])))
    rows, n = struct.unpack_from("<II", rec, 24)
    return bytes(rec), _jpeg.crc32c(bytes(rec[:64 + 8 * rows + 2 * n]))


def _patch_jpeg(marker, offset, value):
    def patch(rec):
        at = rec.index(marker, struct.unpack_from("<I", rec, 8)[0])
        rec[at + offset:at + offset + len(value)] = value
    return patch


BAD_RECORDS = [
    ("restart not dividing the row", _patch_jpeg(b"\xff\xdd", 4, b"\x00\x04"),
     r"restart interval of 4 MCUs does not divide the 21 MCUs of a row"),
    ("no restart interval", _patch_jpeg(b"\xff\xdd", 4, b"\x00\x00"), r"no restart interval \(DRI\)"),
    ("progressive", _patch_jpeg(b"\xff\xc0", 1, b"\xc2"), r"frame type SOF 0xFFC2 \(progressive\)"),
    ("arithmetic", _patch_jpeg(b"\xff\xc0", 1, b"\xc9"), r"frame type SOF 0xFFC9 \(arithmetic-coded\)"),
    ("12-bit", _patch_jpeg(b"\xff\xc0", 4, b"\x0c"), r"12-bit samples \(only 8-bit JPEGs are read\)"),
    ("5 components", _patch_jpeg(b"\xff\xc0", 9, b"\x05"), r"5 components \(1, 3 or 4 are read\)"),
    ("a segment past the end", _patch_jpeg(b"\xff\xc4", 2, b"\xff\xff"), r"segment 0xFFC4 at byte \d+ claims 65535"),
    ("a size that disagrees", _patch_jpeg(b"\xff\xc0", 5, b"\x00\x10"), r"header disagrees with the record"),
    ("huge row count", lambda rec: struct.pack_into("<I", rec, 24, 2**32 - 1), r"record header is corrupt"),
    ("JPEG outside the record", lambda rec: struct.pack_into("<I", rec, 12, 2**32 - 1), r"is not inside its"),
    ("a newer version", lambda rec: struct.pack_into("<H", rec, 4, 3),
     r"record format version 3 is newer than this fastprep reads \(2\): upgrade fastprep"),
    ("interval lengths off", lambda rec: struct.pack_into("<H", rec, 64 + 8 * 19 + 2, 7),
     r"restart interval 1 does not end in its RST marker"),
]


@pytest.mark.parametrize(("edit", "match"), [c[1:] for c in BAD_RECORDS], ids=[c[0] for c in BAD_RECORDS])
def test_records_a_cut_cannot_read_are_refused_with_the_reason(edit, match):
    rec, info = record_of(photo_jpeg("coffee", "4:2:0", False, (301, 333)))
    assert (info["mcus_per_row"], info["restart"], info["mcu_rows"]) == (21, 3, 19)
    edit(rec)
    data, checksum = reseal_record(rec)
    out = np.empty((3, 16, 16), np.uint8)
    for call in (lambda: _jpeg.decode_record_into(data, checksum, out, 0, 0, "RGB", False),
                 lambda: _jpeg.cut_record(data, checksum, 0, 0, 16, 16), lambda: _jpeg.verify_record(data, checksum)):
        with pytest.raises(ValueError, match=match):
            call()


def test_raw_records_with_huge_sizes_are_refused():
    rec, checksum = _jpeg.raw_record(np.zeros((4, 5, 3), np.uint8))
    rec = bytearray(rec)
    struct.pack_into("<II", rec, 8, 2**32 - 1, 2**32 - 1)
    with pytest.raises(ValueError, match=r"raw record's tables or pixels are not inside its \d+ bytes"):
        _jpeg.read_raw_into(bytes(rec), _jpeg.crc32c(bytes(rec[:64])), np.empty((3, 1, 1), np.uint8), 0, 0)
    with pytest.raises(ValueError, match=r"checksum mismatch in the record's header"):
        _jpeg.read_raw_into(bytes(rec), checksum, np.empty((3, 1, 1), np.uint8), 0, 0)
    with pytest.raises(ValueError, match=r"pixels: expected uint8 \[height, width, 1 or 3\] with contiguous rows"):
        _jpeg.raw_record(np.zeros((4, 5, 2), np.uint8))


def test_the_crc_is_the_same_on_every_isa_level():
    """Shards written where the crc32 instruction runs are read where the tables run, and back."""
    sizes = (0, 1, 7, 8, 9, 63, 64, 65, 1000, 1 << 16)
    code = ("import numpy as np; from fastprep import _jpeg; rng = np.random.default_rng(3); "
            f"print([_jpeg.crc32c(rng.integers(0, 256, n, dtype=np.uint8).tobytes()) for n in {sizes}])")
    base = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "FASTPREP_ISA": "x86-64"})
    assert base.returncode == 0, base.stderr[-2000:]
    rng = np.random.default_rng(3)
    assert base.stdout.strip() == str([_jpeg.crc32c(rng.integers(0, 256, n, dtype=np.uint8).tobytes()) for n in sizes])
    assert _jpeg.crc32c(b"123456789") == 0xE3069283  # CRC-32C's check value


def test_windows_outside_the_image_name_the_window(pack_dir):
    image = fio.PackedDataset(pack_dir).load_raw(0)[0]
    with pytest.raises(ValueError, match=r"PackedJpeg.decode: crop \(top=290, left=0, height=12, width=5\) is not "
                                         r"inside the 301x333 image"):
        image.decode((290, 0, 12, 5))
    record, checksum = image.record, image.checksum
    with pytest.raises(ValueError, match=r"crop \(top=9223372036854775804, left=0, height=4, width=4\) is not inside"):
        _jpeg.cut_record(record, checksum, 2**63 - 4, 0, 4, 4)


def test_mutated_shards_never_crash_or_give_a_wrong_image(pack_dir, tmp_path):
    """Flipped bytes anywhere in a shard, in a child process: every window read gives the intact
    pack's bits or raises ShardFormatError."""
    code = textwrap.dedent(f"""
        import random, shutil, sys, torch
        import fastprep.io as fio
        src, work = {str(pack_dir)!r}, {str(tmp_path / "m")!r}
        good = fio.PackedDataset(src)
        rng = random.Random(7)
        size = len(open(src + "/shard-00000.fpk", "rb").read())
        outcomes = {{"same": 0, "error": 0}}
        for k in range(60):
            shutil.rmtree(work, ignore_errors=True)
            shutil.copytree(src, work)
            data = bytearray(open(work + "/shard-00000.fpk", "rb").read())
            for _ in range(rng.randint(1, 4)):
                data[rng.randrange(64, size - 64)] ^= 1 << rng.randrange(8)
            open(work + "/shard-00000.fpk", "wb").write(bytes(data))
            ds = fio.PackedDataset(work)
            for i in range(len(ds)):
                img = good.load_raw(i)[0]
                for _ in range(4):
                    h, w = rng.randint(1, img.height), rng.randint(1, img.width)
                    crop = (rng.randint(0, img.height - h), rng.randint(0, img.width - w), h, w)
                    try:
                        got = ds.load_raw(i)[0].decode(crop)
                    except fio.ShardFormatError:
                        outcomes["error"] += 1
                        continue
                    assert torch.equal(got, img.decode(crop)), (k, i, crop)
                    outcomes["same"] += 1
        print(outcomes["same"], outcomes["error"])
    """)
    same, errors = child_outcomes(code)
    assert same > 50 and errors > 50  # both outcomes were exercised
