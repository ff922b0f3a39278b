"""Decoding is billed to raw loading wherever a pipeline decodes (Pillow in the dataset, a packed
record, the window decode inside fastprep's crop of an ImageFolder(roi=True) file); the advice
names the remedy the pipeline has not taken yet; the measurement runs more rounds while the
verdict is within noise and says how long it would need.

Decode costs are injected as sleeps in a JpegFile's decode (10 ms, batches of 2), on small real
JPEG photos; the 10-run reliability on 1024-px photos is in test_diagnose_reliability.py."""

import inspect
import io
import math
import time

import numpy as np
import pytest
import torch
from PIL import Image
from torch.utils.data import DataLoader

import fastprep
import fastprep.io as fio
import fastprep.monitoring._advice as say
import fastprep.tools.diagnose._bottleneck as dg
import fastprep.tools.diagnose._raw_loading as rm
import fastprep.tools.measuring._stand_ins as si
from fastprep import transforms as T
from fastprep.monitoring._pipeline import PipelineFacts, steps_of
from fastprep.tools import photos
from fastprep.tools.diagnose._bottleneck import find_bottleneck
from fastprep.tools.diagnose._verdict import LEVELS, Level, disorder, judge, more_data
from fastprep.tools.measuring._measure import Stats, Timing, round_adjusted

# serial: the verdicts time sleeps, so .ci/test runs this module alone, not beside another worker.
pytestmark = [pytest.mark.one_backend, pytest.mark.serial,
              pytest.mark.skipif(not fio.available(), reason="fastprep._jpeg not built: " + fio.jpeg.INSTALL_HINT)]

SLOW = 0.01  # seconds per decode
FAST = dict(repeats=2, max_seconds=1.0, time_limit=0)
CROP = T.Compose([T.RandomCrop(32), T.RandomDilatedMask(0.25), T.RGBToYCbCr()])


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    folder = tmp_path_factory.mktemp("photos")
    photos.write_photo_folder(folder, sizes=(64,), names=("astronaut", "coffee"))
    return str(folder)


class SlowJpegFile(fio.JpegFile):
    """A JpegFile whose decode (whole or by window) costs SLOW more."""

    def decode(self, crop=None, **kw):
        time.sleep(SLOW)
        return super().decode(crop, **kw)


class SlowFolder(fio.ImageFolder):
    # read_item, which both paths call: a DataLoader's dataset[i] under the bad-sample policy reads
    # through it, not through load_raw (then no decode slept and the verdict was a coin toss).
    def read_item(self, i):
        image, label = super().read_item(i)
        return SlowJpegFile(image.data, name=image.name, mode=image.mode, layout=image.layout), label


def _step(batch):
    return batch[0].float().sum()


@pytest.mark.parametrize("loader", ["DataLoader", "fastprep.Loader"])
def test_the_window_decode_inside_fastprep_crop_is_raw_loading(root, loader):
    if loader == "DataLoader":
        pipe = DataLoader(SlowFolder(root, roi=True, transform=CROP), batch_size=2, shuffle=True)
    else:
        pipe = fastprep.Loader(SlowFolder(root, roi=True), 2, transform=CROP, threads=1, seed=0)
    report = find_bottleneck(pipe, _step, **FAST)
    assert report.verdict == "raw loading", report.table()  # was "transforms": the crop decoded the window
    transforms = 1 / report.levels[3].steps_per_s - 1 / report.levels[2].steps_per_s
    assert transforms < SLOW, report.table()  # level 4 ran the crop on cached pixels, no decode
    assert "each JpegFile (roi=True) is decoded by window inside the crop" in report.raw_loading
    assert "python -m fastprep pack" in report.advice and "Already in place: roi=True" in report.advice
    assert "pass roi=True" not in report.advice and say.PORT not in report.advice
    assert "pipeline: [RandomCrop + RandomDilatedMask + RGBToYCbCr: one fused crop_mask_ycbcr op]" in report.table()


def test_the_cached_raw_sample_is_decoded():
    pictures, _ = photos.source_pictures(("astronaut",))
    buf = io.BytesIO()
    Image.fromarray(pictures["astronaut"][:64, :48]).save(buf, format="JPEG", quality=90)
    jpeg = fio.JpegFile(buf.getvalue())
    raw = si.decoded({"image": jpeg, "label": 3, "tags": [jpeg]})
    assert torch.equal(raw["image"], jpeg.decode()) and raw["label"] == 3 and torch.equal(raw["tags"][0], jpeg.decode())
    lazy = Image.open(io.BytesIO(buf.getvalue()))  # Image.open decodes on first access
    assert lazy.tile
    assert not si.decoded((lazy, 1))[0].tile


def lazy_open(path):
    """Image.open decodes on first access: in the transform, unless the cached raw sample is decoded."""
    with open(path, "rb") as f:
        return Image.open(io.BytesIO(f.read()))


