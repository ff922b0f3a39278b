"""A real ImageFolder of JPEG photos (scikit-image's data pictures, written at several sizes), and
what diagnose says about it: with fastprep's fast transforms, decoding is what starves the step."""

import os
import sys

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

import fastprep
from fastprep import transforms as T
from fastprep.tools.diagnose._bottleneck import find_bottleneck
from fastprep.tools.photos import PHOTOS, ImageFolder, decode_array, write_photo_folder

pytestmark = pytest.mark.one_backend

PIL = pytest.importorskip("PIL.Image")
SIZES = (256, 384)


@pytest.fixture(scope="module")
def photo_root(tmp_path_factory):
    pytest.importorskip("skimage", reason="write_photo_folder writes scikit-image's photos")
    root = tmp_path_factory.mktemp("photos")
    where = write_photo_folder(root, sizes=SIZES)
    return root, where


def test_the_folder_holds_real_jpegs_of_each_size(photo_root):
    root, where = photo_root
    assert where.startswith("scikit-image")
    assert sorted(os.listdir(root)) == sorted(PHOTOS)
    dataset = ImageFolder(root)
    assert dataset.classes == sorted(PHOTOS) and len(dataset) == len(PHOTOS) * len(SIZES) * 2
    short_sides = set()
    for path, label in dataset.samples:
        with PIL.open(path) as im:
            assert im.format == "JPEG" and im.mode == "RGB"
            short_sides.add(min(im.size))
        assert dataset.classes[label] == os.path.basename(os.path.dirname(path))
    assert short_sides == set(SIZES)
    image, label = dataset[0]
    assert isinstance(image, PIL.Image) and image.mode == "RGB" and label == 0
    array = decode_array(dataset.samples[0][0])
    assert array.dtype == np.uint8 and array.ndim == 3 and array.shape[2] == 3
    assert 40 < array.std() < 120  # a photo, not a flat or noise image


def test_without_scikit_image_it_refuses_unless_synthetic_is_asked_for(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "skimage", None)  # `import skimage.data` raises ImportError
    monkeypatch.setitem(sys.modules, "skimage.data", None)
    with pytest.raises(RuntimeError, match=r"scikit-image is not installed: pip install 'fastprep\[photos\]' \(or: "
                                           r"pip install scikit-image\); or pass synthetic=True"):
        write_photo_folder(tmp_path / "a", sizes=(32,))
    assert not (tmp_path / "a").exists()
    assert write_photo_folder(tmp_path / "b", sizes=(32,), names=("coffee",), synthetic=True) == "synthetic (asked for)"
    assert sorted(os.listdir(tmp_path / "b" / "coffee")) == ["coffee_32.jpg", "coffee_32_mirrored.jpg"]
    with pytest.raises(ValueError, match=r"expected synthetic to be a bool, got 'yes'"):
        write_photo_folder(tmp_path / "c", synthetic="yes")


def test_bad_folders_say_what_is_wrong(tmp_path):
    with pytest.raises(ValueError, match="is not a directory"):
        ImageFolder(tmp_path / "missing")
    (tmp_path / "empty_class").mkdir()
    with pytest.raises(ValueError, match="no images"):
        ImageFolder(tmp_path)
    with pytest.raises(ValueError, match=r"expected sizes to be positive ints, got \(256, 0\)"):
        write_photo_folder(tmp_path, sizes=(256, 0))


def fused_crop():
    return T.seed_workload(128, layout="HWC")


@pytest.fixture
def one_torch_thread():
    # On 2 cores busy with other jobs, torch's 2 OpenMP threads stall each other for up to 100s
    # of ms at every parallel op (measured here: a 0.2 ms decode + mean taking 24 ms); the steps
    # this test times are single-threaded work.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("kind", ["DataLoader", "fastprep.Loader"])
def test_with_fast_transforms_decoding_starves_the_step(photo_root, kind, one_torch_thread):
    root, _ = photo_root
    if kind == "DataLoader":
        dataset = T.SeedByIndex(ImageFolder(root, transform=fused_crop(), loader=decode_array), seed=0)
        loader = DataLoader(dataset, batch_size=4, shuffle=True, collate_fn=fastprep.compact_collate)
    else:
        loader = fastprep.Loader(ImageFolder(root, loader=decode_array), 4, transform=fused_crop(), shuffle=True,
                                 threads=1, seed=0)
    seen = []

    def step(batch):  # what a model would eat: float images /255, int64 labels
        images, labels = batch
        seen.append((images.dtype, tuple(images.shape), labels.dtype))
        return images.mean()

    report = find_bottleneck(loader, step, max_seconds=2.0)
    assert report.verdict == "raw loading", report.table()
    assert "verdict: raw loading (reading and decoding raw samples)" in report.table()
    assert set(seen) == {(torch.float32, (4, 3, 128, 128), torch.int64)}
