"""fastprep.Loader gives SeedByIndex + DataLoader's bits (docs/loader.md) on a folder as users have
it: colour JPEGs with a greyscale JPEG (1 component, decoded to 3 equal channels in mode RGB), a
progressive grey one, a PNG and a CMYK JPEG among them, for every fused row, read by window
(roi=True), decoded whole (roi=False) and packed, with one and two threads. The reference pixels
are Pillow's ``convert("RGB")`` of each file through the same transform under the sample's seed."""

import io

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

import fastprep
import fastprep.io as fio
from fastprep import transforms as T
from fastprep.core._rng import item_seed, seeded
from fastprep.loader._fused_chunks import ChunkRuns

from helpers.jpeg_photos import needs_decoder, photo, photo_jpeg

pytestmark = needs_decoder
Image = pytest.importorskip("PIL.Image")

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def _jpeg(name, shape, mode, progressive=False):
    """Photo `name` cut to `shape`, converted to `mode` ("L": 1 component, "CMYK": 4), as a JPEG."""
    buf = io.BytesIO()
    Image.fromarray(photo(name)[:shape[0], :shape[1]]).convert(mode).save(buf, "JPEG", quality=90,
                                                                          progressive=progressive)
    return buf.getvalue()


FILES = {  # sorted as ImageFolder lists them: the grey images first in their class, mid-batch, last
    "a/grey.jpg": lambda: _jpeg("chelsea", (83, 101), "L"),
    "a/rgb420.jpg": lambda: photo_jpeg("astronaut", "4:2:0", False, (90, 77)),
    "a/rgb444.jpg": lambda: photo_jpeg("rocket", "4:4:4", True, (64, 96)),
    "b/cmyk.jpg": lambda: _jpeg("coffee", (70, 85), "CMYK"),
    "b/grey_progressive.jpg": lambda: _jpeg("astronaut", (71, 66), "L", True),
    "b/plot.png": None,
    "b/rgb422.jpg": lambda: photo_jpeg("coffee", "4:2:2", False, (75, 110)),
    "b/z_grey.jpg": lambda: _jpeg("camera", (97, 58), "L"),
}

ROWS = {  # one pipeline per row of the fusion table (transforms/_fused.py)
    "rrc": lambda: T.RandomResizedCrop(48),
    "rrc-flip-normalize": lambda: T.Compose([T.RandomHorizontalFlip(), T.RandomResizedCrop(40), T.RandomVerticalFlip(),
                                             T.ToDtype(torch.float32, scale=True), T.Normalize(MEAN, STD)]),
    "resize-centercrop": lambda: T.Compose([T.Resize(56), T.CenterCrop(48)]),
    "crop-mask-ycbcr": lambda: T.seed_workload(48, hflip=True, out_dtype=torch.float32, scale=1 / 255),
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("grey")
    for rel, make in FILES.items():
        (root / rel).parent.mkdir(exist_ok=True)
        if make is None:
            Image.fromarray(photo("immunohistochemistry")[:66, :80]).save(root / rel)
        else:
            (root / rel).write_bytes(make())
    return root


@pytest.fixture(scope="module")
def packed(folder, tmp_path_factory):
    dest = tmp_path_factory.mktemp("grey-pack") / "pack"
    fio.pack(folder, dest, progress=False, threads=1)
    return dest


def _sources(folder, packed):
    return {"roi": lambda **kw: fio.ImageFolder(folder, roi=True, **kw),
            "decoded": lambda **kw: fio.ImageFolder(folder, **kw),
            "packed": lambda **kw: fio.PackedDataset(packed, **kw)}


def _pillow(path):
    with Image.open(path) as img:
        return torch.from_numpy(np.array(img.convert("RGB"))).permute(2, 0, 1).contiguous()


@pytest.mark.parametrize("row", list(ROWS))
def test_loader_equals_seed_by_index_on_grey_cmyk_and_png(folder, packed, row):
    make, seed = ROWS[row], 11
    # The fused op takes every image here (grey, CMYK and PNG included): the comparison is of its
    # batch path, not of two runs of the steps one by one.
    group = T.FusionPlan.of(make()).fused
    assert group is not None
    chunk_runs = ChunkRuns(group)
    for name, source in _sources(folder, packed).items():
        dataset = source()
        for i in range(len(dataset)):
            assert chunk_runs.item_image(dataset.load_raw(i), None)[0] is not None, f"{name}: item {i} not taken"
    paths = [p for p, _ in fio.ImageFolder(folder).samples]
    reference = []
    for i, path in enumerate(paths):
        with seeded(item_seed(seed, i, 0)):
            reference.append(make()(_pillow(path)))
    for name, source in _sources(folder, packed).items():
        want = [x for x, _ in DataLoader(T.SeedByIndex(source(transform=make()), seed=seed), batch_size=1)]
        for i, (got, ref) in enumerate(zip(want, reference, strict=True)):
            assert torch.equal(got[0], ref), f"{name}: SeedByIndex differs from Pillow's pixels at {paths[i]}"
        for threads, batch_size in ((1, 3), (2, 4), (2, 8)):
            loader = fastprep.Loader(source(), batch_size, transform=make(), seed=seed, threads=threads)
            got = [x.clone() for images, _ in loader for x in images]
            assert len(got) == len(paths)
            for i, (x, ref) in enumerate(zip(got, reference)):
                assert torch.equal(x, ref), f"{name}, threads={threads}, batch_size={batch_size}: {paths[i]}"
