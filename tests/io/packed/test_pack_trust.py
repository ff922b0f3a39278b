"""A pack's identity is its content and meaning: an ImageFolder packs the labels, classes and
class_to_idx the dataset holds (not its folder's), and only the unchanged folder is "the folder";
the same items under other classes are another pack; two datasets that share item 0 get other
pack ids; overwrite=True removes only a pack's own files; the lock never writes through a link."""

import os
import struct

import numpy as np
import pytest

import fastprep.io as fio
import fastprep.io._pack_format as fmt
from fastprep.io.packed._lock import LOCK_NAME

from helpers.jpeg_photos import needs_decoder, photo_jpeg

pytestmark = [needs_decoder, pytest.mark.one_backend]


def folder(root):
    for i in range(6):
        (root / f"k{i % 3}").mkdir(parents=True, exist_ok=True)
        (root / f"k{i % 3}" / f"{i}.jpg").write_bytes(photo_jpeg("chelsea", "4:2:0", False, (60 + i, 80)))
    return root


class Items:
    def __init__(self, items, classes=None, class_to_idx=None):
        self.items = items
        if classes is not None:
            self.classes = classes
            self.class_to_idx = class_to_idx or {c: i for i, c in enumerate(classes)}

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def index_id(dest):
    with open(os.path.join(dest, fmt.INDEX_NAME), "rb") as f:
        return f.read(fmt.HEADER_BYTES)[16:32]


def relabel(ds, paths, order):
    """`ds` given classes in `order` and `paths` labelled by their folder's place in it."""
    ds.classes, ds.class_to_idx = order, {c: i for i, c in enumerate(order)}
    ds.samples = [(p, order.index(os.path.basename(os.path.dirname(p)))) for p in paths]
    ds.targets = [t for _, t in ds.samples]
    return ds


def reordered(root):
    """An ImageFolder whose class order was fixed by another dataset (k2, k0, k1): its own labels."""
    ds = fio.ImageFolder(root)
    return relabel(ds, [p for p, _ in ds.samples], ["k2", "k0", "k1"])


def test_an_image_folder_with_its_own_labels_packs_them_and_its_classes(tmp_path):
    root = folder(tmp_path / "src")
    ds = reordered(root)
    fio.pack(ds, tmp_path / "p", progress=False)
    got = fio.PackedDataset(tmp_path / "p")
    assert got.targets == ds.targets != fio.ImageFolder(root).targets
    assert got.classes == ["k2", "k0", "k1"] and got.class_to_idx == ds.class_to_idx
    assert got.options["mode"] == "jpeg" and fio.pack(ds, tmp_path / "p", progress=False).resumed == 6  # returned
    with pytest.raises(fio.PackSourceError, match=r"holds a pack of another source: it packed a samples list "
                                                  r"of fastprep\.io\.ImageFolder .* this is a folder"):
        fio.pack(root, tmp_path / "p", progress=False)  # the folder itself is another pack


def test_a_subset_of_samples_packs_only_those_files(tmp_path):
    root = folder(tmp_path / "src")
    ds = fio.ImageFolder(root)
    ds.samples, ds.targets = ds.samples[::2], ds.targets[::2]
    fio.pack(ds, tmp_path / "p", progress=False)
    got = fio.PackedDataset(tmp_path / "p")
    assert len(got) == 3 and got.targets == ds.targets


def test_the_unchanged_image_folder_is_the_folder(tmp_path):
    root = folder(tmp_path / "src")
    fio.pack(fio.ImageFolder(root), tmp_path / "a", progress=False)
    fio.pack(root, tmp_path / "b", progress=False)
    assert index_id(tmp_path / "a") == index_id(tmp_path / "b")


def test_targets_that_disagree_with_samples_are_refused_by_name(tmp_path):
    ds = fio.ImageFolder(folder(tmp_path / "src"))
    ds.targets = [(t + 1) % 3 for t in ds.targets]
    with pytest.raises(fio.PackSourceError, match=r"ImageFolder's targets disagree with its samples at item 0 "
                                                  r"\(targets\[0\] = 1, samples\[0\] = \(.*0.jpg', 0\);"):
        fio.pack(ds, tmp_path / "p", progress=False)
    assert not (tmp_path / "p" / fmt.INDEX_NAME).exists()


@pytest.mark.parametrize("what", ["classes", "class_to_idx"])
def test_the_same_items_under_other_classes_are_another_pack(tmp_path, what):
    items = [(np.full((8, 8, 3), i, np.uint8), i % 2) for i in range(4)]
    fio.pack(Items(items, ["cat", "dog"]), tmp_path / "p", progress=False)
    other = Items(items, ["dog", "cat"]) if what == "classes" else Items(items, ["cat", "dog"], {"cat": 1, "dog": 0})
    with pytest.raises(fio.PackSourceError, match=rf"holds a pack of another source: other {what} "):
        fio.pack(other, tmp_path / "p", progress=False)
    fio.pack(other, tmp_path / "p", progress=False, overwrite=True)
    got = fio.PackedDataset(tmp_path / "p")
    assert got.classes == other.classes and got.class_to_idx == other.class_to_idx


def test_datasets_that_share_item_0_get_other_pack_ids(tmp_path):
    a = [(np.full((8, 8, 3), v, np.uint8), 0) for v in (1, 2, 3)]
    b = a[:1] + [(np.full((8, 8, 3), v, np.uint8), 0) for v in (7, 8)]
    fio.pack(Items(a), tmp_path / "a", progress=False, mode="raw")
    fio.pack(Items(b), tmp_path / "b", progress=False, mode="raw")
    assert index_id(tmp_path / "a") != index_id(tmp_path / "b")
    for name in ("shard-00000.fpk", fmt.INDEX_NAME):  # every shard carries the finished pack's id
        assert fmt.read_shard_header((tmp_path / "a" / "shard-00000.fpk").read_bytes()[:64], name)[1] == \
            index_id(tmp_path / "a")


