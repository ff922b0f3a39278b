"""on_error on the map-style sources (fastprep.core._bad_samples): a bad sample (a JPEG truncated in its
header or in its scan (unless strict=False); a text file named .jpg; an LMDB value or HDF5 image that is
not an image; a pack's missing shard) is replaced by the next one that loads, transformed from the
random state the bad one started with, counted and named; "warn" warns once per bad sample;
"raise" raises the error unchanged. A DataLoader over such a folder gets full batches."""

import pickle
import threading
import time
import warnings

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

import fastprep
import fastprep.io as fio
from fastprep import transforms as T
from fastprep.core._rng import item_seed, seeded
from fastprep.errors import BadSampleWarning, SubstitutesExhausted

from helpers.jpeg_photos import needs_decoder, photo_jpeg

pytestmark = [needs_decoder, pytest.mark.one_backend]

GOOD = photo_jpeg("coffee", "4:2:0", False, (48, 64))


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """a/: 0.jpg good, 1.jpg cut in its header, 2.jpg good, 3.jpg text, 4.jpg cut in its scan, 5.jpg good."""
    root = tmp_path_factory.mktemp("bad")
    (root / "a").mkdir()
    files = [GOOD, GOOD[:120], photo_jpeg("chelsea", "4:2:0", False, (48, 64)), b"just some notes\n",
             GOOD[:len(GOOD) - 100], photo_jpeg("astronaut", "4:2:0", False, (48, 64))]
    for i, data in enumerate(files):
        (root / "a" / f"{i}.jpg").write_bytes(data)
    return root


def _decoded(x):
    return x.decode() if isinstance(x, fio.WindowedImage) else x


