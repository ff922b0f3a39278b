"""What a pack is a pack of: pack(B, dest) over a pack of A (finished, or interrupted) of the same
type and length is refused by name, in raw and jpeg modes, for folders and datasets that differ
in pixels, encoded bytes, labels or extras; overwrite=True repacks B and reads back B; a pack of
the same source resumes or returns; other options, lengths, types and older formats are named; a
shard swapped in from another pack is refused by the reader."""

import os
import re
import struct

import numpy as np
import pytest
import torch

import fastprep.io as fio
import fastprep.io._pack_format as fmt
from fastprep._jpeg import crc32c
from fastprep.tools.cli._commands import main

from helpers.jpeg_photos import needs_decoder, photo, photo_jpeg

pytestmark = [needs_decoder, pytest.mark.one_backend]

SHARD = 4096  # bytes (the least): a few records per shard, so an interrupted pack keeps some


class Items:
    """A map-style dataset of (image, label, *extras); item `stop_at` raises KeyboardInterrupt (a kill)."""

    def __init__(self, items, stop_at=None):
        self.items, self.stop_at = items, stop_at

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        if i == self.stop_at:
            raise KeyboardInterrupt
        return self.items[i]


def pixels(seed, n=7, side=28):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, (side, side + i, 3), dtype=np.uint8) for i in range(n)]


def jpegs(offset, n=7):
    return [photo_jpeg("coffee", "4:2:0", False, (64 + offset + i, 80)) for i in range(n)]


A_PIXELS, B_PIXELS = pixels(0), pixels(1)
LABELS = list(range(7))
# name, A's items, B's items (same type and length), mode, what the refusal names
DATASETS = [
    ("pixels, raw", [(p, 1) for p in A_PIXELS], [(p, 1) for p in B_PIXELS], "raw", "item 0"),
    ("pixels, encoded", [(p, 1) for p in A_PIXELS], [(p, 1) for p in B_PIXELS], "jpeg", "item 0"),
    ("jpeg bytes", [(j, 0) for j in jpegs(0)], [(j, 0) for j in jpegs(1)], "jpeg", "item 0"),
    ("jpeg bytes, raw", [(j, 0) for j in jpegs(0)], [(j, 0) for j in jpegs(1)], "raw", "item 0"),
    ("labels only", list(zip(A_PIXELS, LABELS)), list(zip(A_PIXELS, LABELS[1:] + [0])), "raw", "item 0"),
    ("extras only", [(p, 1, {"id": 0}) for p in A_PIXELS], [(p, 1, {"id": i}) for i, p in enumerate(A_PIXELS)],
     "jpeg", "item 1"),
    ("a tensor image", [(torch.from_numpy(p).permute(2, 0, 1), 1) for p in A_PIXELS],
     [(torch.from_numpy(p).permute(2, 0, 1), 1) for p in A_PIXELS[:3] + B_PIXELS[3:]], "raw", "item 3"),
]


def same_pack(got, want):
    a, b = fio.PackedDataset(got), fio.PackedDataset(want)
    assert len(a) == len(b) and a.targets == b.targets
    for i in range(len(a)):
        x, y = a[i], b[i]
        assert torch.equal(x[0], y[0]) and list(x[1:]) == list(y[1:]), i


def interrupt(dest):
    """What a kill leaves: no index, the last shard not written."""
    shards = sorted(n for n in os.listdir(dest) if n.endswith(".fpk"))
    assert len(shards) >= 2, shards
    os.remove(os.path.join(dest, fmt.INDEX_NAME))
    os.remove(os.path.join(dest, shards[-1]))


