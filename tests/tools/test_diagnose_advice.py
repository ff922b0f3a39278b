"""The advice fits the pipeline in front of it: diagnose and monitor describe the pipeline (its steps,
fused or not, its source, its loader) from one PipelineFacts, and name only the remedies of the one
table (fastprep.monitoring._remedies) that apply to it and are not taken; those taken are said to be
in place. A table of pipeline kinds x sources x loaders, on real loaders over tiny files (nothing is
timed; torchvision's transforms are stood in for by look-alike classes: torchvision may be absent)."""

import numpy as np
import pytest
import torch
from PIL import Image
from torch.utils.data import DataLoader, TensorDataset

import fastprep
import fastprep.io as fio
import fastprep.monitoring._advice as say
import fastprep.monitoring._remedies as mr
import fastprep.tools.diagnose._raw_loading as rm
from fastprep import transforms as T
from fastprep.monitoring._pipeline import PipelineFacts, facts_of, steps_of
from fastprep.monitoring._summary import MonitorSummary
from fastprep.tools import photos

from helpers.foreign_steps import ForeignCompose

pytestmark = [pytest.mark.one_backend,
              pytest.mark.skipif(not fio.available(), reason="fastprep._jpeg not built: " + fio.jpeg.INSTALL_HINT)]


class RandomResizedCrop(torch.nn.Module):
    """Stands in for torchvision.transforms.v2.RandomResizedCrop (a foreign step of that name)."""

    def forward(self, x):
        return x


TRANSFORMS = {
    "rrc": lambda: T.Compose([T.RandomResizedCrop(16), T.RandomHorizontalFlip(), T.ToDtype(torch.float32, scale=True),
                              T.Normalize([0.5] * 3, [0.2] * 3)]),
    "rrc-reduced": lambda: T.Compose([T.RandomResizedCrop(16, jpeg_scale="reduced"), T.RandomHorizontalFlip()]),
    "rrc-foreign": lambda: ForeignCompose([RandomResizedCrop(), lambda x: x]),
    "seed": lambda: T.Compose([T.RandomCrop(16), T.RandomDilatedMask(0.25), T.RGBToYCbCr()]),
    "seed-unfused": lambda: T.Compose([T.RandomCrop(16), T.RandomDilatedMask(0.25), T.RGBToYCbCr()], fuse=False),
    "val": lambda: T.Compose([T.Resize(20), T.CenterCrop(16)]),
    "other": lambda: (lambda x: x),
}


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    root = tmp_path_factory.mktemp("folder")
    rng = np.random.default_rng(0)
    for i in range(4):
        (root / f"c{i % 2}").mkdir(exist_ok=True)
        Image.fromarray(rng.integers(0, 256, (40, 48, 3), dtype=np.uint8)).save(root / f"c{i % 2}" / f"{i}.jpg")
    packs = tmp_path_factory.mktemp("packs")
    fio.pack(root, packs / "jpeg", progress=False)
    fio.pack(root, packs / "raw", mode="raw", progress=False)
    fio.pack(root, packs / "small", max_side=32, progress=False)
    return {"pil-files": lambda tf: photos.ImageFolder(root, transform=tf),
            "files": lambda tf: fio.ImageFolder(root, transform=tf),
            "jpeg-files": lambda tf: fio.ImageFolder(root, roi=True, transform=tf),
            "packed-jpeg": lambda tf: fio.PackedDataset(packs / "jpeg", transform=tf),
            "packed-jpeg-small": lambda tf: fio.PackedDataset(packs / "small", transform=tf),
            "packed-raw": lambda tf: fio.PackedDataset(packs / "raw", transform=tf, verify=False),
            "tensors": lambda tf: TensorDataset(torch.zeros(4, 3, 8, 8, dtype=torch.uint8), torch.arange(4))}


def _facts(sources, source, transform, loader):
    tf = TRANSFORMS[transform]()
    if loader == "fastprep":
        return facts_of(fastprep.Loader(sources[source](None), 2, transform=tf, threads=1))
    dataset = sources[source](tf if source != "tensors" else None)
    facts = facts_of(DataLoader(dataset, batch_size=2))
    return facts if source != "tensors" else PipelineFacts(**{**facts.__dict__, "steps": facts_of(
        fastprep.Loader(dataset, 2, transform=tf, threads=1)).steps})


def _keys(facts):
    return {r.key for r, taken in mr.plan(facts, (mr.RAW, mr.TRANSFORMS)) if not taken}, \
        {r.key for r, taken in mr.plan(facts, (mr.RAW, mr.TRANSFORMS)) if taken}


