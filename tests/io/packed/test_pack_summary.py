"""pack keeps what it is given (issue 34): non-JPEGs are stored as raw pixels by default (read back
bit for bit as Pillow's convert("RGB")), lossy JPEG encoding is opt-in (non_jpeg="encode"); the
summary counts each kind of input with its bytes in and out; an input that cannot be packed meets
the bad-sample policy (on_error raise / skip / warn), also when a pack that left it out is resumed."""

import io
import os
import re
import warnings

import numpy as np
import pytest

import fastprep.io as fio
import fastprep.io._pack_format as fmt
from fastprep.errors import BadSampleWarning
from fastprep.io.packed._writer import scan_shards
from fastprep.tools.cli._commands import main

from helpers.jpeg_photos import needs_decoder, photo, photo_jpeg

pytestmark = [needs_decoder, pytest.mark.one_backend]

Image = pytest.importorskip("PIL.Image")


def png(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(array).save(buf, format="PNG")
    return buf.getvalue()


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """k/: two JPEGs, an RGB PNG, a grey PNG and a truncated PNG (bad.png: Pillow cannot
    decode it), which sorts third: the items after it keep their source indices."""
    root = tmp_path_factory.mktemp("mixed")
    (root / "k").mkdir()
    files = {"a.jpg": photo_jpeg("coffee", "4:2:0", False, (160, 240)),
             "b.jpg": photo_jpeg("chelsea", "4:4:4", False, (33, 47)),
             "c.png": png(photo("astronaut")[:37, :51]),
             "g.png": png(photo("camera")[:29, :41]),
             "bad.png": png(photo("rocket")[:40, :60])[:200]}
    for name, data in files.items():
        (root / "k" / name).write_bytes(data)
    return root


def size(folder, name):
    return os.path.getsize(folder / "k" / name)


def record_lengths(dest, names):
    entries = fmt.read_index(os.path.join(dest, fmt.INDEX_NAME))[0]
    return dict(zip(names, entries["length"].tolist(), strict=True))


def test_default_stores_non_jpegs_raw_bit_exact_and_counts_each_kind(folder, tmp_path):
    s = fio.pack(folder, tmp_path / "p", progress=False, on_error="skip")
    ds = fio.PackedDataset(tmp_path / "p")
    names = [ds.where(i).split(" (", 1)[1].rstrip(")") for i in range(len(ds))]
    assert names == ["k/a.jpg", "k/b.jpg", "k/c.png", "k/g.png"] and s.records == 4
    for i, name in enumerate(names):
        if name.endswith(".png"):
            assert isinstance(ds.load_raw(i)[0], fio.PackedRaw)
            want = np.asarray(Image.open(folder / name).convert("RGB"))  # torchvision's ImageFolder's pixels
            assert np.array_equal(ds[i][0].permute(1, 2, 0).numpy(), want), name
        else:
            assert isinstance(ds.load_raw(i)[0], fio.PackedJpeg)
    lengths = record_lengths(tmp_path / "p", names)
    kinds = {k: (v.count, v.bytes_in, v.bytes_out) for k, v in s.kinds.items()}
    assert kinds == {
        "jpeg_transcoded": (2, size(folder, "a.jpg") + size(folder, "b.jpg"), lengths["k/a.jpg"] + lengths["k/b.jpg"]),
        "non_jpeg_raw": (2, size(folder, "c.png") + size(folder, "g.png"), lengths["k/c.png"] + lengths["k/g.png"])}
    assert lengths["k/c.png"] >= 37 * 51 * 3 and lengths["k/g.png"] >= 29 * 41 * 3  # grey stored as RGB
    assert [n for n, _ in s.skipped] == ["k/bad.png"] and "truncated" in s.skipped[0][1]
    assert s.skipped_bytes == size(folder, "bad.png") and ds.skipped == s.skipped and s.shrunk == 0
    text = "\n".join(s.describe())
    assert "  JPEGs transcoded losslessly (same DCT coefficients, restart markers added): 2, " in text
    assert f"  non-JPEGs stored as raw pixels (lossless): 2, {kinds['non_jpeg_raw'][1]:,} -> " in text
    assert f"  skipped (on_error='skip'): 1, {s.skipped_bytes:,} bytes" in text and "  skipped k/bad.png: " in text


def test_encoding_and_shrinking_are_opt_in_and_named(folder, tmp_path):
    s = fio.pack(folder, tmp_path / "e", progress=False, on_error="skip", non_jpeg="encode")
    ds = fio.PackedDataset(tmp_path / "e")
    assert {k: v.count for k, v in s.kinds.items()} == {"jpeg_transcoded": 2, "non_jpeg_encoded": 2}
    assert all(isinstance(ds.load_raw(i)[0], fio.PackedJpeg) for i in range(len(ds)))
    want = np.asarray(Image.open(folder / "k" / "c.png").convert("RGB")).astype(int)
    got = ds[2][0].permute(1, 2, 0).numpy().astype(int)
    assert 0 < np.abs(got - want).mean() < 12  # quality 90: close, not exact
    assert "  non-JPEGs encoded as JPEG (lossy, non_jpeg='encode'): 2, " in "\n".join(s.describe())
    # max_side=50 shrinks a.jpg (160x240, re-encoded: lossy) and c.png (37x51), not b.jpg (33x47) nor g.png (29x41)
    s = fio.pack(folder, tmp_path / "m", progress=False, on_error="skip", max_side=50)
    assert {k: v.count for k, v in s.kinds.items()} == {"jpeg_reencoded": 1, "jpeg_transcoded": 1, "non_jpeg_raw": 2}
    assert s.shrunk == 2 and "  shrunk to max_side (Lanczos): 2" in s.describe()
    assert "  JPEGs shrunk to max_side and re-encoded (lossy): 1, " in "\n".join(s.describe())


POLICY = [  # on_error, what pack does with k/bad.png
    ("raise", "raises"), ("skip", "silent"), ("warn", "warns"),
]


@pytest.mark.parametrize(("on_error", "outcome"), POLICY, ids=[p[0] for p in POLICY])
def test_on_error_decides_what_an_unreadable_input_does(folder, tmp_path, on_error, outcome):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if outcome == "raises":
            with pytest.raises(fio.PackSourceError, match=r"pack: 'k/bad.png' \(item 2 of 5\): not a JPEG, and Pillow "
                                                          r"cannot decode it: .*truncated.* \(on_error='skip' leaves"):
                fio.pack(folder, tmp_path / "p", progress=False, on_error=on_error)
            assert not os.path.exists(tmp_path / "p" / fmt.INDEX_NAME)
        else:
            s = fio.pack(folder, tmp_path / "p", progress=False, on_error=on_error)
            assert s.records == 4 and [n for n, _ in s.skipped] == ["k/bad.png"] and s.bad_samples.indices == [2]
    bad = [w for w in caught if issubclass(w.category, BadSampleWarning)]
    assert len(bad) == (outcome == "warns"), [str(w.message) for w in caught]
    if bad:
        assert re.search(r"pack: skipped bad sample 2 \(k/bad.png: Unreadable: .*truncated", str(bad[0].message))


@pytest.mark.parametrize("value", ["ignore", None, True])
def test_a_bad_on_error_is_named(folder, tmp_path, value):
    with pytest.raises(ValueError, match=rf"pack: expected on_error to be one of 'raise', 'skip', 'warn', got {value!r}"):
        fio.pack(folder, tmp_path / "p", progress=False, on_error=value)


def test_a_pack_with_skipped_items_resumes_and_meets_the_policy(folder, tmp_path):
    clean = tmp_path / "clean"
    fio.pack(folder, clean, progress=False, on_error="skip", shard_bytes=1 << 12)
    shards = sorted(n for n in os.listdir(clean) if n.endswith(".fpk"))
    assert len(shards) >= 2
    p = tmp_path / "p"
    fio.pack(folder, p, progress=False, on_error="skip", shard_bytes=1 << 12)
    os.remove(p / fmt.INDEX_NAME)
    kept = scan_shards(str(p)).kept
    holder = next(k for k, shard in enumerate(kept) if shard.meta["skipped"])
    assert holder > 0
    for k in range(holder, len(kept)):  # the shard holding bad.png's place, and those after it
        os.remove(p / fmt.shard_name(k))
    with pytest.raises(fio.PackSourceError, match=r"'k/bad.png' \(item 2 of 5\)"):  # reached again: raise stops
        fio.pack(folder, p, progress=False, shard_bytes=1 << 12)
    s = fio.pack(folder, p, progress=False, on_error="skip", shard_bytes=1 << 12)
    assert 0 < s.resumed < s.records == 4
    for name in os.listdir(clean):
        assert (p / name).read_bytes() == (clean / name).read_bytes(), name
    ds = fio.PackedDataset(p)
    assert ds._entries["source"].tolist() == [0, 1, 3, 4]  # the index maps records to their source items
    # the finished pack left t.png out: "raise" refuses it as a fresh run would, "warn" warns, both name it
    with pytest.raises(fio.PackSourceError, match=r"'k/bad.png' \(item 2 of 5\): .* \(left out of the pack"):
        fio.pack(folder, p, progress=False, shard_bytes=1 << 12)
    with pytest.warns(BadSampleWarning, match="k/bad.png"):
        s = fio.pack(folder, p, progress=False, on_error="warn", shard_bytes=1 << 12)
    assert s.resumed == s.records == 4 and s.kinds["non_jpeg_raw"].count == 2  # kinds kept by each shard


class Faulty:
    """Four pixel items; item 1 raises (a bad sample), or holds a str label (a bug of the dataset)."""

    def __init__(self, bad_label=False):
        self.bad_label = bad_label

    def __len__(self):
        return 4

    def __getitem__(self, i):
        if i == 1 and self.bad_label:
            return np.zeros((4, 4, 3), np.uint8), "cat"
        if i == 1:
            raise OSError("cannot reach the bucket")
        return np.full((4, 4, 3), i, np.uint8), i


def test_a_dataset_item_that_raises_is_a_bad_sample_a_bad_label_a_bug(tmp_path):
    s = fio.pack(Faulty(), tmp_path / "p", progress=False, on_error="skip")
    assert s.records == 3 and s.skipped == [("item 1", "OSError: cannot reach the bucket")]
    assert fio.PackedDataset(tmp_path / "p").targets == [0, 2, 3]
    assert s.kinds["non_jpeg_raw"].count == 3 and s.kinds["non_jpeg_raw"].bytes_in == 3 * 48
    with pytest.raises(fio.PackSourceError, match=r"item 1 \(of 4\): expected an int label"):
        fio.pack(Faulty(bad_label=True), tmp_path / "q", progress=False, on_error="skip")


def test_the_old_default_is_refused_by_name(folder, tmp_path):
    """A pack made when non_jpeg defaulted to "encode" is never mixed with raw records."""
    fio.pack(folder, tmp_path / "p", progress=False, on_error="skip", non_jpeg="encode")
    with pytest.raises(fio.PackSourceError, match=r"other options \(non_jpeg 'encode' -> 'raw'\) \(non_jpeg's "
                                                  r"default became 'raw'.* pass non_jpeg='encode'"):
        fio.pack(folder, tmp_path / "p", progress=False, on_error="skip")
    assert fio.pack(folder, tmp_path / "p", progress=False, on_error="skip", non_jpeg="encode").resumed == 4
    # non_jpeg means nothing to mode "raw": an old raw pack (non_jpeg "encode" recorded) is the same pack
    fio.pack(folder, tmp_path / "r", mode="raw", progress=False, on_error="skip", non_jpeg="encode")
    s = fio.pack(folder, tmp_path / "r", mode="raw", progress=False, on_error="skip")
    assert s.resumed == 4 and s.kinds["jpeg_raw"].count == 2


def test_the_command_line_names_each_kind_and_the_policy(folder, tmp_path, capsys):
    assert main(["pack", str(folder), str(tmp_path / "p"), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "k/bad.png" in err and "--on-error skip leaves such items out" in err and err.count("\n") == 1
    assert main(["pack", str(folder), str(tmp_path / "p"), "--no-progress", "--on-error", "skip"]) == 0
    out = capsys.readouterr().out
    assert "JPEGs transcoded losslessly (same DCT coefficients, restart markers added): 2, " in out
    assert "non-JPEGs stored as raw pixels (lossless): 2, " in out
    assert "skipped (on_error='skip'): 1, " in out and "  skipped k/bad.png: " in out
    assert main(["pack", str(folder), str(tmp_path / "e"), "--no-progress", "--on-error", "warn",
                 "--non-jpeg", "encode"]) == 0
    out, err = capsys.readouterr()
    assert "non-JPEGs encoded as JPEG (lossy, non_jpeg='encode'): 2, " in out
    assert err.startswith("python -m fastprep pack: warning: skipped bad sample 2 (k/bad.png: ") and \
        err.count("\n") == 1, err  # one line as it is met, no source line
    assert main(["pack", str(folder), str(tmp_path / "e"), "--no-progress", "--on-error", "skip"]) == 1
    assert "(non_jpeg 'encode' -> 'raw')" in capsys.readouterr().err  # the default now: refused by name


def test_shards_of_an_older_fastprep_are_counted_as_unrecorded(folder, tmp_path, monkeypatch):
    """A pack written before shards recorded their kinds still resumes and reads; its records are
    counted, their kinds said to be unknown."""
    monkeypatch.setattr("fastprep.io.packed._writer.shard_kinds", lambda *_: {})
    fio.pack(folder, tmp_path / "p", progress=False, on_error="skip")
    monkeypatch.undo()
    s = fio.pack(folder, tmp_path / "p", progress=False, on_error="skip")
    assert s.resumed == s.records == s.unrecorded == 4 and not s.kinds
    assert "  in shards of an older fastprep (their kinds were not recorded): 4" in s.describe()
    assert len(fio.PackedDataset(tmp_path / "p")) == 4
