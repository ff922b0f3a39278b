"""pack's errors name the thing, one type per class: a dataset item that raises or is malformed is
a PackSourceError naming the item (the original as __cause__); a destination that cannot be
written is a PackWriteError whose advice fits its errno (room only for ENOSPC/EDQUOT); a DEST that
is a file, holds another pack or is locked says so, never "make room"; and pack never reports
success for a pack whose index disagrees with its shards."""

import errno
import os

import numpy as np
import pytest
import torch

import fastprep.io as fio
import fastprep.io._pack_format as fmt
from fastprep.io.packed._lock import pack_lock
from fastprep.io.packed._writer import ShardWriter

from helpers.jpeg_photos import needs_decoder

pytestmark = [needs_decoder, pytest.mark.one_backend]

PIX = np.zeros((8, 8, 3), np.uint8)


class Faulty:
    """Ten good items but item 3, which is `bad` (an exception is raised, anything else returned)."""

    def __init__(self, bad):
        self.bad = bad

    def __len__(self):
        return 10

    def __getitem__(self, i):
        if i != 3:
            return PIX, 0
        if isinstance(self.bad, BaseException):
            raise self.bad
        return self.bad


ITEMS = [
    ("KeyError", KeyError("no such key"), r"pack: item 3 \(of 10\): KeyError: 'no such key' \(on_error='skip' leaves such items out of the pack\)$"),
    ("ZeroDivisionError", ZeroDivisionError("division by zero"), r"item 3 \(of 10\): ZeroDivisionError: division by"),
    ("an OSError of the source", OSError(errno.EIO, "Input/output error"), r"item 3 \(of 10\): OSError: \[Errno 5\]"),
    ("not a tuple", 7, r"item 3 \(of 10\): expected \(image, label, ...\), got a int"),
    ("one field", (PIX,), r"item 3 \(of 10\): expected \(image, label, ...\), got a tuple"),
    ("label 2**70", (PIX, 2**70), r"item 3 \(of 10\): label 1180591620717411303424 does not fit the index's int64"),
    ("label -2**63 - 1", (PIX, -2**63 - 1), r"item 3 \(of 10\): label -9223372036854775809 does not fit"),
    ("a float label", (PIX, 1.5), r"item 3 \(of 10\): expected an int label \(the item's second field\), got 1.5"),
    ("a str label", (PIX, "cat"), r"item 3 \(of 10\): expected an int label .* got 'cat'"),
    ("a None label", (PIX, None), r"item 3 \(of 10\): expected an int label .* got None"),
    ("a float tensor label", (PIX, torch.tensor(1.0)), r"item 3 \(of 10\): expected an int label .* tensor\(1.\)"),
    ("a bool label", (PIX, True), r"item 3 \(of 10\): expected an int label .* got True"),
    ("extras not JSON", (PIX, 0, {1, 2}), r"item 3 \(of 10\): the fields after the label must be JSON values"),
    ("an image of floats", (PIX.astype(np.float32), 0), r"item 3 \(of 10\): expected an image as JPEG/PNG bytes"),
    ("an image of the wrong type", ([1, 2], 0), r"item 3 \(of 10\): expected an image as .* got list"),
]


@pytest.mark.parametrize(("bad", "match"), [c[1:] for c in ITEMS], ids=[c[0] for c in ITEMS])
def test_a_bad_dataset_item_is_named(tmp_path, bad, match):
    with pytest.raises(fio.PackSourceError, match=match) as info:
        fio.pack(Faulty(bad), tmp_path / "p", mode="raw", progress=False, threads=2)
    assert isinstance(info.value, ValueError)
    if isinstance(bad, BaseException):
        assert info.value.__cause__ is bad
    assert not any(n.endswith(".tmp") for n in os.listdir(tmp_path / "p"))


ROOM, WRITABLE, FIXED = "make room and run pack again", "make it writable and run pack again", "once that is fixed"
WRITES = [
    ("ENOSPC", errno.ENOSPC, ROOM), ("EDQUOT", errno.EDQUOT, ROOM), ("EROFS", errno.EROFS, WRITABLE),
    ("EACCES", errno.EACCES, WRITABLE), ("EPERM", errno.EPERM, WRITABLE), ("EIO", errno.EIO, FIXED),
    ("EFBIG", errno.EFBIG, FIXED),
]