# (transform, source, loader): remedies suggested (all of them), remedies said to be in place
CASES = [
    ("rrc-foreign", "pil-files", "dataloader", {"reader", "rrc-reduced", "pack", "rrc-port"}, set()),
    ("rrc", "files", "fastprep", {"rrc-reduced", "pack"}, {"rrc-port"}),
    ("rrc", "jpeg-files", "fastprep", {"rrc-reduced", "pack"}, {"rrc-port"}),
    ("rrc-reduced", "jpeg-files", "fastprep", {"pack"}, {"rrc-reduced", "rrc-port"}),
    ("rrc", "packed-jpeg", "fastprep", {"rrc-reduced", "shrink", "verify"}, {"pack", "rrc-port"}),
    ("rrc-reduced", "packed-jpeg-small", "dataloader", {"verify"}, {"pack", "shrink", "rrc-reduced", "rrc-port"}),
    ("rrc", "packed-raw", "fastprep", {"storage"}, {"pack", "verify", "rrc-port"}),
    ("seed", "pil-files", "dataloader", {"reader", "roi", "pack"}, {"seed-compose"}),
    ("seed", "files", "fastprep", {"roi", "pack"}, {"seed-compose"}),
    ("seed", "jpeg-files", "fastprep", {"pack"}, {"roi", "seed-compose"}),
    ("seed-unfused", "jpeg-files", "dataloader", {"pack", "seed-compose"}, {"roi"}),
    ("seed", "packed-jpeg", "fastprep", {"raw-mode", "verify"}, {"pack", "seed-compose"}),
    ("seed", "packed-raw", "fastprep", {"storage"}, {"pack", "raw-mode", "verify", "seed-compose"}),
    ("val", "packed-jpeg", "fastprep", {"rrc-reduced", "raw-mode", "verify"}, {"pack", "resize-port"}),
    ("other", "files", "dataloader", {"pack", "port"}, set()),
    ("other", "tensors", "fastprep", {"decode-less", "port"}, set()),
    ("seed", "tensors", "fastprep", {"decode-less"}, {"seed-compose"}),
]


@pytest.mark.parametrize("transform,source,loader,todo,done", CASES)
def test_remedies_that_apply_and_are_not_taken(sources, transform, source, loader, todo, done):
    facts = _facts(sources, source, transform, loader)
    assert facts.source == source.removesuffix("-small") and facts.loader == loader
    assert _keys(facts) == (todo, done), facts.describe()
    text = str(_summary(facts))
    if source.startswith("packed"):  # a pack reads by window already, and is packed
        assert "roi=True" not in text and "python -m fastprep pack" not in text, text
    if not transform.startswith("seed"):  # the seed workload's Compose only for that kind of pipeline
        assert "RGBToYCbCr" not in text and "crop_mask_ycbcr" not in text, text
    if transform.startswith("rrc") and source != "packed-raw":  # the resized-crop recipe, suggested or in place
        assert "jpeg_scale=\"reduced\"" in text or "max-side" in text or "max_side" in text, text
        assert "pass roi=True" not in text


def test_the_description_names_the_steps_the_source_and_the_loader(sources):
    facts = _facts(sources, "jpeg-files", "rrc", "fastprep")
    assert facts.describe().splitlines() == [
        "pipeline: [RandomResizedCrop + RandomHorizontalFlip + ToDtype + Normalize: one fused resized_crop op]",
        f"source: ImageFolder {facts.root}: JPEG files read by window (roi=True); fastprep.Loader(threads=1) on cpu"]
    foreign = _facts(sources, "pil-files", "rrc-foreign", "dataloader").describe()
    assert foreign.startswith("pipeline: RandomResizedCrop (not fastprep's) -> <lambda> (not fastprep's)\n")
    assert "image files decoded whole by Pillow in the dataset; DataLoader(num_workers=0)" in foreign
    assert "max_side=32" in _facts(sources, "packed-jpeg-small", "rrc", "fastprep").describe()
    wrapped = facts_of(fastprep.DevicePrefetcher(DataLoader(sources["files"](None), batch_size=2), "cpu"))
    assert wrapped.source == "files" and wrapped.loader == "dataloader" and wrapped.steps == ()
    assert facts_of([torch.zeros(2)]).describe() == ("pipeline: no transform found\nsource: list: samples made by "
                                                      "the dataset; no DataLoader or fastprep.Loader to read on cpu")


