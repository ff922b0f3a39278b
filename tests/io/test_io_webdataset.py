"""fastprep.io.WebDataset / write_webdataset against the webdataset library: its ShardWriter's
shards read here and ours read there; transforms with the decoded images' bits in a DataLoader
with 0 and 2 workers and through the thread-reader contract; shuffling reproducible per (seed,
epoch); every sample exactly once across ranks and readers; corrupt shards named."""

import io
import tarfile
import threading

import pytest
import torch
from torch.utils.data import DataLoader

import fastprep.io as fio
from fastprep.core._rng import item_seed, thread_seeded

from helpers.jpeg_photos import grey_jpeg, needs_decoder, photo, photo_jpeg, pil_decode
from helpers.source_checks import SEED, expected_sample, train_tf

wds = pytest.importorskip("webdataset")
pytestmark = [needs_decoder, pytest.mark.one_backend,
              # webdataset's readers leave their shard files to the garbage collector
              pytest.mark.filterwarnings("ignore::ResourceWarning"),
              pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")]

N = 10
KINDS = [("astronaut", "4:2:0", False), ("coffee", "4:4:4", True), ("chelsea", "4:2:2", False), ("rocket", "4:2:0", True)]


def _jpeg(i: int) -> bytes:
    if i == 7:
        return grey_jpeg(False, (90, 110))
    name, sub, progressive = KINDS[i % 4]
    return photo_jpeg(name, sub, progressive, (80 + 7 * i, 120 - 3 * i))


def _png() -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(photo("rocket")[:70, :90]).save(buf, format="PNG")
    return buf.getvalue()


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """webdataset's ShardWriter: 10 samples, 3 a shard (4 shards); sample 4 holds a PNG."""
    root = tmp_path_factory.mktemp("wds")
    with wds.ShardWriter(str(root / "lib-%03d.tar"), maxcount=3, verbose=0) as sink:
        for i in range(N):
            image = {"png": _png()} if i == 4 else {"jpg": _jpeg(i)}
            sink.write({"__key__": f"s{i:03d}", **image, "cls": i, "json": {"i": i}})
    return sorted(str(p) for p in root.glob("lib-*.tar"))


def _decoded(i: int) -> torch.Tensor:
    return torch.from_numpy(pil_decode(_png() if i == 4 else _jpeg(i))).permute(2, 0, 1)


def test_reads_the_shards_webdatasets_shard_writer_wrote(shards):
    ds = fio.WebDataset(shards, seed=0)
    raw = list(ds.raw_samples(ds.shards_for()))
    assert [k for k, _ in raw] == [f"s{i:03d}" for i in range(N)]
    for i, (key, (image, label)) in enumerate(raw):
        assert label == i and (isinstance(image, fio.JpegFile) or i == 4)
        assert torch.equal(image.decode() if i != 4 else image, _decoded(i)), key
    assert f"{shards[0]}:s000.jpg" in repr(raw[0][1][0])
    whole = fio.WebDataset(shards[1], fields=None, roi=False, layout="HWC")
    first = next(iter(whole))
    assert first["__key__"] == "s003" and first["json"] == {"i": 3} and first["cls"] == 3
    assert torch.equal(first["jpg"], _decoded(3).permute(1, 2, 0))


def test_shards_fastprep_writes_read_in_webdataset(tmp_path):
    samples = [(fio.JpegFile(_jpeg(i)), i) for i in range(5)] + [(_decoded(5), 5)]
    paths = fio.write_webdataset(samples, str(tmp_path / "fp-%02d.tar"), maxcount=4)
    assert [p.rsplit("/", 1)[1] for p in paths] == ["fp-00.tar", "fp-01.tar"] and not list(tmp_path.glob("*.partial"))
    got = list(wds.WebDataset(paths, shardshuffle=False).to_tuple("__key__", "jpg", "cls"))
    assert [(k, int(c)) for k, _, c in got] == [(f"{i:08d}", i) for i in range(6)]
    assert all(data == _jpeg(i) for i, (_, data, _) in enumerate(got[:5]))  # a JpegFile's bytes, not re-encoded
    pixels = list(wds.WebDataset(paths[1:], shardshuffle=False).decode("rgb8").to_tuple("jpg"))[-1][0]
    assert (pixels == fio.decode_jpeg(got[5][1], layout="HWC").numpy()).all()  # encoded at q90 by Pillow
    ours = [(k, int(label)) for k, (_, label) in fio.WebDataset(paths).raw_samples(paths)]
    assert ours == [(f"{i:08d}", i) for i in range(6)]
    with pytest.raises(ValueError, match=r"write_webdataset: sample 3: expected an int for a .cls member, got 'x'"):
        fio.write_webdataset([(fio.JpegFile(_jpeg(i)), "x" if i == 3 else i) for i in range(5)],
                             str(tmp_path / "bad-%02d.tar"), maxcount=2)
    assert sorted(p.name for p in tmp_path.glob("bad-*")) == ["bad-00.tar"]  # complete shards only


def test_shards_written_from_a_dataset_give_the_bits_seed_by_index_gives_it(tmp_path):
    samples = [(fio.JpegFile(_jpeg(i)), i) for i in range(6)]  # a map-style dataset: keys are its indices
    paths = fio.write_webdataset(samples, str(tmp_path / "d-%02d.tar"), maxcount=4)
    got = {int(label): image for image, label in fio.WebDataset(paths, transform=train_tf(), seed=SEED)}
    assert all(torch.equal(got[i], expected_sample(fio.decode_jpeg(_jpeg(i)), item_seed(SEED, i, 0))) for i in range(6))


@pytest.mark.parametrize("workers", [0, 2])
def test_transforms_give_the_decoded_images_bits_in_a_dataloader(shards, workers):
    ds = fio.WebDataset(shards, transform=train_tf(), shuffle=True, buffer=4, seed=5)
    ds.set_epoch(2)
    got = {int(label): image for image, label in DataLoader(ds, batch_size=None, num_workers=workers)}
    assert sorted(got) == list(range(N))
    for i in range(N):
        assert torch.equal(got[i], expected_sample(_decoded(i), ds.sample_seed(f"s{i:03d}", 2))), i


@pytest.mark.parametrize("threads", [1, 2])
def test_the_loader_reads_the_shards_in_order_seeded_by_position(shards, threads, monkeypatch):
    """fastprep.Loader over the stream (the transform given to the Loader, fused there): sample k of
    the stream gets the seed item k of a map-style dataset gets, whatever the threads. It reads
    iter_raw() (JpegFiles: each crop decodes its window), never the decoded stream."""
    import fastprep

    assert isinstance(next(iter(fio.WebDataset(shards).iter_raw()))[0], fio.JpegFile)
    monkeypatch.setattr(fio.WebDataset, "__iter__", lambda self: pytest.fail("decoded whole by __iter__"))
    loader = fastprep.Loader(fio.WebDataset(shards, seed=5), 3, transform=train_tf(), seed=SEED, threads=threads)
    images, labels = [], []
    for x, y in loader:
        images.append(x.clone())
        labels += y.tolist()
    assert labels == list(range(N))  # the shards in order, unshuffled
    want = torch.stack([expected_sample(_decoded(i), item_seed(SEED, i, 0)) for i in range(N)])
    assert torch.equal(torch.cat(images), want)


def test_a_thread_based_reader_gets_the_same_samples_through_the_contract(shards):
    """What a thread-based loader does: one reader per thread over shards_for(part), the
    transform in that thread under thread_seeded(sample_seed(key)): the DataLoader's bits."""
    ds = fio.WebDataset(shards, transform=train_tf(), shuffle=True, buffer=4, seed=5)
    ds.set_epoch(2)
    got, lock = {}, threading.Lock()

    def reader(part):
        for key, raw in ds.raw_samples(ds.shards_for(2, part, 2), 2):
            with thread_seeded(ds.sample_seed(key, 2)):
                image, label = ds.apply_transform(raw)
            with lock:
                got[label] = image

    threads = [threading.Thread(target=reader, args=(p,)) for p in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got) == list(range(N))
    assert all(torch.equal(got[i], expected_sample(_decoded(i), ds.sample_seed(f"s{i:03d}", 2))) for i in range(N))


def test_shuffling_is_reproducible_per_seed_and_epoch_and_splits_cover_every_sample_once(shards):
    def order(epoch, rank=0, world=1, part=0, parts=1, seed=3):
        ds = fio.WebDataset(shards, shuffle=True, buffer=4, seed=seed, rank=rank, world_size=world)
        return [k for k, _ in ds.raw_samples(ds.shards_for(epoch, part, parts), epoch)]

    assert order(0) == order(0) and sorted(order(0)) == [f"s{i:03d}" for i in range(N)]
    assert order(1) != order(0) and order(0, seed=4) != order(0)
    split = [order(1, r, 2, p, 2) for r in range(2) for p in range(2)]
    assert sorted(k for part in split for k in part) == sorted(order(1)) and all(split)
    ranks3 = [order(1, r, 3, p, 2) for r in range(3) for p in range(2)]  # 4 shards, 6 readers: 2 idle
    assert sorted(k for part in ranks3 for k in part) == sorted(order(1)) and sum(not p for p in ranks3) == 2
    with pytest.raises(ValueError, match=r"WebDataset: 4 shards for 5 ranks: rank 4 and later would read nothing"):
        fio.WebDataset(shards, rank=0, world_size=5)


def test_the_rank_defaults_to_torchruns_environment(shards, monkeypatch):
    assert (fio.WebDataset(shards).rank, fio.WebDataset(shards).world_size) == (0, 1)
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    ds = fio.WebDataset(shards)
    assert (ds.rank, ds.world_size) == (1, 2) and ds.shards_for(0) == shards[1::2]
    with pytest.raises(ValueError, match=r"WebDataset: give rank and world_size together, got rank=0, world_size=None"):
        fio.WebDataset(shards, rank=0)
    with pytest.raises(ValueError, match=r"WebDataset: expected 0 <= rank < world_size, got rank=2, world_size=2"):
        fio.WebDataset(shards, rank=2, world_size=2)


def _rewrite(path, cut=None, patch=None):
    data = bytearray(open(path, "rb").read())
    if patch is not None:
        offset, value = patch
        data[offset:offset + len(value)] = value
    path = path.replace("lib-", f"bad{cut}-{patch and patch[0]}-")
    with open(path, "wb") as f:
        f.write(bytes(data[:cut]))
    return path


def test_corrupt_shards_raise_naming_the_shard_and_member(shards, tmp_path):
    with tarfile.open(shards[0]) as tar:
        members = tar.getmembers()  # s000.cls, s000.jpg, s000.json, s001.cls, ...
    jpg_at, last = members[1].offset_data, members[-1]
    cases = [  # cut inside a member; cut where a member ends (no end-of-archive marker); a header's checksum broken
        (_rewrite(shards[0], cut=jpg_at + 300), r"-000.tar: corrupt or truncated shard after member 's000.cls': "
                                                r"unexpected end of data"),
        (_rewrite(shards[0], cut=last.offset_data + 512), r"-000.tar: corrupt or truncated shard after member "
                                                          r"'s002.json': truncated: the file ends at byte"),
        (_rewrite(shards[0], patch=(members[4].offset + 148, b"9999")), r"-000.tar: corrupt or truncated shard "
                                                                        r"after member 's001.cls': corrupt tar header"),
    ]
    for path, match in cases:
        with pytest.raises(ValueError, match=match):
            list(fio.WebDataset(path))
    garbled = _rewrite(shards[0], patch=(jpg_at + 700, b"\xff\xd9" * 8))
    with pytest.raises(ValueError, match=r"-000.tar:s000.jpg: corrupt JPEG"):
        list(fio.WebDataset(garbled, strict=True))
    with pytest.raises(ValueError, match=r"lib-000.tar: sample 's000' has no 'txt' member \(it has \['cls', 'jpg', 'json'\]\)"):
        next(iter(fio.WebDataset(shards[0], fields=("jpg", "txt"))))
    with wds.TarWriter(str(tmp_path / "text.tar")) as sink:
        sink.write({"__key__": "t0", "jpg": _jpeg(0), "cls": b"cat"})
    with pytest.raises(ValueError, match=r"text.tar:t0.cls: cannot decode the member \(3 bytes\): invalid literal"):
        list(fio.WebDataset(str(tmp_path / "text.tar")))
    with pytest.raises(FileNotFoundError, match=r"WebDataset: 1 of 2 shards are not files: \['.*nope.tar'\]"):
        fio.WebDataset([shards[0], str(tmp_path / "nope.tar")])
    with pytest.raises(ValueError, match=r"WebDataset: expected urls to be a string .* got 3"):
        fio.WebDataset(3)
    with pytest.raises(ValueError, match=r"WebDataset: expected shuffle to be a bool, got 'yes'"):
        fio.WebDataset(shards, shuffle="yes")


def test_brace_ranges_and_pipe_urls(shards):
    root = shards[0].rsplit("/", 1)[0]
    ds = fio.WebDataset(f"{root}/lib-{{000..001}}.tar::{root}/lib-00{{2,3}}.tar")  # a range, '::', a list
    assert ds.shards == shards
    piped = fio.WebDataset([f"pipe:cat {shards[1]}"], open_shard=None)
    assert [k for k, _ in piped.raw_samples(piped.shards)] == ["s003", "s004", "s005"]
    failing = fio.WebDataset(["pipe:cat /nonexistent/x.tar"])
    with pytest.raises(ValueError, match=r"pipe:cat /nonexistent/x.tar: corrupt or truncated shard"):
        list(failing)
