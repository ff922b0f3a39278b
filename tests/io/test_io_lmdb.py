"""fastprep.io.LMDBDataset on LMDBs written by lmdb itself in the layouts in use: keys found or
listed, values as raw bytes, pickled tuples or dicts; transforms through DataLoader and Loader;
reads from many threads and after a fork; errors naming the key."""

import pickle
import sys
import threading

import pytest
import torch

import fastprep.io as fio

from helpers.jpeg_photos import needs_decoder, photo_jpeg, pil_decode
from helpers.source_checks import check_map_source

lmdb = pytest.importorskip("lmdb")
pytestmark = [needs_decoder, pytest.mark.one_backend]

SHAPES = [("astronaut", "4:2:0", False, (96, 128)), ("coffee", "4:4:4", True, (120, 90)),
          ("chelsea", "4:2:2", False, (100, 100)), ("rocket", "4:2:0", False, (70, 150)),
          ("coffee", "4:2:0", True, (130, 110))]
JPEGS = [photo_jpeg(*s) for s in SHAPES]
LABELS = [3, 1, 4, 1, 5]


def _write(path, entries):
    env = lmdb.open(str(path), map_size=1 << 26)
    with env.begin(write=True) as txn:
        for k, v in entries.items():
            txn.put(k, v)
    env.close()
    return path


@pytest.fixture(scope="module")
def dbs(tmp_path_factory):
    root = tmp_path_factory.mktemp("lmdb")
    n = len(JPEGS)
    return {
        # zero-padded keys, pickled (bytes, label) values
        "tuples": _write(root / "tuples", {f"{i:08d}".encode(): pickle.dumps((d, LABELS[i])) for i, d in enumerate(JPEGS)}),
        # str(i) keys (bytewise order 0, 1, 10, 2, ...: read in numeric order) and raw bytes
        "raw": _write(root / "raw", {str(i).encode(): d for i, d in enumerate(JPEGS)}),
        # folder2lmdb's layout: __keys__ / __len__ and dict values under arbitrary keys
        "dicts": _write(root / "dicts", {**{f"img/{n - i}".encode(): pickle.dumps({"image": d, "label": LABELS[i]})
                                            for i, d in enumerate(JPEGS)},
                                         b"__keys__": pickle.dumps([f"img/{n - i}" for i in range(n)]),
                                         b"__len__": str(n).encode()}),
    }


@pytest.mark.parametrize("layout", ["tuples", "raw", "dicts"])
def test_each_layout_reads_the_images_and_labels_in_order(dbs, layout):
    ds = fio.LMDBDataset(dbs[layout], labels=LABELS if layout == "raw" else None)
    assert len(ds) == len(JPEGS)
    for i, data in enumerate(JPEGS):
        image, label = ds.load_raw(i)
        assert isinstance(image, fio.JpegFile) and bytes(image.data) == data and label == LABELS[i]
        assert torch.equal(ds[i][0], torch.from_numpy(pil_decode(data)).permute(2, 0, 1))
    whole = fio.LMDBDataset(dbs[layout], roi=False, layout="HWC").load_raw(2)
    assert torch.equal(whole if layout == "raw" else whole[0], torch.from_numpy(pil_decode(JPEGS[2])))


def test_transforms_give_the_decoded_images_bits_through_dataloader_and_loader(dbs):
    decoded = [fio.decode_jpeg(d) for d in JPEGS]
    check_map_source(lambda tf: fio.LMDBDataset(dbs["tuples"], transform=tf), decoded, LABELS)


def test_many_threads_read_at_once_and_a_fork_opens_its_own_environment(dbs):
    ds = fio.LMDBDataset(dbs["dicts"])
    errors, seen = [], []

    def read(t):
        try:
            for k in range(40):
                i = (t + k) % len(ds)
                seen.append(bytes(ds.load_raw(i)[0].data) == JPEGS[i])
        except Exception as exc:  # noqa: BLE001 (reported below)
            errors.append(exc)

    threads = [threading.Thread(target=read, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(seen) == 160 and all(seen)
    # The parent has an open environment now; workers forked from it must open their own.
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2)
    assert [int(label) for _, label in loader] == LABELS
    pickled = pickle.loads(pickle.dumps(ds))  # spawn-started workers get a copy like this
    assert bytes(pickled.load_raw(0)[0].data) == JPEGS[0]
    ds.close()
    assert bytes(ds.load_raw(1)[0].data) == JPEGS[1]  # reopened


def test_decode_value_reads_other_layouts(tmp_path):
    path = _write(tmp_path / "db", {b"a": b"3|" + JPEGS[0], b"b": b"1|" + JPEGS[1]})
    ds = fio.LMDBDataset(path, decode_value=lambda v: (v[2:], int(v[:1])))
    assert [(bytes(ds.load_raw(i)[0].data), ds.load_raw(i)[1]) for i in range(2)] == [(JPEGS[0], 3), (JPEGS[1], 1)]


def test_bad_values_and_keys_raise_naming_the_key(dbs, tmp_path):
    cut = JPEGS[0][: len(JPEGS[0]) // 2]
    path = _write(tmp_path / "bad", {b"0": pickle.dumps((JPEGS[0], 0))[:-40], b"1": JPEGS[0][:100], b"2": cut,
                                     b"3": pickle.dumps(["not bytes", 1]), b"4": b""})
    ds = fio.LMDBDataset(path)
    with pytest.raises(ValueError, match=r"LMDBDataset: .*bad\[0\] \(item 0\): cannot unpickle the value \(\d+ bytes\)"):
        ds.load_raw(0)
    with pytest.raises(ValueError, match=r"bad\[1\]: "):  # the JPEG's header is cut
        ds.load_raw(1)
    with pytest.warns(fio.CorruptJpegWarning, match=r"bad\[2\]"):  # strict=False: libjpeg recovers, grey fill
        fio.LMDBDataset(path, strict=False)[2]
    with pytest.raises(ValueError, match=r"bad\[2\]: corrupt JPEG.*\(pass on_error='skip' to skip bad files, or 'warn'\)"):
        ds[2]  # the default (strict): a bad sample, as Pillow raises
    with pytest.raises(ValueError, match=r"bad\[3\] \(item 3\): expected the image's bytes, got a str"):
        ds.load_raw(3)
    with pytest.raises(ValueError, match=r"bad\[4\] \(item 4\): the image is empty"):
        ds.load_raw(4)
    with pytest.raises(KeyError, match=r"LMDBDataset: .*tuples\[nope\]: key b'nope' \(item 1\) is not in the database"):
        fio.LMDBDataset(dbs["tuples"], keys=["00000000", "nope"]).load_raw(1)
    with pytest.raises(IndexError, match=r"index 5 is out of range for 5 items"):
        ds.load_raw(5)
    with pytest.raises(ValueError, match=r"LMDBDataset: cannot open '.*nowhere' as an LMDB"):
        fio.LMDBDataset(tmp_path / "nowhere")
    with pytest.raises(ValueError, match=r"LMDBDataset: expected value to be 'auto', 'bytes' or 'pickle', got 'npy'"):
        fio.LMDBDataset(path, value="npy")


def test_without_lmdb_installed_the_error_names_the_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "lmdb", None)  # what `import lmdb` meets where it is not installed
    with pytest.raises(RuntimeError, match=r"LMDBDataset needs lmdb: pip install lmdb \(or pip install 'fastprep\[sources\]'\)"):
        fio.LMDBDataset(tmp_path / "db")
