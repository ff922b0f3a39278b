"""fastprep.io.pack and PackedDataset: restart-window decodes with the bits of a full decode cropped
(every subsampling, grey, progressive and arithmetic inputs, odd sizes, windows at every edge and
corner, 1x1, whole), raw shards, the transforms' flips and resized crops, the Loader, the cut for
a GPU decoder, datasets as sources, resuming, and failing cleanly on a full or read-only disk."""

import errno
import os
import pickle
import re
import threading
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

import fastprep
import fastprep.io as fio
from fastprep import transforms as T
from fastprep.errors import BadSampleWarning
from fastprep.io.packed._writer import ShardWriter
from fastprep.tools.cli._commands import main

from helpers.jpeg_photos import grey_jpeg, needs_decoder, photo, photo_jpeg, pil_decode, write_tree
from helpers.jpeg_samples import arithmetic, sampled_440

pytestmark = [needs_decoder, pytest.mark.one_backend]

FILES = {
    "a/444.jpg": lambda: photo_jpeg("astronaut", "4:4:4", False, (131, 157)),
    "a/422p.jpg": lambda: photo_jpeg("chelsea", "4:2:2", True, (150, 203)),
    "a/440.jpg": sampled_440,
    "b/420.jpg": lambda: photo_jpeg("coffee", "4:2:0", False, (301, 333)),
    "b/420p.jpg": lambda: photo_jpeg("rocket", "4:2:0", True, (97, 250)),
    "b/arith.jpg": arithmetic,
    "c/grey.jpg": lambda: grey_jpeg(False, (91, 130)),
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    from PIL import Image

    root = tmp_path_factory.mktemp("src")
    write_tree(root, FILES)
    Image.fromarray(photo("immunohistochemistry")[:70, :90]).save(root / "c" / "z.png")
    return root


@pytest.fixture(scope="module")
def packs(folder, tmp_path_factory):
    out = tmp_path_factory.mktemp("packs")
    # several shards; the PNG encoded as JPEG too (GRAY reads JPEG records only)
    fio.pack(folder, out / "jpeg", progress=False, shard_bytes=1 << 14, threads=2, non_jpeg="encode")
    fio.pack(folder, out / "raw", mode="raw", progress=False)
    return out


def originals(folder):
    return [p for p, _ in fio.ImageFolder(folder).samples]


def windows(h, w, rng, n=12):
    fixed = [(0, 0, h, w), (0, 0, 1, 1), (h - 1, w - 1, 1, 1), (0, w - 1, 1, 1), (h - 1, 0, 1, 1),
             (0, 0, min(h, 17), w), (h - min(h, 19), 0, min(h, 19), w), (0, 0, h, min(w, 18)),
             (0, w - min(w, 23), h, min(w, 23)), (h // 3, w // 3, max(1, h // 3), max(1, w // 3))]
    rand = []
    for _ in range(n):
        hh, ww = int(rng.integers(1, h + 1)), int(rng.integers(1, w + 1))
        rand.append((int(rng.integers(0, h - hh + 1)), int(rng.integers(0, w - ww + 1)), hh, ww))
    return fixed + rand


def test_jpeg_windows_are_the_full_decode_cropped(folder, packs):
    ds = fio.PackedDataset(packs / "jpeg")
    assert len(ds) == len(originals(folder)) and ds.classes == ["a", "b", "c"] and not ds.skipped
    assert len(ds._shards) > 1
    rng = np.random.default_rng(0)
    for i, path in enumerate(originals(folder)):
        image, label = ds.load_raw(i)
        # A PNG was encoded once (quality 90): its record's own full decode is the reference.
        full = pil_decode(Path(path).read_bytes()) if path.endswith(".jpg") else image.decode(layout="HWC").numpy()
        assert isinstance(image, fio.PackedJpeg) and isinstance(image, fio.WindowedImage)
        assert (image.height, image.width) == full.shape[:2] and label == ds.targets[i]
        for t, left, h, w in windows(image.height, image.width, rng):
            got = image.decode((t, left, h, w), layout="HWC")
            assert np.array_equal(got.numpy(), full[t:t + h, left:left + w]), (path, (t, left, h, w))
        assert torch.equal(ds[i][0], torch.from_numpy(full).permute(2, 0, 1))


@pytest.mark.parametrize("mode", ["YCbCr", "GRAY"])
def test_jpeg_windows_in_other_modes_match_decode_jpeg(folder, packs, mode):
    ds = fio.PackedDataset(packs / "jpeg", mode=mode)
    rng = np.random.default_rng(1)
    for i, path in enumerate(originals(folder)):
        image = ds.load_raw(i)[0]
        full = fio.decode_jpeg(path, mode=mode) if path.endswith(".jpg") else image.decode()
        for t, left, h, w in windows(image.height, image.width, rng, 3):
            assert torch.equal(image.decode((t, left, h, w)), full[:, t:t + h, left:left + w]), (path, t, left)


def test_raw_windows_come_from_the_memory_map(folder, packs):
    ds, jp = fio.PackedDataset(packs / "raw", layout="HWC"), fio.PackedDataset(packs / "jpeg", layout="HWC")
    ycc = fio.PackedDataset(packs / "raw", mode="YCbCr")
    rng = np.random.default_rng(2)
    for i, path in enumerate(originals(folder)):
        image = ds.load_raw(i)[0]
        full = jp[i][0] if path.endswith(".jpg") else torch.from_numpy(pil_decode(Path(path).read_bytes()))
        assert isinstance(image, fio.PackedRaw)
        for t, left, h, w in windows(image.height, image.width, rng, 3):
            assert torch.equal(image.decode((t, left, h, w)), full[t:t + h, left:left + w])
        assert torch.equal(ycc[i][0], fastprep.rgb_to_ycbcr(full, "HWC"))
    # YCbCr in the layout asked for (the conversion returns CHW whatever it reads), into out= too
    ycc_hwc = fio.PackedDataset(packs / "raw", mode="YCbCr", layout="HWC")
    for i in range(len(ycc_hwc)):
        image = ycc_hwc.load_raw(i)[0]
        want = fastprep.rgb_to_ycbcr(ds.load_raw(i)[0].decode((1, 2, 9, 11)), "HWC").permute(1, 2, 0)
        assert torch.equal(image.decode((1, 2, 9, 11)), want)
        out = torch.empty(9, 11, 3, dtype=torch.uint8)
        assert image.decode((1, 2, 9, 11), out=out) is out and torch.equal(out, want)
        with pytest.raises(ValueError, match=r"PackedRaw.decode: expected out to be a uint8 CPU tensor of shape "
                                             r"\(9, 11, 3\)"):
            image.decode((1, 2, 9, 11), out=torch.empty(3, 9, 11, dtype=torch.uint8))
    with pytest.raises(ValueError, match=r"holds RGB pixels \(packed raw\); read it with mode 'RGB' or 'YCbCr'"):
        fio.PackedDataset(packs / "raw", mode="GRAY")[0]


@pytest.mark.parametrize("tf", ["flip_crop", "resized_crop", "padded_flip"])
def test_transforms_read_windows_with_the_full_decodes_bits(folder, packs, tf):
    """Flips read a mirrored window, RandomResizedCrop its box, padding the in-image part only."""
    make = {"flip_crop": lambda: T.Compose([T.RandomHorizontalFlip(), T.RandomCrop(48)]),
            "resized_crop": lambda: T.RandomResizedCrop(40),
            "padded_flip": lambda: T.Compose([T.RandomHorizontalFlip(), T.RandomCrop(120, pad_if_needed=True,
                                                                                    padding_mode="reflect")])}[tf]
    ds = fio.PackedDataset(packs / "jpeg")
    for i, path in enumerate(originals(folder)):
        whole = fio.decode_jpeg(path) if path.endswith(".jpg") else ds[i][0]
        for seed in range(4):
            torch.manual_seed(seed)
            want = make()(whole)
            torch.manual_seed(seed)
            assert torch.equal(make()(ds.load_raw(i)[0]), want), (path, seed)


def _collect(loader):
    images, labels = [], []
    for batch in loader:
        images.append(batch.data[0].clone())
        labels.append(batch.data[1].clone())
        batch.release()
    return torch.cat(images), torch.cat(labels)


def test_the_loader_over_packed_shards_gives_imagefolders_batches(folder, packs):
    def make():
        return T.seed_workload(48, hflip=True)

    ref = _collect(fastprep.Loader(fio.ImageFolder(folder), 2, transform=make(), seed=4, threads=2))
    for name in ("jpeg", "raw"):
        got = _collect(fastprep.Loader(fio.PackedDataset(packs / name), 2, transform=make(), seed=4, threads=2))
        n = -1 if name == "jpeg" else None  # the last file is the PNG, which "jpeg" packs encoded (lossy)
        assert torch.equal(got[0][:n], ref[0][:n]) and torch.equal(got[1], ref[1]), name


def test_cuts_decode_on_the_stand_in_device_to_the_windows_bits(packs):
    ds = fio.PackedDataset(packs / "jpeg")
    crops = [(3, 5, 40, 33), None, (0, 0, 1, 1), (60, 100, 41, 77)]
    cuts = [ds.cut_window(i, c) for i, c in zip((0, 1, 2, 3), crops, strict=True)]
    got = fio.decode_window_batch(cuts, device="cpu")
    for i, c, g in zip((0, 1, 2, 3), crops, got, strict=True):
        assert torch.equal(g, ds.load_raw(i)[0].decode(c))
    assert len(cuts[3].data) < len(ds.record(3)) / 2  # only the window's intervals
    with pytest.raises(ValueError, match=r"holds raw pixels, not a JPEG"):
        fio.PackedDataset(packs / "raw").cut_window(0, None)
    with pytest.raises(TypeError, match=r"expected WindowCut s"):
        fio.decode_window_batch([b"abc"], device="cpu")


def test_datasets_pack_with_labels_extras_and_survive_pickling(tmp_path):
    from PIL import Image

    items = [(Image.fromarray(photo("coffee")[:60, :70]), 3, {"id": 0}),
             (torch.from_numpy(photo("chelsea")[:50, :40].copy()).permute(2, 0, 1), np.int64(1), {"id": 1}),
             (photo_jpeg("astronaut", "4:2:0", False, (40, 48)), torch.tensor(2), {"id": 2})]
    s = fio.pack(items, tmp_path / "p", non_jpeg="raw", progress=False)
    assert s.records == 3 and not s.skipped
    ds = fio.PackedDataset(tmp_path / "p")
    kinds = [type(ds.load_raw(i)[0]) for i in range(3)]
    assert kinds == [fio.PackedRaw, fio.PackedRaw, fio.PackedJpeg] and ds.targets == [3, 1, 2]
    assert np.array_equal(ds[0][0].permute(1, 2, 0).numpy(), photo("coffee")[:60, :70]) and ds[1][2] == {"id": 1}
    back = pickle.loads(pickle.dumps(ds))
    item = pickle.loads(pickle.dumps(ds.load_raw(2)[0]))
    assert torch.equal(back[2][0], ds[2][0]) and torch.equal(item.decode(), ds[2][0])
    results = []
    threads = [threading.Thread(target=lambda: results.append([ds[i][0].sum().item() for i in range(3)] * 20))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4 and all(r == results[0] for r in results)
    with pytest.raises(fio.PackSourceError, match=r"item 0 \(of 1\): expected an int label .* got 'cat'"):
        fio.pack([(photo("coffee")[:8, :8], "cat")], tmp_path / "q", progress=False)


def test_unreadable_inputs_are_skipped_by_name(tmp_path):
    from PIL import Image

    src = tmp_path / "src" / "k"
    src.mkdir(parents=True)
    (src / "ok.jpg").write_bytes(photo_jpeg("coffee", "4:2:0", False, (40, 40)))
    (src / "cut.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(10))
    Image.fromarray(np.full((16, 16, 3), 40, np.uint8)).convert("CMYK").save(src / "cmyk.jpg")
    twelve = bytearray(photo_jpeg("coffee", "4:2:0", False, (24, 24)))
    twelve[twelve.index(b"\xff\xc0") + 4] = 12  # SOF precision
    (src / "twelve.jpg").write_bytes(bytes(twelve))
    with pytest.warns(BadSampleWarning) as caught:
        s = fio.pack(tmp_path / "src", tmp_path / "out", progress=False, on_error="warn")
    assert len(caught) == 2
    # A CMYK JPEG is packed (tests/io/test_jpeg_cmyk.py); the others are left out by name.
    assert s.records == 2 and [n for n, _ in s.skipped] == ["k/cut.png", "k/twelve.jpg"]
    assert "Unsupported JPEG data precision 12" in dict(s.skipped)["k/twelve.jpg"]
    assert fio.PackedDataset(tmp_path / "out").skipped == s.skipped


def test_max_side_shrinks_and_sizes_stay_close_to_the_originals(folder, packs, tmp_path):
    s = fio.pack(folder, tmp_path / "small", max_side=64, progress=False, non_jpeg="encode")
    ds = fio.PackedDataset(tmp_path / "small")
    assert all(max(ds.load_raw(i)[0].height, ds.load_raw(i)[0].width) <= 64 for i in range(len(ds)))
    assert s.packed_bytes < s.input_bytes
    jpeg = sum(os.path.getsize(p) for p in (packs / "jpeg").iterdir())
    originals_bytes = sum(os.path.getsize(p) for p in folder.rglob("*.jpg"))
    assert jpeg < 1.25 * originals_bytes  # tiny images: the restart index is a larger share than at 1024^2


def _shards(path):
    return sorted(p.name for p in path.iterdir())


def test_an_interrupted_pack_resumes_from_its_complete_shards(folder, packs, tmp_path, monkeypatch):
    add, calls = ShardWriter.add, []

    def interrupted(self, *a):
        calls.append(1)
        if len(calls) == 5:
            raise KeyboardInterrupt
        add(self, *a)

    monkeypatch.setattr(ShardWriter, "add", interrupted)
    with pytest.raises(KeyboardInterrupt):
        fio.pack(folder, tmp_path / "p", progress=False, shard_bytes=1 << 14, threads=1, non_jpeg="encode")
    left = _shards(tmp_path / "p")
    assert left and "index.fpi" not in left and not any(n.endswith(".tmp") for n in left)
    with pytest.raises(FileNotFoundError, match=r"no index.fpi .* packing was interrupted"):
        fio.PackedDataset(tmp_path / "p")
    monkeypatch.setattr(ShardWriter, "add", add)
    s = fio.pack(folder, tmp_path / "p", progress=False, shard_bytes=1 << 14, non_jpeg="encode")
    assert 0 < s.resumed < s.records
    for name in _shards(packs / "jpeg"):
        assert (tmp_path / "p" / name).read_bytes() == (packs / "jpeg" / name).read_bytes(), name
    assert fio.pack(folder, tmp_path / "p", progress=False, shard_bytes=1 << 14, non_jpeg="encode").resumed == \
        s.records  # done


def test_a_full_disk_fails_cleanly_and_keeps_what_was_done(folder, tmp_path, monkeypatch):
    add, calls = ShardWriter.add, []

    def full(self, *a):
        calls.append(1)
        if len(calls) >= 4:
            raise OSError(errno.ENOSPC, "No space left on device", self.tmp)
        add(self, *a)

    monkeypatch.setattr(ShardWriter, "add", full)
    with pytest.raises(OSError, match=r"pack: cannot write .*shard-0000\d.fpk.tmp: No space left on device. The "
                                      r"\d complete shards \(\d records\) in .* are kept") as info:
        fio.pack(folder, tmp_path / "p", progress=False, shard_bytes=1 << 12, threads=1)
    assert info.value.errno == errno.ENOSPC
    assert not any(n.endswith(".tmp") for n in _shards(tmp_path / "p"))
    kept = int(re.search(r"\((\d) records\)", str(info.value)).group(1))
    monkeypatch.setattr(ShardWriter, "add", add)
    assert fio.pack(folder, tmp_path / "p", progress=False, shard_bytes=1 << 12).resumed == kept > 0


def test_the_command_line(folder, tmp_path, capsys):
    assert main(["pack", str(folder), str(tmp_path / "p"), "--no-progress", "--threads", "2"]) == 0
    out = capsys.readouterr().out
    assert re.match(r"packed 8 images into 1 shards in .*p: [\d,]+ bytes, \d\.\d+x the input files", out), out
    with pytest.raises(SystemExit) as exit_info:
        main(["pack", str(folder), str(tmp_path / "q"), "--mode", "zip"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.count("\n") == 1 and "argument --mode: invalid choice: 'zip'" in err
    unwritable = "/proc/fastprep-pack" if os.geteuid() == 0 else str(tmp_path / "locked" / "p")
    if os.geteuid() != 0:
        (tmp_path / "locked").mkdir(mode=0o500)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert main(["pack", str(folder), unwritable, "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("python -m fastprep pack: error: cannot write") and err.count("\n") == 1, err