def test_a_format_2_pack_still_reads_and_pack_names_its_format(tmp_path):
    items = [(np.full((8, 8, 3), v, np.uint8), 0) for v in (1, 2)]
    fio.pack(Items(items), tmp_path / "p", progress=False, mode="raw")
    shard = tmp_path / "p" / "shard-00000.fpk"
    data = bytearray(shard.read_bytes())
    struct.pack_into("<I", data, 8, 2)  # a format 2 header (what an older fastprep wrote)
    struct.pack_into("<I", data, 60, fio_crc(bytes(data[:60])))
    shard.write_bytes(bytes(data))
    assert fio.PackedDataset(tmp_path / "p")[1][1] == 0
    with pytest.raises(fio.PackSourceError, match=r"written by an older fastprep \(pack format 2\), which did not "
                                                  r"record its classes or every item in its pack id \(it still "
                                                  r"reads as it is\); pass overwrite=True"):
        fio.pack(Items(items), tmp_path / "p", progress=False, mode="raw")


def fio_crc(data):
    return fmt.crc32c(data)


def test_overwrite_keeps_a_users_file_named_like_a_shard(tmp_path):
    items = [(np.full((8, 8, 3), v, np.uint8), 0) for v in (1, 2)]
    fio.pack(Items(items), tmp_path / "p", progress=False)
    mine = tmp_path / "p" / "shard-00007.fpk"
    mine.write_bytes(b"my own notes")
    for overwrite in (True, False):  # a resume's scan would have removed it as a damaged shard
        with pytest.raises(fio.PackSourceError, match=r"shard-00007.fpk' is not a file fastprep's pack wrote .*"
                                                      r"move it away or choose another DEST"):
            fio.pack(Items(items[::-1] if overwrite else items), tmp_path / "p", progress=False, overwrite=overwrite)
    assert mine.read_bytes() == b"my own notes"
    assert len(fio.PackedDataset(tmp_path / "p")) == 2  # nothing of the pack was removed either
    mine.unlink()
    fio.pack(Items(items[::-1]), tmp_path / "p", progress=False, overwrite=True)
    assert fio.PackedDataset(tmp_path / "p")[0][0][0, 0, 0] == 2


def test_overwrite_removes_an_interrupted_packs_shards(tmp_path):
    items = [(np.full((40, 40, 3), v, np.uint8), 0) for v in range(6)]
    fio.pack(Items(items), tmp_path / "p", progress=False, shard_bytes=4096, mode="raw")
    os.remove(tmp_path / "p" / fmt.INDEX_NAME)
    (tmp_path / "p" / "shard-00009.fpk.tmp").write_bytes(b"")  # a kill just after the open
    fio.pack(Items(items[::-1]), tmp_path / "p", progress=False, overwrite=True, mode="raw")
    assert fio.PackedDataset(tmp_path / "p")[0][0][0, 0, 0] == 5
    assert not (tmp_path / "p" / "shard-00009.fpk.tmp").exists()


def test_a_symlinked_lock_file_is_never_written_through(tmp_path):
    target = tmp_path / "precious.txt"
    target.write_text("keep me")
    (tmp_path / "p").mkdir()
    os.symlink(target, tmp_path / "p" / LOCK_NAME)
    with pytest.raises(fio.PackLockedError, match=r"the lock file .*\.pack\.lock is a symbolic link \(to "
                                                  r".*precious.txt'\); pack never writes through one"):
        fio.pack(Items([(np.zeros((8, 8, 3), np.uint8), 0)]), tmp_path / "p", progress=False)
    assert target.read_text() == "keep me"
    assert os.path.islink(tmp_path / "p" / LOCK_NAME)


def _torchvision_like(root, order):
    """torchvision's ImageFolder as pack sees it (torchvision is not installed here): DatasetFolder's
    __getitem__ and default_loader, by their module and names; a class order of the caller's."""
    def default_loader(path):
        raise AssertionError("pack reads the files itself")

    def getitem(self, i):
        path, target = self.samples[i]
        return self.loader(path), target

    for f, module, name in ((default_loader, "torchvision.datasets.folder", "default_loader"),
                            (getitem, "torchvision.datasets.folder", "DatasetFolder.__getitem__")):
        f.__module__, f.__qualname__, f.__name__ = module, name, name.split(".")[-1]
    cls = type("ImageFolder", (), {"__getitem__": getitem, "__len__": lambda self: len(self.samples)})
    ds = cls()
    ds.root, ds.loader, ds.transform, ds.target_transform = str(root), default_loader, None, None
    return relabel(ds, [p for p, _ in fio.ImageFolder(root).samples], order)


def test_a_torchvision_image_folder_packs_its_files_with_its_own_labels(tmp_path):
    root = folder(tmp_path / "src")
    ds = _torchvision_like(root, ["k1", "k2", "k0"])
    summary = fio.pack(ds, tmp_path / "p", progress=False)
    assert summary.kinds["jpeg_transcoded"].count == 6  # its files, not its loader's images
    got = fio.PackedDataset(tmp_path / "p")
    assert got.targets == ds.targets and got.classes == ["k1", "k2", "k0"]
    fio.pack(_torchvision_like(root, ["k0", "k1", "k2"]), tmp_path / "same", progress=False)
    fio.pack(root, tmp_path / "folder", progress=False)
    assert index_id(tmp_path / "same") == index_id(tmp_path / "folder")  # the unchanged one is the folder