def test_a_remote_pack_and_the_gpu_split():
    remote = PipelineFacts(facts_of([]).steps, "remote-pack", "PackedDataset", "s3://b/train.packed", "fastprep", 2,
                           "cuda", pack={"mode": "jpeg"}, verify=True)
    todo, done = mr.remedies(remote)
    assert any("cache_dir" in t for t in todo) and any("decode" in t and "GPU" in t for t in todo)
    assert not any("roi=True" in t or "python -m fastprep pack" in t for t in todo)
    split = PipelineFacts(remote.steps, "packed-jpeg", "PackedDataset", "/p", "fastprep", 2, "cuda", decode_on="cuda")
    assert "the GPU decode split (decode_on='cuda')" in mr.remedies(split)[1]
    todo, done = mr.remedies(split, (mr.COLLATE,))
    assert any("ship uint8 batches" in t for t in todo) and "a fastprep.Loader (threads, no IPC)" in done
    split.loader_device = "cuda:0"
    assert "uint8 batches copied to cuda:0 and converted there" in mr.remedies(split, (mr.COLLATE,))[1]


# transform, the pack read with exif=True: the GPU decode split suggested (steps on cuda) where the
# Loader's decode_on check takes the transform, and not for a pack read upright by EXIF
SPLIT_CASES = [
    ("seed", False, True),
    ("rrc", False, True),
    ("val", False, True),
    ("rrc-reduced", False, False),  # jpeg_scale="reduced": the device decodes at full scale only
    ("rrc-foreign", False, False),  # a foreign transform: no fused op to split
    ("other", False, False),
    ("to-float", False, False),  # ToDtype + Normalize alone: no fused op
    ("center-crop", False, False),  # CenterCrop alone
    ("rrc", True, False),  # exif=True
]
SPLIT_TRANSFORMS = {**TRANSFORMS,
                    "to-float": lambda: T.Compose([T.ToDtype(torch.float32, scale=True),
                                                   T.Normalize([0.5] * 3, [0.2] * 3)]),
                    "center-crop": lambda: T.Compose([T.CenterCrop(16)])}


@pytest.mark.parametrize("transform,exif,suggested", SPLIT_CASES)
def test_the_gpu_split_is_suggested_only_where_the_loader_splits(sources, transform, exif, suggested):
    pack = sources["packed-jpeg"](None)
    tf = SPLIT_TRANSFORMS[transform]()
    dataset = fio.PackedDataset(pack.path, exif=True) if exif else pack
    facts = facts_of(fastprep.Loader(dataset, 2, transform=tf, threads=1), torch.device("cuda"))
    todo, _ = _keys(facts)
    assert ("gpu-split" in todo) == suggested, (facts.describe(), facts.split_refused)
    if not exif:  # the Loader agrees: it splits exactly what is suggested
        try:
            fastprep.Loader(dataset, 2, transform=tf, threads=1, decode_on="cpu")
            accepted = True
        except ValueError as exc:
            accepted = "cannot split this transform" not in str(exc)
        assert accepted == suggested
    # diagnose's facts say the same
    assert ("gpu-split" in _keys(rm.source_of(dataset.load_raw(0), dataset, tf, loader="fastprep",
                                              device="cuda").facts)[0]) == suggested


def test_the_resize_remedies_use_the_steps_own_size(sources):
    for tf, said in [(T.Compose([T.RandomResizedCrop(16)]), 'RandomResizedCrop(16, jpeg_scale="reduced")'),
                     (T.Compose([T.RandomResizedCrop((12, 20))]), 'RandomResizedCrop((12, 20), jpeg_scale="reduced")'),
                     (T.Compose([T.Resize(20), T.CenterCrop(16)]), 'Resize(20, jpeg_scale="reduced")'),
                     (ForeignCompose([RandomResizedCrop()]), 'RandomResizedCrop(size, jpeg_scale="reduced")')]:
        facts = facts_of(fastprep.Loader(sources["jpeg-files"](None), 2, transform=tf, threads=1))
        todo = mr.remedies(facts)[0]
        assert any(t.startswith(said) for t in todo), todo
        assert not any(t.startswith(("RandomResizedCrop(224", "Resize(256")) for t in todo), todo
    port = mr.remedies(_facts(sources, "pil-files", "rrc-foreign", "dataloader"))[0]
    assert any("Compose([RandomResizedCrop(size), RandomHorizontalFlip()" in t for t in port), port


def _summary(facts, cpu_process=None, cpu_util=None):
    return MonitorSummary(steps=10, input_bound=10, threshold=0.1, wait=0.05, wait_p50=0.05, wait_p95=0.05, step=0.06,
                          step_p50=0.06, step_p95=0.06, wait_share=0.8, host_wait=0.05, gpu_util=None, gpu_note="cpu",
                          cpu_util=cpu_util, cpu_note="machine", startup=0.1, passes=1, clock="host clock",
                          device="cpu", cpu_process=cpu_process, cpu_process_note="own", facts=facts)