@pytest.mark.parametrize("finished", [True, False], ids=["finished", "interrupted"])
@pytest.mark.parametrize(("a", "b", "mode", "differs"), [c[1:] for c in DATASETS], ids=[c[0] for c in DATASETS])
def test_a_pack_of_another_dataset_is_refused_by_name(tmp_path, a, b, mode, differs, finished):
    opts = {"mode": mode, "progress": False, "shard_bytes": SHARD}
    fio.pack(Items(b), tmp_path / "clean", **opts)
    fio.pack(Items(a), tmp_path / "p", **opts)
    if not finished:
        interrupt(tmp_path / "p")
    before = sorted(os.listdir(tmp_path / "p"))
    with pytest.raises(fio.PackSourceError, match=rf"pack: .*p holds a pack of another source: {differs} \(of 7\) "
                                                  r"differs from the one packed: its image, label or extras .*; pass "
                                                  r"overwrite=True or choose another DEST"):
        fio.pack(Items(b), tmp_path / "p", **opts)
    assert sorted(os.listdir(tmp_path / "p")) == before  # nothing touched
    s = fio.pack(Items(b), tmp_path / "p", overwrite=True, **opts)
    assert s.resumed == 0 and s.records == 7
    same_pack(tmp_path / "p", tmp_path / "clean")


def test_a_dataset_interrupted_by_a_kill_resumes_only_for_itself(tmp_path):
    a, b = [(p, 1) for p in A_PIXELS], [(p, 1) for p in B_PIXELS]
    with pytest.raises(KeyboardInterrupt):
        fio.pack(Items(a, stop_at=5), tmp_path / "p", mode="raw", progress=False, shard_bytes=SHARD, threads=1)
    assert fmt.INDEX_NAME not in os.listdir(tmp_path / "p")
    with pytest.raises(fio.PackSourceError, match=r"item 0 \(of 7\) differs from the one packed: its image"):
        fio.pack(Items(b), tmp_path / "p", mode="raw", progress=False)
    s = fio.pack(Items(a), tmp_path / "p", mode="raw", progress=False, shard_bytes=SHARD)
    assert 0 < s.resumed < 7 and s.records == 7
    fio.pack(Items(a), tmp_path / "clean", mode="raw", progress=False, shard_bytes=SHARD)
    same_pack(tmp_path / "p", tmp_path / "clean")
    assert fio.pack(Items(a), tmp_path / "p", mode="raw", progress=False).resumed == 7  # finished: returned


def test_items_after_the_kept_shards_may_differ(tmp_path):
    """The kept shards are checked, not a promise about the rest: B equal to A up to the shards an
    interrupted pack of A kept resumes, and reads back B."""
    a = [(p, 1) for p in A_PIXELS]
    b = a[:6] + [(B_PIXELS[6], 1)]
    fio.pack(Items(a), tmp_path / "p", mode="raw", progress=False, shard_bytes=SHARD)
    with pytest.raises(fio.PackSourceError, match=r"item 6 \(of 7\)"):  # finished: item 6 was packed
        fio.pack(Items(b), tmp_path / "p", mode="raw", progress=False, shard_bytes=SHARD)
    interrupt(tmp_path / "p")  # the last shard, with item 6, is gone
    s = fio.pack(Items(b), tmp_path / "p", mode="raw", progress=False, shard_bytes=SHARD)
    assert 0 < s.resumed <= 6
    fio.pack(Items(b), tmp_path / "clean", mode="raw", progress=False, shard_bytes=SHARD)
    same_pack(tmp_path / "p", tmp_path / "clean")


def folder_of(root, offset):
    for i in range(6):
        (root / f"k{i % 2}").mkdir(parents=True, exist_ok=True)
        (root / f"k{i % 2}" / f"{i}.jpg").write_bytes(photo_jpeg("chelsea", "4:2:0", False, (60 + offset + i, 80)))
    return root