def test_a_torchvision_style_dataset_is_split_at_its_transform(root):
    dataset = photos.ImageFolder(root, transform=lambda im: torch.from_numpy(np.array(im)[:8, :8]), loader=lazy_open)
    report = find_bottleneck(DataLoader(dataset, batch_size=2), _step, **FAST, steps=3, warmup=1)
    assert report.raw_loading == "ImageFolder: Pillow decodes each image whole in the dataset"
    source = rm.source_of(si.split_dataset(dataset).load(0), dataset, dataset.transform)
    assert source.kind == "pil-files" and source.root == root
    advice = source.advice()
    assert f"fastprep.io.ImageFolder({root!r})" in advice and f"python -m fastprep pack {root} " in advice
    assert advice.index("ImageFolder(") < advice.index("python -m fastprep pack")  # the cheaper step first
    assert "roi=True" not in advice  # its transform is no crop: a window would not help


def test_packed_shards_are_not_told_to_pack(root, tmp_path):
    fio.pack(root, tmp_path / "jpeg", progress=False)
    fio.pack(root, tmp_path / "raw", mode="raw", progress=False)
    packed = fio.PackedDataset(tmp_path / "jpeg")
    report = find_bottleneck(fastprep.Loader(packed, 2, transform=CROP, threads=1, seed=0), _step, **FAST)
    assert "PackedDataset: each packed JPEG window is decoded from its restart intervals" in report.raw_loading
    source = rm.source_of(packed.load_raw(0), packed, CROP, loader="fastprep", workers=1)
    assert source.kind == "packed-jpeg"
    assert "python -m fastprep pack" not in source.advice() and "--mode raw" in source.advice()
    assert "Already in place: packed shards" in source.advice()
    assert "on the GPU" not in source.advice()  # steps on the CPU: no GPU to decode on
    on_gpu = source.with_device("cuda")
    assert "decode_window_batch" in on_gpu.advice() or "decode_on" in on_gpu.advice()

    raw = fio.PackedDataset(tmp_path / "raw")
    cached = si.decoded(raw.load_raw(0))
    assert cached[0].is_contiguous() and torch.equal(cached[0], raw.load_raw(0)[0].decode())
    source = rm.source_of(raw.load_raw(0), raw, CROP, loader="fastprep", workers=1)
    assert source.kind == "packed-raw" and "verify=False" in source.advice()
    assert "python -m fastprep pack" not in source.advice() and "--mode raw" not in source.advice()
    assert "Already in place: packed shards" in source.advice() and "raw shards: nothing is decoded" in source.advice()


def test_what_raw_loading_and_transforms_are_told_from_the_pipeline():
    facts = PipelineFacts(
        steps_of(CROP), "jpeg-files", "ImageFolder", "/data/train/", "fastprep", 2)
    source = rm.RawSource(facts)
    advice = source.advice()
    assert "python -m fastprep pack /data/train /data/train.packed" in advice and "pass roi=True" not in advice
    assert "more threads (fastprep.Loader(threads=...): 2 now)" in advice
    assert "fastprep's already" in source.transforms_advice() and say.PORT not in source.transforms_advice()
    assert "crop_mask_ycbcr op" in source.transforms_advice()  # in place, said so
    assert "already writes compact uint8 batches" in source.collate_advice()
    foreign = rm.RawSource(PipelineFacts(
        steps_of(lambda x: x), "files", "ImageFolder"))
    assert foreign.transforms_advice().startswith("The per-sample transforms are the bottleneck: fastprep's")
    assert foreign.collate_advice() is None  # a DataLoader with default_collate: the general advice
    assert rm.RawSource(PipelineFacts()).transforms_advice() is None  # no step found


def test_the_gpu_split_is_named_as_this_version_offers_it(monkeypatch):
    import fastprep.loader

    has = "decode_on" in inspect.signature(fastprep.loader.Loader).parameters
    assert ("decode_on" in rm.gpu_split()) == has
    assert "decode_window_batch" in rm.gpu_split() or has

    class WithSplit:
        def __init__(self, dataset, batch_size, *, decode_on=None):
            pass

    monkeypatch.setattr(fastprep.loader, "Loader", WithSplit)
    assert 'fastprep.Loader(..., decode_on="cuda")' in rm.gpu_split()


def _timing(rate, n=8):
    return Timing([1 / rate] * n, 2, True)


def test_round_adjusted_takes_out_a_slow_round():
    # Round 2 ran under a burst of load that halved every level.
    adjusted, factors = round_adjusted({1: [_timing(100), _timing(50)], 3: [_timing(40), _timing(20)]})
    assert factors[1] / factors[0] == pytest.approx(2) and math.prod(factors) == pytest.approx(1)
    assert [t.rate for t in adjusted[1]] == pytest.approx([100 / 2 ** 0.5] * 2)
    assert [t.rate for t in adjusted[3]] == pytest.approx([40 / 2 ** 0.5] * 2)
    same, factors = round_adjusted({1: [_timing(100)], 3: [_timing(40)]})
    assert factors == [1.0] and same[1][0].rate == 100


def _levels(*rates, noise=0.02):
    levels = [Level(name, Stats([r] * 3, 30, noise, True) if r else None) for name, r in zip(LEVELS, rates)]
    levels[1] = Level(LEVELS[1], None, "no host->device copy on the CPU", absent=True)
    return levels


