"""The newcomer's path, end to end (issue 34): a folder of photos as users have them (JPEGs of
several sizes, a PNG, a greyscale JPEG, a CMYK JPEG, an EXIF-rotated JPEG and one truncated file),
a torchvision v2 pipeline ported by changing its import, loaded, trained on, packed, diagnosed,
monitored, and read by two ranks started as torchrun starts them, with no edit beyond the port.

The reference for every pixel is what torchvision's ImageFolder reads (Pillow's
``convert("RGB")``; ``ImageOps.exif_transpose`` first with ``exif=True``); where torchvision is
installed (.ci/torchvision) its own validation pipeline is compared too."""

import io
import os
import pickle
import warnings

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.utils.data import DataLoader

import fastprep
import fastprep.io as fio
from fastprep import transforms as fastprep_transforms

from helpers.jpeg_photos import needs_decoder, photo, photo_jpeg
from helpers.s3_server import free_port

pytestmark = [pytest.mark.one_backend, needs_decoder]
Image = pytest.importorskip("PIL.Image")
ImageOps = pytest.importorskip("PIL.ImageOps")

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
BROKEN = os.path.join("cat", "broken.jpg")


def train_pipeline(T):  # noqa: N803 (the module, as users import it: `from torchvision.transforms import v2 as T`)
    return T.Compose([T.ToImage(), T.RandomResizedCrop(32), T.RandomHorizontalFlip(),
                      T.ToDtype(torch.float32, scale=True), T.Normalize(MEAN, STD)])


def val_pipeline(T):  # noqa: N803
    return T.Compose([T.ToImage(), T.Resize(40), T.CenterCrop(32), T.ToDtype(torch.float32, scale=True),
                      T.Normalize(MEAN, STD)])


def _jpeg(img, **kw) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=90, **kw)
    return buf.getvalue()


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """Two class folders: 4 colour JPEGs, a PNG, a grey JPEG, a CMYK JPEG, a JPEG whose EXIF says
    'rotate 90' (orientation 6) and a JPEG cut off in its header."""
    root = tmp_path_factory.mktemp("photos")
    for cls in ("cat", "dog"):
        (root / cls).mkdir()
    (root / "cat" / "astronaut.jpg").write_bytes(photo_jpeg("astronaut", shape=(120, 90)))
    (root / "cat" / "coffee.jpg").write_bytes(photo_jpeg("coffee", shape=(96, 128)))
    (root / "dog" / "chelsea.jpg").write_bytes(photo_jpeg("chelsea", shape=(101, 77)))
    (root / "dog" / "rocket.jpg").write_bytes(photo_jpeg("rocket", shape=(80, 80), progressive=True))
    Image.fromarray(photo("coffee")[:70, :90]).save(root / "dog" / "plot.png")
    (root / "dog" / "grey.jpg").write_bytes(_jpeg(Image.fromarray(photo("chelsea")[:64, :96]).convert("L")))
    (root / "cat" / "print.jpg").write_bytes(_jpeg(Image.fromarray(photo("astronaut")[:72, :88]).convert("CMYK")))
    exif = Image.Exif()
    exif[0x0112] = 6
    (root / "dog" / "phone.jpg").write_bytes(_jpeg(Image.fromarray(photo("rocket")[:60, :100]), exif=exif))
    (root / BROKEN).write_bytes(photo_jpeg("coffee", shape=(64, 64))[:150])
    return str(root)


def _pillow(path: str, exif: bool) -> np.ndarray:
    with Image.open(path) as img:
        return np.asarray((ImageOps.exif_transpose(img) if exif else img).convert("RGB"))


@pytest.mark.parametrize("exif", [False, True])
def test_every_photo_loads_as_torchvision_loads_it(folder, exif):
    ds = fio.ImageFolder(folder, exif=exif, on_error="skip")
    assert len(ds) == 9
    for i, (path, _) in enumerate(ds.samples):
        if path.endswith(BROKEN):
            continue
        got = ds.load_raw(i)[0].permute(1, 2, 0).numpy()
        np.testing.assert_array_equal(got, _pillow(path, exif), err_msg=path)
    with pytest.raises(Exception, match="broken.jpg"):  # the default policy: raise, naming the file
        fio.ImageFolder(folder).load_raw([p for p, _ in ds.samples].index(os.path.join(folder, BROKEN)))