@pytest.mark.parametrize("mode", ["jpeg", "raw"])
@pytest.mark.parametrize("finished", [True, False], ids=["finished", "interrupted"])
def test_a_pack_of_another_folder_is_refused_by_name(tmp_path, mode, finished):
    a, b = folder_of(tmp_path / "a", 0), folder_of(tmp_path / "b", 1)
    opts = {"mode": mode, "progress": False, "shard_bytes": SHARD}
    fio.pack(a, tmp_path / "p", **opts)
    if not finished:
        interrupt(tmp_path / "p")
    with pytest.raises(fio.PackSourceError, match=r"holds a pack of another source: item 0 \(of 6, 'k0/0.jpg'\) "
                                                  r"differs from the one packed: its name, size or modification time"):
        fio.pack(b, tmp_path / "p", **opts)
    fio.pack(b, tmp_path / "p", overwrite=True, **opts)
    fio.pack(b, tmp_path / "clean", **opts)
    same_pack(tmp_path / "p", tmp_path / "clean")


def test_a_folder_changed_after_its_kept_shards_is_refused(tmp_path):
    a = folder_of(tmp_path / "a", 0)
    fio.pack(a, tmp_path / "p", progress=False, shard_bytes=SHARD)
    interrupt(tmp_path / "p")
    (a / "k1" / "5.jpg").write_bytes(photo_jpeg("rocket", "4:2:0", False, (30, 40)))
    with pytest.raises(fio.PackSourceError, match=r"the folder's files changed since it was begun \(the \d items "
                                                  r"packed are the same; one after them was added, removed"):
        fio.pack(a, tmp_path / "p", progress=False, shard_bytes=SHARD)


OTHER = [
    ("mode", {"mode": "jpeg"}, r"other options \(mode 'raw' -> 'jpeg'\)"),
    ("quality", {"quality": 80}, r"other options \(quality 90 -> 80\)"),
    ("max_side", {"max_side": 10}, r"other options \(max_side None -> 10\)"),
    ("restart", {"restart": 2}, r"other options \(restart 4 -> 2\)"),
    ("length", {"src": Items([(p, 1) for p in A_PIXELS[:6]])},
     r"it packed a dataset test_pack_identity.Items of 7 items, this is a dataset test_pack_identity.Items of 6"),
    ("type", {"src": [(p, 1) for p in A_PIXELS]}, r"it packed a dataset test_pack_identity.Items of 7 items, this "
                                                  r"is a dataset builtins.list of 7 items"),
]


@pytest.mark.parametrize(("change", "match"), [c[1:] for c in OTHER], ids=[c[0] for c in OTHER])
def test_other_options_lengths_and_types_are_named(tmp_path, change, match):
    src = Items([(p, 1) for p in A_PIXELS])
    fio.pack(src, tmp_path / "p", mode="raw", progress=False)
    kw = {"src": src, "mode": "raw", **change}
    with pytest.raises(fio.PackSourceError, match=r"holds a pack of another source: " + match):
        fio.pack(kw.pop("src"), tmp_path / "p", progress=False, **kw)


def test_a_pack_of_format_1_is_refused_and_still_read(tmp_path):
    src = Items([(p, 1) for p in A_PIXELS])
    fio.pack(src, tmp_path / "p", mode="raw", progress=False)
    before = fio.PackedDataset(tmp_path / "p")[3][0]
    for name in os.listdir(tmp_path / "p"):  # an older fastprep's headers (the JSON additions are ignored)
        path = tmp_path / "p" / name
        data = bytearray(path.read_bytes())
        struct.pack_into("<I", data, 8, 1)
        struct.pack_into("<I", data, 60, crc32c(bytes(data[:60])))
        path.write_bytes(bytes(data))
    assert torch.equal(fio.PackedDataset(tmp_path / "p")[3][0], before)
    with pytest.raises(fio.PackSourceError, match=r"written by an older fastprep \(pack format 1\)"):
        fio.pack(src, tmp_path / "p", mode="raw", progress=False)