def test_more_data_follows_the_intervals():
    assert more_data(_levels(100, 0, 99, 98, 10)) == 1.0  # a verdict
    assert more_data(_levels(100, 0, 99, 20, 10)) == 1.0  # 1.25x apart, and their intervals cannot reach 1.5x
    noisy = _levels(100, 0, 99, 30, 10, noise=0.3)  # raw loading 2x transforms, intervals overlapping
    assert judge(noisy)[0] == "inconclusive" and 1 < more_data(noisy) < math.inf
    assert "Both may need work" in judge(noisy)[2] and "Measure longer" in judge(noisy)[2]
    assert more_data(_levels(100, 0, 90, 80, 78, noise=0.2)) > 1  # nothing cached within noise of the ceiling
    assert disorder(_levels(100, 0, 90, 95, 50))[1] == "level 3 (cached processed sample) measured only 95% of " \
                                                       "level 4 (cached raw sample)"
    assert disorder(_levels(100, 0, 90, 80, 50)) == (0.0, "")
    slow_ceiling = _levels(7, 0, 81, 54, 29)  # a burst of load on every round of the ceiling
    verdict, margin, _ = judge(slow_ceiling)
    assert verdict == "inconclusive" and "the ceiling (level 1) measured only 9% of level 3" in margin
    assert more_data(slow_ceiling) == 2.0  # measure again


def test_rounds_run_until_the_verdict_settles(root, monkeypatch):
    calls = []

    def settles_on_second_call(levels, threshold, dominance):
        calls.append(len(levels[0].stats.rates))
        return 4.0 if len(calls) == 1 else 1.0

    loader = DataLoader(SlowFolder(root, roi=True, transform=CROP), batch_size=2)
    monkeypatch.setattr(dg, "more_data", settles_on_second_call)
    report = find_bottleneck(loader, _step, repeats=2, max_steps=4, time_limit=60)
    assert calls == [2, 3] and report.settings["rounds"] == 3 and "(settled after 3 rounds" in report.margin

    monkeypatch.setattr(dg, "more_data", lambda *a: 4.0)
    report = find_bottleneck(loader, _step, repeats=2, max_steps=4, time_limit=0)
    assert report.settings["rounds"] == 2
    assert "within noise after 2 rounds" in report.margin and "run longer: about" in report.margin
    assert "(6 more rounds, time_limit / --time-limit)" in report.margin
    report = find_bottleneck(loader, _step, repeats=2, steps=2, warmup=1, time_limit=60)  # a fixed length
    assert report.settings["rounds"] == 2 and "repeats / --repeats" in report.margin
    monkeypatch.setattr(dg, "more_data", lambda *a: math.inf)
    report = find_bottleneck(loader, _step, repeats=2, steps=2, warmup=1, time_limit=60)
    assert report.settings["rounds"] == 2 and "measuring longer would not tell them apart" in report.margin
    with pytest.raises(ValueError, match="expected time_limit to be a number of seconds >= 0, got -1"):
        find_bottleneck(loader, _step, time_limit=-1)


class SlowItems(torch.utils.data.Dataset):
    """A slow fake pipeline: 20 ms of raw loading an item, a transform attribute for the split."""

    transform = None

    def __len__(self):
        return 64

    def __getitem__(self, i):
        time.sleep(0.02)
        return torch.zeros(4), i


@pytest.mark.parametrize("limit", [0.5, 4.0])
def test_the_time_limit_is_passed_by_at_most_one_round(limit):
    began = time.perf_counter()
    report = find_bottleneck(DataLoader(SlowItems(), batch_size=2), lambda b: time.sleep(0.002), time_limit=limit)
    wall = time.perf_counter() - began
    lengths = report.settings["round_seconds"]
    assert len(lengths) == report.settings["rounds"] >= 1
    # A round starts only when the longest so far fits in what is left: past the limit by one round at most.
    assert report.settings["seconds"] <= limit + max(lengths), (report.settings["seconds"], lengths)
    assert wall - report.settings["seconds"] <= max(lengths)  # what follows the last round is short
    assert report.settings["max_seconds"] <= limit / (3 * 4 * 2.5) + 1e-9  # the rounds were planned within it
    if report.settings["rounds"] < 3:
        assert f"{report.settings['rounds']} of 3 rounds fitted in the time limit" in report.margin
    assert report.verdict in ("raw loading", "inconclusive"), report.table()
    if report.verdict == "inconclusive":
        assert "run longer: about" in report.margin or "steady the step instead" in report.margin


def test_a_run_that_would_need_far_longer_says_so():
    report = dg._how_long(400.0, 3, 60.0, dg.Settings(), 60.0)
    assert "more than ten times this run" in report and "torch.set_num_threads(1)" in report
    assert "run longer: about 40 s more (2 more rounds" in dg._how_long(1.5, 3, 60.0, dg.Settings(), 60.0)
    assert "(settled after 4 rounds, 2.5 s)" in dg._how_long(1.0, 4, 2.5, dg.Settings(), 60.0)