@pytest.mark.parametrize("roi", [False, True])
def test_skip_replaces_a_bad_file_by_the_next_that_loads_and_names_it(folder, roi):
    ds = fio.ImageFolder(folder, on_error="skip", roi=roi, strict=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # skip: no warning
        items = [ds[i] for i in range(len(ds))]
    # 1 -> 2; 3 -> 4 fails (strict) -> 5; 4 -> 5
    expected = [0, 2, 2, 5, 5, 5]
    for (image, label), j in zip(items, expected):
        assert label == 0 and torch.equal(_decoded(image), _decoded(ds.read_item(j)[0]))
    names = ds.bad_samples.names()
    assert [n.split(": ")[0].rsplit("/", 1)[-1] for n in names] == ["1.jpg", "3.jpg", "4.jpg"]
    assert "not a JPEG, and Pillow cannot decode it" in names[1]
    assert ds.bad_samples.indices == [1, 3, 4] and ds.bad_samples.count == 4  # 4 met twice (as 3's substitute)
    assert torch.equal(_decoded(ds.load_raw(1)[0]), _decoded(ds.read_item(2)[0]))  # the Loader's path too


def test_a_scan_cut_short_is_good_only_with_strict_false(folder):
    ds = fio.ImageFolder(folder, on_error="skip", strict=False)
    with pytest.warns(fio.CorruptJpegWarning):
        image, _ = ds[4]
    assert image.shape == (3, 48, 64) and ds.bad_samples.count == 0


def test_warn_warns_once_per_bad_file_and_a_dataloader_gets_full_batches(folder):
    ds = fio.ImageFolder(folder, transform=T.RandomCrop(32), on_error="warn", strict=True)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for _epoch in range(2):
            batches = list(DataLoader(ds, batch_size=3))
            assert [tuple(x.shape) for x, _ in batches] == [(3, 3, 32, 32)] * 2
    bad = [str(w.message) for w in seen if issubclass(w.category, BadSampleWarning)]
    assert len(bad) == 3 and all("ImageFolder: skipped bad sample" in m for m in bad)
    assert [m.split("(")[1].split(":")[0].rsplit("/", 1)[-1] for m in bad] == ["1.jpg", "3.jpg", "4.jpg"]
    assert [m.rsplit("; ", 1)[1] for m in bad] == ["sample 2 took its place"] + ["sample 5 took its place"] * 2
    assert ds.bad_samples.count == 8 and "skipped 8 bad samples (3 distinct)" in ds.bad_samples.summary()


def test_raise_raises_the_error_unchanged_and_records_it(folder):
    ds = fio.ImageFolder(folder)
    with pytest.raises(ValueError, match=r"ImageFolder: .*3.jpg: not a JPEG, and Pillow cannot decode it"):
        ds[3]
    with pytest.raises(ValueError, match=r"1.jpg"):
        ds.load_raw(1)
    assert ds.bad_samples.indices == [1, 3]
    with pytest.raises(IndexError):
        ds[6]  # no bad sample: an index outside the dataset
    with pytest.raises(ValueError, match=r"ImageFolder: expected on_error to be one of 'raise', 'skip', 'warn', "
                                         r"got 'ignore'"):
        fio.ImageFolder(folder, on_error="ignore")


class _DrawsThenFails:
    """Draws from torch's generator, then fails on 48x64 images of one colour mean: the substitute
    must draw what the bad sample would have."""

    def __init__(self, bad_mean):
        self.bad_mean = bad_mean

    def __call__(self, image):
        r = torch.rand(())
        if abs(float(image.float().mean()) - self.bad_mean) < 1e-3:
            raise RuntimeError("this one is bad")
        return r


def test_the_substitute_draws_from_the_bad_samples_random_state(folder):
    probe = fio.ImageFolder(folder, strict=True)
    bad_mean = float(probe[0][0].float().mean())  # 0.jpg fails in the transform, after its draw
    ds = fio.ImageFolder(folder, transform=_DrawsThenFails(bad_mean), on_error="skip", strict=True)
    seed = item_seed(7, 0)
    with seeded(seed):
        got, _ = ds[0]
    with seeded(seed):
        first = torch.rand(())
    assert float(got) == float(first)  # not the second draw of the generator
    assert T.SeedByIndex(ds, seed=7)[0][0] == got
    assert "this one is bad" in ds.bad_samples.names()[0]


def test_all_bad_stops_with_an_error_naming_them(tmp_path):
    (tmp_path / "a").mkdir()
    for i in range(3):
        (tmp_path / "a" / f"{i}.jpg").write_bytes(b"text")
    ds = fio.ImageFolder(tmp_path, on_error="skip")
    with pytest.raises(SubstitutesExhausted, match=r"sample 1 \(index of the ImageFolder\) failed \(ValueError: "
                                                 r"ImageFolder: .*1.jpg: not a JPEG.*tried in its place, \[2, 0\]"):
        ds[1]
    assert ds.bad_samples.indices == [0, 1, 2]


def test_the_record_survives_pickling(folder):
    ds = fio.ImageFolder(folder, on_error="skip", strict=True)
    ds[1]
    again = pickle.loads(pickle.dumps(ds))
    assert again.bad_samples.indices == [1] and again.bad_samples.names() == ds.bad_samples.names()
    again[3]
    assert again.bad_samples.indices == [1, 3, 4] and ds.bad_samples.indices == [1]


def test_lmdb_and_hdf5_skip_values_that_are_not_images(tmp_path):
    lmdb = pytest.importorskip("lmdb")
    h5py = pytest.importorskip("h5py")
    values = [GOOD, b"not an image", GOOD[:100], GOOD]
    env = lmdb.open(str(tmp_path / "db"), map_size=1 << 24)
    with env.begin(write=True) as txn:
        for i, v in enumerate(values):
            txn.put(str(i).encode(), v)
    env.close()
    ds = fio.LMDBDataset(tmp_path / "db", on_error="skip", roi=False)
    assert [tuple(ds[i].shape) for i in range(4)] == [(3, 48, 64)] * 4
    assert [n.split(": ")[0] for n in ds.bad_samples.names()] == [f"{tmp_path / 'db'}[1]", f"{tmp_path / 'db'}[2]"]
    ds.close()
    with h5py.File(tmp_path / "x.h5", "w") as f:
        d = f.create_dataset("images", (4,), dtype=h5py.vlen_dtype(np.uint8))
        for i, v in enumerate(values):
            d[i] = np.frombuffer(v, np.uint8)
    h5 = fio.HDF5Dataset(tmp_path / "x.h5", on_error="warn", roi=False)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert tuple(h5[1].shape) == (3, 48, 64)
    assert [str(w.message).split(" (")[1].split(":")[1] for w in seen] == ["/images[1]", "/images[2]"]
    assert h5.bad_samples.indices == [1, 2]
    h5.close()


def test_packed_dataset_skips_the_records_of_a_missing_shard(tmp_path):
    src = tmp_path / "src"
    (src / "a").mkdir(parents=True)
    for i in range(6):
        (src / "a" / f"{i}.jpg").write_bytes(photo_jpeg("coffee", "4:4:4", False, (128 + 8 * i, 160)))
    fio.pack(src, tmp_path / "p", shard_bytes=4096, progress=False)  # one record per shard
    ds = fio.PackedDataset(tmp_path / "p", on_error="skip")
    shard = ds._shards[int(ds.item_shards[2])][0]
    (tmp_path / "p" / shard).unlink()
    image, _ = ds.load_raw(2)
    assert image.index == 3 and "record 2 (a/2.jpg)" in ds.bad_samples.names()[0]
    assert tuple(ds[2][0].shape) == (3, 152, 160)


def test_the_loader_over_a_skipping_folder_gets_full_batches(folder, tmp_path):
    import fastprep

    (tmp_path / "a").mkdir()
    for k in (0, 1, 2, 3, 5):  # not 4.jpg: its cut scan shows in the window decode, the Loader's on_error
        (tmp_path / "a" / f"{k}.jpg").write_bytes((folder / "a" / f"{k}.jpg").read_bytes())
    ds = fio.ImageFolder(tmp_path, on_error="skip", roi=True)
    batches = list(fastprep.Loader(ds, 5, transform=T.RandomCrop(32), seed=0, threads=2))
    assert [tuple(b[0].shape) for b in batches] == [(5, 3, 32, 32)]
    assert sorted(n.split(": ")[0].rsplit("/", 1)[-1] for n in ds.bad_samples.names()) == ["1.jpg", "3.jpg"]


def test_a_memory_error_is_never_skipped(tmp_path):
    """Not the sample's fault: sources, pack and the Loader all raise it (bad_samples.NEVER_SKIPPED)."""
    class Hungry(torch.utils.data.Dataset):
        def __len__(self):
            return 3

        def __getitem__(self, i):
            if i == 1:
                raise MemoryError("out of memory")
            return np.zeros((8, 8, 3), np.uint8), i

    with pytest.raises(MemoryError):
        fio.pack(Hungry(), tmp_path / "p", on_error="skip", progress=False)
    with pytest.raises(MemoryError):
        fastprep.Loader(Hungry(), 3, on_error="skip").__iter__().__next__()


def test_a_substitute_in_a_loader_thread_leaves_torchs_generator_alone(tmp_path):
    """dataset[i] rewinds torch's generator for a substitute only where this thread owns it: in a
    Loader thread (it shares the generator with the training loop) the loop's draws never repeat."""
    class Flaky(fio.ImageFolder):
        def read_item(self, i):
            if i == 0:
                time.sleep(0.2)
                raise ValueError("bad file")
            return super().read_item(i)

    root = tmp_path / "f"
    (root / "a").mkdir(parents=True)
    for k in range(3):
        (root / "a" / f"{k}.jpg").write_bytes(photo_jpeg("coffee", shape=(16, 16)))
    ds = Flaky(root, on_error="skip")
    worker = threading.Thread(target=lambda: ds[0])
    worker.start()
    time.sleep(0.05)
    a = torch.rand(3)
    worker.join()
    b = torch.rand(3)
    assert not torch.equal(a, b)


def test_substitutes_exhausted_survives_pickling():
    err = SubstitutesExhausted(3, [4, 5], ValueError("x"), "index of the ImageFolder")
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is type(err) and (back.index, back.tried, str(back)) == (3, [4, 5], str(err))
