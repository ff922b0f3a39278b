"""A pack with one shard missing, truncated, extended, replaced (by another shard of the pack, by a
shard of another pack, by junk), emptied or turned into a folder: the records of that shard raise
a ShardFormatError naming the pack, the shard, the record, its source and the cause; every other
record reads its intact bits, through pickling (DataLoader workers) and from many threads; the
shard put back reads again."""

import os
import pickle
import re
import shutil
import threading

import pytest
import torch

import fastprep.io as fio

from helpers.jpeg_photos import needs_decoder, photo_jpeg

pytestmark = [needs_decoder, pytest.mark.one_backend]

N, PER_SHARD = 9, 3
BAD = 1  # the damaged shard: records 3, 4, 5


def _items(seed):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randint(0, 256, (3, 24, 20), dtype=torch.uint8, generator=g), i % 3) for i in range(N)]


@pytest.fixture(scope="module")
def packs(tmp_path_factory):
    """Two raw packs of same-shaped images, 3 shards of 3 records each, every shard the same size (so a
    swapped shard passes the size check and meets the header's); they differ in content and options."""
    root = tmp_path_factory.mktemp("packs")
    fio.pack(_items(0), root / "a", mode="raw", progress=False, shard_bytes=4096)
    fio.pack(_items(1), root / "b", mode="raw", progress=False, shard_bytes=4096, quality=80)
    ds = fio.PackedDataset(root / "a")
    assert ds._entries["shard"].tolist() == [k for k in range(N // PER_SHARD) for _ in range(PER_SHARD)]
    assert len({os.path.getsize(root / "a" / name) for name, _ in ds._shards}) == 1
    return root


def _shard(p, k):
    return p / f"shard-{k:05d}.fpk"


def _replace(path, data):
    path.unlink(missing_ok=True)
    path.write_bytes(data)


def _flip(path, at):
    data = bytearray(path.read_bytes())
    data[at] ^= 0x10
    path.write_bytes(bytes(data))


# (name, damage(pack folder, the other pack's folder), what the error says after the shard's name: SIZE,
# SIZE-100 and SIZE+7 stand for the shard's size as packed and its size after the damage)
DAMAGES = [
    ("missing", lambda p, o: _shard(p, BAD).unlink(), r"is missing"),
    ("truncated", lambda p, o: _replace(_shard(p, BAD), _shard(p, BAD).read_bytes()[:-100]),
     r"is SIZE-100 bytes where the index says SIZE: truncated or replaced"),
    ("extended", lambda p, o: _replace(_shard(p, BAD), _shard(p, BAD).read_bytes() + bytes(7)),
     r"is SIZE+7 bytes where the index says SIZE: extended or replaced"),
    ("zero bytes", lambda p, o: _replace(_shard(p, BAD), b""), r"is 0 bytes where the index says SIZE: truncated or replaced"),
    ("a directory", lambda p, o: (_shard(p, BAD).unlink(), _shard(p, BAD).mkdir()), r"is a directory, not a shard file"),
    ("another shard of the pack", lambda p, o: shutil.copyfile(_shard(p, 0), _shard(p, BAD)),
     r"is shard 0 of this pack, not shard 1: replaced"),
    ("a shard of another pack", lambda p, o: shutil.copyfile(_shard(o, BAD), _shard(p, BAD)),
     r"is shard 1 of another pack \(its pack id [0-9a-f]{32}, this pack's [0-9a-f]{32}\): replaced"),
    ("a corrupt header", lambda p, o: _flip(_shard(p, BAD), 20), r": header checksum mismatch: the file is corrupt"),
    ("junk of the right size", lambda p, o: _replace(_shard(p, BAD), b"x" * _shard(p, BAD).stat().st_size),
     r": does not start with b'FPSHARD\\x00': not a fastprep pack file"),
    ("unreadable", lambda p, o: _shard(p, BAD).chmod(0), r"cannot be opened: Permission denied"),
]


@pytest.mark.parametrize(("damage", "says"), [d[1:] for d in DAMAGES], ids=[d[0] for d in DAMAGES])
def test_a_damaged_shard_fails_only_its_records_naming_it(packs, tmp_path, damage, says):
    if damage is DAMAGES[-1][1] and os.geteuid() == 0:
        pytest.skip("root reads a file whatever its permissions")
    good = fio.PackedDataset(packs / "a")
    p = tmp_path / "a"
    shutil.copytree(packs / "a", p)
    original = _shard(p, BAD).read_bytes()
    size = len(original)
    for mark, value in (("SIZE-100", size - 100), ("SIZE+7", size + 7), ("SIZE", size)):
        says = says.replace(mark, str(value))
    damage(p, packs / "b")
    ds = fio.PackedDataset(p)
    for i in range(N):
        reads = (lambda i=i: ds.load_raw(i)[0].decode(), lambda i=i: ds[i][0], lambda i=i: ds.record(i),
                 lambda i=i: pickle.loads(pickle.dumps(ds)).load_raw(i)[0].decode((2, 3, 10, 9)))
        if i // PER_SHARD == BAD:
            for read in reads:
                with pytest.raises(fio.ShardFormatError) as err:
                    read()
                want = rf"PackedDataset: record {i} \(item {i}\) of pack {re.escape(str(p))} is unreadable: " \
                       rf"shard-00001.fpk {says}".replace("shard-00001.fpk :", "shard-00001.fpk:")
                if read is not reads[2]:  # load_raw and ds[i], the source's reads, say how to skip (not record(i))
                    want += r" \(pass on_error='skip' to skip bad files, or 'warn'\)"
                assert re.fullmatch(want, str(err.value)), str(err.value)
        else:
            assert torch.equal(ds.load_raw(i)[0].decode(), good.load_raw(i)[0].decode()), i
            assert torch.equal(ds[i][0], good[i][0]), i
            assert torch.equal(pickle.loads(pickle.dumps(ds)).load_raw(i)[0].decode((2, 3, 10, 9)),
                               good.load_raw(i)[0].decode((2, 3, 10, 9))), i
    with pytest.raises(fio.ShardFormatError, match=r"record 3 \(item 3\)"):
        ds.verify_records()
    with pytest.raises(fio.ShardFormatError, match=r"PackedDataset: shard 1 of pack .* is unreadable: shard-00001.fpk"):
        ds.check_shards()
    if _shard(p, BAD).is_dir():
        _shard(p, BAD).rmdir()
    elif _shard(p, BAD).exists():
        _shard(p, BAD).chmod(0o644)
    _replace(_shard(p, BAD), original)  # put back: the same dataset reads it (a failure is not remembered)
    assert torch.equal(ds.load_raw(4)[0].decode(), good.load_raw(4)[0].decode())
    ds.check_shards()
    ds.verify_records()


def test_a_missing_shard_keeps_the_errno_and_names_the_source_file(tmp_path):
    """A folder's pack: the error names the record's file; the OSError is its __cause__."""
    (tmp_path / "src" / "k").mkdir(parents=True)
    for i in range(4):
        (tmp_path / "src" / "k" / f"{i}.jpg").write_bytes(photo_jpeg("coffee", "4:2:0", False, (100 + 8 * i, 120)))
    fio.pack(tmp_path / "src", tmp_path / "p", progress=False, shard_bytes=4096)
    ds = fio.PackedDataset(tmp_path / "p")
    last = len(ds) - 1
    k = int(ds._entries["shard"][last])
    assert k > 0
    _shard(tmp_path / "p", k).unlink()
    with pytest.raises(fio.ShardFormatError, match=rf"record {last} \(k/{last}.jpg\) of pack .*p is unreadable: "
                                                   rf"shard-0000{k}.fpk is missing") as err:
        ds.load_raw(last)
    assert isinstance(err.value.__cause__, FileNotFoundError)
    assert ds.load_raw(0)[0].decode().shape[0] == 3
    with pytest.raises(fio.ShardFormatError, match=rf"PackedDataset: shard {k} of pack .* is unreadable"):
        ds.shard_tensor(k)


def test_threads_map_each_shard_once_and_read_the_same_bits(packs):
    ds, good = fio.PackedDataset(packs / "a"), fio.PackedDataset(packs / "a")
    got, barrier = {}, threading.Barrier(6)

    def read(t):
        barrier.wait()
        got[t] = [ds.load_raw(i)[0].decode() for i in range(N)]

    threads = [threading.Thread(target=read, args=(t,)) for t in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for images in got.values():
        assert all(torch.equal(a, good.load_raw(i)[0].decode()) for i, a in enumerate(images))
    for images in got.values():  # raw windows are views of the map: one map per shard, whichever thread made it
        assert [a.data_ptr() for a in images] == [a.data_ptr() for a in got[0]]


def test_dataloader_workers_read_the_healthy_shards_and_name_the_missing_one(packs, tmp_path):
    p = tmp_path / "a"
    shutil.copytree(packs / "a", p)
    _shard(p, BAD).unlink()
    ds, good = fio.PackedDataset(p), fio.PackedDataset(packs / "a")
    ds.load_raw(0)  # shard 0 mapped before the workers start; they map the others themselves
    healthy = [i for i in range(N) if i // PER_SHARD != BAD]
    loader = torch.utils.data.DataLoader(ds, batch_size=None, sampler=healthy, num_workers=2)
    for i, (image, label) in zip(healthy, loader):
        assert torch.equal(image, good[i][0]) and label == good[i][1]
    with pytest.raises(fio.ShardFormatError, match=r"record 4 \(item 4\) of pack .* is unreadable: shard-00001.fpk "
                                                   r"is missing"):
        next(iter(torch.utils.data.DataLoader(ds, batch_size=None, sampler=[4], num_workers=1)))