@pytest.mark.parametrize("own,machine,says,never", [
    (95.0, 97.0, "the cores are busy with this process's work (CPU 95%)", "other processes"),
    (2.0, 99.0, "busy, but with other processes' work (machine 99%, this process 2%)", "this process's work"),
    (30.0, 40.0, "the cores have room (CPU 30%, machine 40%)", "busy"),
    (90.0, None, "the cores are busy with this process's work (CPU 90%)", "other processes"),
])
def test_cores_busy_only_when_this_process_uses_them(own, machine, says, never):
    text = str(_summary(PipelineFacts(), own, machine))
    assert says in text and never not in text, text
    assert f"CPU {own:.0f}% (machine {'n/a' if machine is None else f'{machine:.0f}%'}" in text


@pytest.mark.parametrize("loader,workers,threads", [
    ("fastprep", 3, "more threads (fastprep.Loader(threads=...): 3 now)"),
    ("dataloader", 2, "more num_workers (2 now)"),
    ("other", 0, say.MORE_THREADS),
])
def test_diagnose_and_the_monitor_word_one_piece_of_advice_alike(loader, workers, threads):
    facts = PipelineFacts(steps_of(lambda x: x), "pil-files", "ImageFolder", "/data/train", loader, workers)
    table = rm.advice_table(rm.RawSource(facts))  # diagnose's advice, stage by stage, for this pipeline
    monitor = str(_summary(facts, cpu_process=30.0, cpu_util=40.0))
    assert threads in table["raw loading"] and threads in table["transforms"] and threads in monitor
    for text in mr.remedies(facts)[0]:  # each remedy named by both, in the same words
        assert text in table["raw loading"] + table["transforms"] and text in monitor
    assert say.PORT in monitor and say.PORT in table["transforms"]
    assert say.STEP_FIRST in table["model-bound"]
    keeps_up = str(MonitorSummary(**{**_summary(facts).__dict__, "wait_share": 0.01}))
    assert say.STEP_FIRST in keeps_up and "the input keeps up" in keeps_up


def test_bad_samples_are_counted_in_the_summary():
    assert "bad samples skipped: 3" in str(MonitorSummary(**{**_summary(None).__dict__, "bad_samples": 3}))
    assert "bad samples" not in str(_summary(None))


def test_torchvision_pipelines_are_described_as_they_are(sources):
    tv = pytest.importorskip("torchvision")
    from torchvision.transforms import v2

    tf = v2.Compose([v2.RandomResizedCrop(16), v2.RandomHorizontalFlip(), v2.ToImage()])
    root = sources["files"](None).root
    facts = facts_of(DataLoader(tv.datasets.ImageFolder(root, transform=tf), batch_size=2, num_workers=0))
    assert facts.source == "pil-files" and facts.kind == "resized-crop" and not facts.fastprep_steps
    assert facts.describe().startswith("pipeline: RandomResizedCrop (not fastprep's) -> RandomHorizontalFlip")
    assert {"reader", "rrc-reduced", "pack", "rrc-port"} == _keys(facts)[0]


def test_a_monitored_loader_describes_itself(sources):
    import json

    loader = fastprep.Loader(sources["packed-raw"](None), 2, transform=TRANSFORMS["seed"](), threads=1)
    with fastprep.monitor(loader, live=False, report=None, device="cpu") as mon:
        for _batch in mon:
            pass
    s = mon.summary()
    assert s.facts.source == "packed-raw" and "source: PackedDataset" in str(s) and "packed raw shards" in str(s)
    assert "crop_mask_ycbcr op]" in str(s) and s.bad_samples == 0
    assert json.loads(json.dumps(s.as_dict()))["facts"]["source"] == "packed-raw"
    loader.bad_samples = fastprep.core._bad_samples.BadSamples("Loader", "skip")  # as the Loader keeps them
    loader.bad_samples.count = 2
    assert mon.summary().bad_samples == 2 and "bad samples skipped: 2" in str(mon.summary())


def test_the_facts_name_the_split_stage_and_its_decoders(sources):
    pack = sources["packed-jpeg"](None)
    tf = T.Compose([T.RandomResizedCrop(16), T.ToDtype(torch.float32, scale=True)])
    facts = facts_of(fastprep.Loader(pack, 2, transform=tf, threads=1, decode_on="cpu", streams=2))
    assert facts.split_stage == "2 streams; JPEG: libjpeg-turbo (host)"
    assert "fastprep.Loader(threads=1, decode_on='cpu') [2 streams; JPEG: libjpeg-turbo (host)]" in facts.describe()
    assert facts_of(fastprep.Loader(pack, 2, transform=tf, threads=1)).split_stage is None