@pytest.mark.parametrize(("code", "advice"), [c[1:] for c in WRITES], ids=[c[0] for c in WRITES])
def test_write_errors_give_the_advice_of_their_errno(tmp_path, monkeypatch, code, advice):
    add, calls = ShardWriter.add, []

    def failing(self, *a):
        calls.append(1)
        if len(calls) >= 5:
            raise OSError(code, os.strerror(code), self.tmp)
        add(self, *a)

    monkeypatch.setattr(ShardWriter, "add", failing)
    items = [(np.full((40, 40, 3), i, np.uint8), i) for i in range(8)]
    with pytest.raises(fio.PackWriteError) as info:
        fio.pack(items, tmp_path / "p", mode="raw", progress=False, shard_bytes=1 << 12, threads=1)
    text = str(info.value)
    assert info.value.errno == code and "shard-0000" in text and os.strerror(code) in text, text
    assert advice in text and (advice == ROOM) == ("make room" in text), text
    assert "[Errno None]" not in text


def _a_file(dest):
    dest.write_text("x")


def _another_pack(dest):
    fio.pack([(PIX + 1, 0)] * 3, dest, mode="raw", progress=False)


def _locked(dest):
    dest.mkdir()
    lock = pack_lock(str(dest))
    lock.__enter__()
    return lock


def _under_a_file(dest):
    dest.parent.joinpath("file").write_text("x")
    return dest.parent / "file" / "p"


def _a_folder_named_as_a_shard(dest):
    (dest / "shard-00000.fpk").mkdir(parents=True)


DESTS = [
    ("DEST is a file", _a_file, fio.PackWriteError, r"pack: DEST '.*p' is a file, not a folder: choose another DEST"),
    ("another pack", _another_pack, fio.PackSourceError, r"holds a pack of another source: item 0 \(of 3\)"),
    ("locked", _locked, fio.PackLockedError, r"p is being written by another pack \(pid \d+ on "),
    ("under a file", _under_a_file, fio.PackWriteError, r"cannot write .*file/p: Not a directory.* once that is fixed"),
    ("a folder named as a shard", _a_folder_named_as_a_shard, fio.PackSourceError,  # never written over
     r"shard-00000.fpk' is not a file fastprep's pack wrote .*move it away or choose another DEST"),
]


@pytest.mark.parametrize(("make", "error", "match"), [c[1:] for c in DESTS], ids=[c[0] for c in DESTS])
def test_a_dest_that_cannot_be_used_says_why_and_not_make_room(tmp_path, make, error, match):
    dest = tmp_path / "p"
    made = make(dest)
    if isinstance(made, os.PathLike):
        dest = made
    try:
        with pytest.raises(error, match=match) as info:
            fio.pack([(PIX, 0)] * 3, dest, mode="raw", progress=False)
    finally:
        if hasattr(made, "__exit__"):
            made.__exit__(None, None, None)
    assert "make room" not in str(info.value) and "[Errno None]" not in str(info.value)


def _wrong_checksum(entries, meta):
    entries["checksum"][1] ^= 1


def _wrong_size(entries, meta):
    meta["shards"][0][1] += 64


def _wrong_digest(entries, meta):
    meta["digests"][0] = "0" * 32


def _a_record_dropped(entries, meta):
    meta["shards"][0][2] -= 1


BAD_INDEXES = [
    ("a record's checksum", _wrong_checksum, r"shard-00000.fpk does not hold the records the index just written"),
    ("a shard's size", _wrong_size, r"shard-00000.fpk is \d+ bytes where the index just written says"),
    ("a shard's digest", _wrong_digest, r"shard-00000.fpk does not hold the records"),
    ("a shard's count", _a_record_dropped, r"does not hold the records|lists 3 records, its shards 2"),
]


@pytest.mark.parametrize(("edit", "match"), [c[1:] for c in BAD_INDEXES], ids=[c[0] for c in BAD_INDEXES])
def test_an_index_that_disagrees_with_its_shards_is_never_reported_a_success(tmp_path, monkeypatch, edit, match):
    index_bytes = fmt.index_bytes

    def wrong(entries, pack_id, meta, names):
        entries = entries.copy()
        edit(entries, meta)
        return index_bytes(entries, pack_id, meta, names)

    monkeypatch.setattr(fmt, "index_bytes", wrong)
    with pytest.raises(fio.ShardFormatError, match=match):
        fio.pack([(PIX + i, i) for i in range(3)], tmp_path / "p", mode="raw", progress=False)