def test_overwrite_deletes_only_the_packs_files_and_the_cli_has_it(tmp_path, capsys):
    a, b = folder_of(tmp_path / "a", 0), folder_of(tmp_path / "b", 1)
    fio.pack(a, tmp_path / "p", progress=False)
    (tmp_path / "p" / "notes.txt").write_text("mine")
    assert main(["pack", str(b), str(tmp_path / "p"), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert re.fullmatch(r"python -m fastprep pack: error: .*p holds a pack of another source: item 0 .*; pass "
                        r"--overwrite or choose another DEST\n", err), err
    assert main(["pack", str(b), str(tmp_path / "p"), "--no-progress", "--overwrite"]) == 0
    fio.pack(b, tmp_path / "clean", progress=False)
    same_pack(tmp_path / "p", tmp_path / "clean")
    assert (tmp_path / "p" / "notes.txt").read_text() == "mine"


SWAPS = [  # B's shard swapped into A's pack: same type, length, options, shard size
    ("first items equal", 10, r"shard-00000.fpk is shard 0 of another pack"),
    ("first items differ", 20, r"shard-00000.fpk is shard 0 of another pack"),
    ("A's header kept", 10, r"shard-00000.fpk record 1 .*checksum mismatch in the record's header"),
]


@pytest.mark.parametrize(("b_first", "match"), [c[1:] for c in SWAPS], ids=[c[0] for c in SWAPS])
def test_a_shard_swapped_in_from_another_pack_is_refused(tmp_path, b_first, match, request):
    """A finished pack's id covers every item and record (format 3; format 2's covered only the
    first item): packs differing anywhere refuse each other's shards when opened. Under A's own
    header, a record's checksum covers its pixels, so the reader refuses the other pack's records
    (raw ones were accepted before: only their meta block was covered)."""
    def items(first, rest):
        return Items([(np.full((20, 20, 3), v, np.uint8), 1) for v in (first, rest, rest)])

    fio.pack(items(10, 100), tmp_path / "a", mode="raw", progress=False)  # (a JPEG record's always covered them)
    fio.pack(items(b_first, 200), tmp_path / "b", mode="raw", progress=False)
    a, b = tmp_path / "a" / "shard-00000.fpk", tmp_path / "b" / "shard-00000.fpk"
    assert a.stat().st_size == b.stat().st_size
    own_header = "header" in request.node.name  # A's header kept: only the records are B's
    a.write_bytes(a.read_bytes()[:fmt.HEADER_BYTES] + b.read_bytes()[fmt.HEADER_BYTES:] if own_header else
                  b.read_bytes())
    for verify in (True, False):
        ds = fio.PackedDataset(tmp_path / "a", verify=verify)
        with pytest.raises(fio.ShardFormatError, match=match):
            for i in range(len(ds)):
                ds[i]
    with pytest.raises(fio.ShardFormatError, match=r"checksum mismatch|is shard 0 of another pack"):
        fio.PackedDataset(tmp_path / "a").verify_records()


def test_version_1_raw_records_still_read_and_a_bad_band_table_is_found():
    from fastprep import _jpeg

    pix = photo("coffee")[:30, :150].copy()
    rec, checksum = _jpeg.raw_record(pix)
    rec = bytearray(rec)
    out = np.empty((3, 30, 150), np.uint8)
    _jpeg.read_raw_into(bytes(rec), checksum, out, 0, 0, True)
    assert np.array_equal(out.transpose(1, 2, 0), pix)
    old = bytearray(rec)  # version 1: no band table CRC, its checksum over the meta block
    struct.pack_into("<H", old, 4, 1)
    struct.pack_into("<I", old, 40, 0)
    old_sum = crc32c(bytes(old[:64]))
    _jpeg.verify_record(bytes(old), old_sum)
    _jpeg.read_raw_into(bytes(old), old_sum, out, 0, 0, True)
    assert np.array_equal(out.transpose(1, 2, 0), pix)
    rec[64] ^= 1  # a band CRC (a whole-record check finds the table's CRC wrong)
    with pytest.raises(ValueError, match=r"checksum mismatch in the record's band CRC table"):
        _jpeg.verify_record(bytes(rec), checksum)