def test_the_ported_pipeline_trains_and_equals_seed_by_index(folder):
    ds = fio.ImageFolder(folder, roi=True, exif=True)
    tf = train_pipeline(fastprep_transforms)
    loader = fastprep.Loader(ds, 3, transform=tf, seed=0, threads=2, on_error="warn")
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 32 * 32, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    batches = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for images, labels in loader:
            assert images.shape == (3, 3, 32, 32) and images.dtype == torch.float32  # full batches
            loss = torch.nn.functional.cross_entropy(model(images), labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
            batches.append(images.clone())
    bad = [w for w in caught if issubclass(w.category, fastprep.BadSampleWarning)]
    assert len(bad) == 1 and "broken.jpg" in str(bad[0].message)
    assert loader.bad_samples.count == 1 and "broken.jpg" in loader.bad_samples.names()[0]
    # The same samples as SeedByIndex in a DataLoader (the source substitutes by the same rule).
    same = fio.ImageFolder(folder, roi=True, exif=True, on_error="skip", transform=tf)
    reference = DataLoader(fastprep_transforms.SeedByIndex(same, seed=0), batch_size=3)
    for got, (want, _) in zip(batches, reference, strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


@pytest.fixture(scope="module")
def packed(folder, tmp_path_factory):
    dest = str(tmp_path_factory.mktemp("pack") / "train")
    with pytest.warns(fastprep.BadSampleWarning, match="broken.jpg"):
        summary = fio.pack(folder, dest, on_error="warn", progress=False)
    return dest, summary


def test_pack_keeps_every_photo_and_says_what_it_did(folder, packed):
    dest, summary = packed
    assert summary.records == 8 and [os.path.basename(n) for n, _ in summary.skipped] == ["broken.jpg"]
    assert summary.kinds["jpeg_transcoded"].count == 7  # colour, grey, CMYK and rotated: lossless
    assert summary.kinds["non_jpeg_raw"].count == 1  # the PNG, pixel for pixel
    assert "broken.jpg" in "\n".join(summary.describe())
    ds = fio.PackedDataset(dest, exif=True)
    by_name = {os.path.basename(p): p for p, _ in fio.ImageFolder(folder).samples}
    assert len(ds) == 8
    for i in range(len(ds)):
        name = next(n for n in by_name if n in ds.where(i))
        got = ds[i][0]
        got = got.decode() if isinstance(got, fio.WindowedImage) else got
        np.testing.assert_array_equal(got.permute(1, 2, 0).numpy(), _pillow(by_name[name], True), err_msg=name)


def test_diagnose_and_monitor_describe_the_pipeline_in_front_of_them(packed):
    from fastprep.tools.diagnose._bottleneck import find_bottleneck

    loader = fastprep.Loader(fio.PackedDataset(packed[0], exif=True), 4, transform=train_pipeline(fastprep_transforms),
                             shuffle=True, seed=0, threads=2)
    report = find_bottleneck(loader, lambda batch: None, "cpu", repeats=1, max_seconds=0.2, time_limit=20)
    text = report.pipeline + "\n" + report.advice
    assert "RandomResizedCrop" in report.pipeline and "pack" in report.pipeline.lower()
    for never in ("roi=True", "RandomDilatedMask", "python -m fastprep pack"):
        assert never not in report.advice, (never, text)
    shares = _ceiling_shares(report.table())
    assert shares and all(share <= 100 for share in shares), report.table()
    watched = fastprep.monitor(loader, live=False, report=None)
    for _ in watched:
        pass
    summary = str(watched.summary())
    assert "RandomResizedCrop" in summary and "roi=True" not in summary


def _ceiling_shares(table: str) -> list[float]:
    """The "of ceiling" column of the table's measured levels: each such row's second percentage
    (its first is the +-95% interval, which may pass 100% on a busy machine)."""
    shares = []
    for line in table.splitlines():
        words = [w for w in line.split() if w.endswith("%") and w.rstrip("%").replace(".", "").isdigit()]
        if line[:1].isdigit() and len(words) == 2:
            shares.append(float(words[1].rstrip("%")))
    return shares


WORLD = 2


def _rank_main(rank: int, port: int, root: str, out: str) -> None:
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(WORLD), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo")
    try:
        ds = fio.ImageFolder(root, roi=True, on_error="skip")
        loader = fastprep.Loader(ds, 2, transform=val_pipeline(fastprep_transforms), threads=2)  # no sampler
        seen = [img.sum().item() for images, _ in loader for img in images]
        gathered = [None] * WORLD
        dist.all_gather_object(gathered, (loader.rank, loader.world_size, sorted(seen)))
        if rank == 0:
            with open(out, "wb") as f:
                pickle.dump(gathered, f)
    finally:
        dist.destroy_process_group()


def test_two_ranks_split_the_folder_without_a_sampler(folder, tmp_path):
    out = str(tmp_path / "seen.pkl")
    mp.spawn(_rank_main, args=(free_port(), folder, out), nprocs=WORLD)
    with open(out, "rb") as f:
        (r0, w0, seen0), (r1, w1, seen1) = pickle.load(f)
    assert (r0, w0, r1, w1) == (0, 2, 1, 2)
    single = fastprep.Loader(fio.ImageFolder(folder, roi=True, on_error="skip"), 2,
                             transform=val_pipeline(fastprep_transforms), world_size=1)
    everything = sorted(img.sum().item() for images, _ in single for img in images)
    # Equal counts (9 samples: 5 a rank, one repeated as DistributedSampler pads) and every sample read.
    assert len(seen0) == len(seen1) == 5 and set(seen0 + seen1) == set(everything) and len(everything) == 9


def test_the_validation_port_equals_torchvision(folder):
    tv = pytest.importorskip("torchvision", reason="torchvision's own pipeline: .ci/torchvision runs it")
    from torchvision.transforms import v2

    theirs = tv.datasets.ImageFolder(folder, transform=val_pipeline(v2), is_valid_file=lambda p: "broken" not in p)
    ours = fio.ImageFolder(folder, transform=val_pipeline(fastprep_transforms), on_error="skip")
    names = [p for p, _ in ours.samples]
    for i, (path, _) in enumerate(theirs.samples):
        torch.testing.assert_close(ours[names.index(path)][0], theirs[i][0], rtol=0, atol=0, msg=path)
