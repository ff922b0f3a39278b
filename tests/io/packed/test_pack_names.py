"""Names are bytes: file names that are not UTF-8, and UTF-8 ones with newlines, tabs, spaces,
other scripts or 250 bytes, pack (and resume) and come back the same through PackedDataset.where,
its skipped list and the summary; printed (the warning, the command line) they are escaped."""

import io
import os
import re
import warnings

import numpy as np
import pytest

import fastprep.io as fio
from fastprep.errors import BadSampleWarning
from fastprep.io._pack_format import shown
from fastprep.tools.cli._pack_command import print_summary

from helpers.jpeg_photos import needs_decoder, photo_jpeg

pytestmark = [needs_decoder, pytest.mark.one_backend,
              pytest.mark.skipif(os.name != "posix", reason="names as bytes: POSIX file systems")]

NAMES = [b"caf\xe9.jpg", b"new\nline.jpg", b"tab\there.jpg", b"sp ace .jpg", "ünïcødé 写真.jpg".encode(),
         b"x" * 246 + b".jpg", b"\xff\xfe\\back.jpg", b"-dash.jpg"]
UNREADABLE = [b"bad\xff\n.png", b"\xc3(.png"]  # not images: skipped, named


@pytest.fixture(scope="module")
def odd_folder(tmp_path_factory):
    root = os.fsencode(tmp_path_factory.mktemp("odd"))
    for k, cls in enumerate([b"k\xe9", b"plain"]):
        os.makedirs(os.path.join(root, cls))
        for i, name in enumerate(NAMES):
            with open(os.path.join(root, cls, name), "wb") as f:
                f.write(photo_jpeg("coffee", "4:2:0", False, (40 + i + k, 48)))
        for name in UNREADABLE:
            with open(os.path.join(root, cls, name), "wb") as f:
                f.write(b"\x89PNG\r\n\x1a\n" + bytes(5))
    return os.fsdecode(root)


def relpaths(root):
    return [os.path.relpath(p, root) for p, _ in fio.ImageFolder(root).samples]


def test_odd_names_round_trip_through_pack_and_the_reader(odd_folder, tmp_path):
    with pytest.warns(BadSampleWarning) as caught:
        s = fio.pack(odd_folder, tmp_path / "p", progress=False, shard_bytes=1 << 12, on_error="warn")
    message = str(caught[0].message)
    message.encode("utf-8")  # printable: no lone surrogates
    assert "k\\xe9/bad\\xff\\n.png" in message, message
    names = relpaths(odd_folder)
    skipped = sorted(os.fsdecode(os.path.join(c, n)) for c in (b"k\xe9", b"plain") for n in UNREADABLE)
    assert sorted(n for n, _ in s.skipped) == skipped
    ds = fio.PackedDataset(tmp_path / "p")
    assert ds.skipped == s.skipped and len(ds) == len(names) - len(skipped)
    packed = [n for n in names if n not in skipped]
    for i, name in enumerate(packed):
        assert ds.where(i).endswith(f" record {i} ({shown(name)})"), (ds.where(i), name)  # printable
    assert os.fsencode(packed[0]).startswith(b"k\xe9/")  # bytes back, exactly
    # the command line's summary, written to a strict UTF-8 stream, escapes what is not text
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict")
    print_summary(s, out)
    out.flush()
    text = out.buffer.getvalue().decode()
    assert "  skipped k\\xe9/bad\\xff\\n.png: " in text and text.count("\n") == 3 + len(skipped), text


def test_odd_names_resume(odd_folder, tmp_path):
    with warnings.catch_warnings():
        fio.pack(odd_folder, tmp_path / "clean", progress=False, shard_bytes=1 << 12, on_error="skip")
        fio.pack(odd_folder, tmp_path / "p", progress=False, shard_bytes=1 << 12, on_error="skip")
        shards = sorted(n for n in os.listdir(tmp_path / "p") if n.endswith(".fpk"))
        assert len(shards) >= 3
        os.remove(tmp_path / "p" / "index.fpi")
        os.remove(tmp_path / "p" / shards[-1])
        s = fio.pack(odd_folder, tmp_path / "p", progress=False, shard_bytes=1 << 12, on_error="skip")
    assert s.resumed > 0
    for name in os.listdir(tmp_path / "clean"):
        assert (tmp_path / "p" / name).read_bytes() == (tmp_path / "clean" / name).read_bytes(), name


def test_a_datasets_odd_paths_name_its_items(odd_folder, tmp_path):
    paths = [os.path.join(odd_folder, "plain", os.fsdecode(n)) for n in NAMES + UNREADABLE]
    items = [(p, i) for i, p in enumerate(paths)]
    with pytest.warns(BadSampleWarning) as caught:
        s = fio.pack(items, tmp_path / "p", progress=False, on_error="warn")
    assert re.search(re.escape("bad\\xff\\n.png"), str(caught[0].message)) and len(caught) == len(UNREADABLE)
    assert [n for n, _ in s.skipped] == paths[len(NAMES):]
    ds = fio.PackedDataset(tmp_path / "p")
    assert [ds.where(i).split(" record ", 1)[1] for i in range(len(ds))] == \
        [f"{i} ({shown(p)})" for i, p in enumerate(paths[:len(NAMES)])]
    assert ds.targets == list(range(len(NAMES))) and np.asarray(ds[0][0]).shape[0] == 3
