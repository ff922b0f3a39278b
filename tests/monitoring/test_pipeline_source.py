"""fastprep.monitoring._pipeline tells the source from what the datasets and images declare
(``source_kind``), not by importing their classes: the same words as before for fastprep's, and a
dataset of your own can say what it is."""

import torch

import fastprep.io as fio
from fastprep.monitoring._pipeline import source_of_dataset, source_of_image

from helpers.jpeg_photos import photo, photo_jpeg


def _packs(tmp_path):
    jpegs = [(photo_jpeg("astronaut", "4:2:0", False, (40, 48)), 0)]
    fio.pack(jpegs, tmp_path / "jpeg", progress=False)
    fio.pack([(torch.from_numpy(photo("chelsea")[:50, :40].copy()).permute(2, 0, 1), 1)], tmp_path / "raw",
             mode="raw", progress=False)
    return fio.PackedDataset(tmp_path / "jpeg"), fio.PackedDataset(tmp_path / "raw")


def test_fastprep_datasets_declare_their_source(tmp_path):
    jpeg, raw = _packs(tmp_path)
    remote = fio.PackedDataset(f"file://{tmp_path / 'jpeg'}", cache_dir=tmp_path / "cache")
    assert source_of_dataset(jpeg) == ("packed-jpeg", jpeg)
    assert source_of_dataset(raw) == ("packed-raw", raw)
    assert source_of_dataset(remote) == ("remote-pack", remote)
    assert source_of_dataset(torch.utils.data.Subset(remote, [0])) == ("remote-pack", remote)
    assert source_of_image(jpeg.load_raw(0)[0], jpeg) == "packed-jpeg"
    assert source_of_image(raw.load_raw(0)[0], raw) == "packed-raw"
    assert source_of_image(remote.load_raw(0)[0], remote) == "remote-pack"
    folder = tmp_path / "folder" / "cat"
    folder.mkdir(parents=True)
    (folder / "1.jpg").write_bytes(photo_jpeg("astronaut", "4:2:0", False, (40, 48)))
    for roi, kind in ((True, "jpeg-files"), (False, "files")):
        ds = fio.ImageFolder(tmp_path / "folder", roi=roi)
        assert source_of_dataset(ds)[0] == kind
    assert source_of_image(fio.ImageFolder(tmp_path / "folder", roi=True).load_raw(0)[0], None) == "jpeg-files"


def test_a_dataset_of_your_own_can_declare_its_source():
    class Mine(torch.utils.data.Dataset):
        source_kind = "windowed"

    class Unknown(torch.utils.data.Dataset):
        source_kind = "a word the monitor does not know"  # not declared: told from its type

    mine, unknown = Mine(), Unknown()
    assert source_of_dataset(mine) == ("windowed", mine)
    assert source_of_dataset(unknown) == ("other", unknown)
