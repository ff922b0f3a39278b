"""Which windows ``jpeg_scale="reduced"`` reads at a reduced scale, and what it reads where it declines.

A window that no scale of DCT_SCALES keeps at least its resize's size (``scale.reducible``: under
twice the output, rounded, on an axis, as nearly every RandomResizedCrop(224) window of a 500 x 375
photo) is read without choosing a scale, by the exact read itself: jpeg_scale="exact"'s bits. A window
that is reduced keeps the bits it had: the M/8 decode of reduced_crop's window, resized."""

import numpy as np
import pytest
import torch

import fastprep
import fastprep.io as fio
from fastprep import transforms as T
from fastprep.io.jpeg._scale import DCT_SCALES, reduced_crop, reduced_read, reducible, scaled_crop
from fastprep.ops._resize import resized_crop

from helpers.jpeg_photos import encode, needs_decoder, photo, write_tree

PIL = pytest.importorskip("PIL.Image")

pytestmark = [needs_decoder]

OUT = 40  # the resize: windows under 80 px on an axis are declined, 80-159 read at 4/8, 160+ at 2/8


def _keeps(crop, H, W, at_least, orientation):
    """Whether some scale of DCT_SCALES keeps the window at least `at_least` (the choice's own loop)."""
    return any(s[2] >= at_least[0] and s[3] >= at_least[1]
               for s in (scaled_crop(crop, H, W, m, orientation) for m in DCT_SCALES))


@pytest.mark.one_backend
def test_the_decline_never_refuses_a_window_a_scale_keeps():
    """reducible is a bound on the scaled window's size, never tighter than the choice: windows
    near twice the output, every orientation, odd and even image sizes."""
    rng = np.random.default_rng(0)
    declined = kept = 0
    for _ in range(4000):
        at_least = tuple(int(v) for v in rng.integers(1, 300, 2))
        h, w = (int(rng.integers(max(1, 2 * a - 5), 2 * a + 5)) for a in at_least)
        H, W = h + int(rng.integers(0, 40)), w + int(rng.integers(0, 40))
        crop = (int(rng.integers(0, H - h + 1)), int(rng.integers(0, W - w + 1)), h, w)
        orientation = int(rng.integers(1, 9))
        if _keeps(crop, H, W, at_least, orientation):
            assert reducible(h, w, at_least), (crop, H, W, at_least, orientation)
            kept += 1
        if not reducible(h, w, at_least):
            assert reduced_crop(crop, H, W, at_least, orientation) == (8, crop)
            declined += 1
    assert kept > 1000 and declined > 1000


@pytest.mark.one_backend
@pytest.mark.parametrize("h, w, at_least, want", [
    (448, 448, (224, 224), True), (447, 900, (224, 224), True),  # 447 / 2 rounds up to 224
    (446, 900, (224, 224), False), (900, 446, (224, 224), False), (1, 1, (1, 1), True), (1, 1, (2, 1), False),
])
def test_reducible_at_the_bound(h, w, at_least, want):
    assert reducible(h, w, at_least) is want


class _Counting:
    """A scaled-decode image that counts the choices it is asked for."""
    scaled_decode = True
    height = width = 1000

    def __init__(self):
        self.asked = 0

    def reduced_window(self, crop, at_least):
        self.asked += 1
        return reduced_crop(crop, self.height, self.width, at_least)


@pytest.mark.one_backend
def test_a_declined_window_is_not_chosen_for():
    """The decline comes before the image's own choice (a JpegFile's, an EXIF-turned image's):
    nothing is computed for a window no scale reduces."""
    image = _Counting()
    assert reduced_read(image, (10, 20, 300, 447), (224, 224)) == (8, (10, 20, 300, 447))
    assert image.asked == 0
    assert reduced_read(image, (10, 20, 460, 900), (224, 224)) == (4, (5, 10, 230, 450))
    assert image.asked == 1


@pytest.fixture(scope="module")
def pack(tmp_path_factory):
    """Photos of two sizes, 4:2:0: windows of RandomResizedCrop(OUT) fall on both sides of 80 px."""
    root = tmp_path_factory.mktemp("choice")
    base = PIL.fromarray(np.ascontiguousarray(photo("astronaut")))
    files = {}
    for i, (h, w) in enumerate([(90, 120), (120, 90), (75, 100), (230, 210)] * 2):
        picture = np.asarray(base.resize((w, h), PIL.Resampling.LANCZOS).rotate(45 * i))
        files[f"c{i % 2}/{i}.jpg"] = encode(np.ascontiguousarray(picture))
    (root / "src").mkdir()
    write_tree(root / "src", {rel: (lambda b=b: b) for rel, b in files.items()})
    fio.pack(root / "src", root / "pack", progress=False, threads=1)
    return fio.PackedDataset(root / "pack")


def _one(item, jpeg_scale, k):
    step = T.RandomResizedCrop(OUT, jpeg_scale=jpeg_scale, generator=torch.Generator().manual_seed(k))
    return step(item)


@pytest.mark.one_backend
def test_declined_windows_are_exacts_bits_and_reduced_ones_keep_theirs(pack):
    """One sample at a time: a declined window gives jpeg_scale="exact"'s result; a reduced one the
    M/8 decode of reduced_crop's window, resized (the bits jpeg_scale="reduced" gave before the decline)."""
    picked = set()
    for i in range(len(pack)):
        item = pack.load_raw(i)[0]
        for k in range(12):
            seed = fastprep.draw_seed(torch.Generator().manual_seed(k))
            crop = T.RandomResizedCrop(OUT).make_params(seed, item.height, item.width)
            m, scaled = reduced_crop(crop, item.height, item.width, (OUT, OUT))
            got = _one(item, "reduced", k)
            if m == 8:
                want = _one(item, "exact", k)
            else:
                region = item.decode(scaled, scale=m, layout="HWC")
                want = resized_crop(region, 0, 0, region.shape[0], region.shape[1], OUT, OUT, "HWC")
            assert torch.equal(got, want), (i, k, crop, m)
            picked.add(m)
    assert picked == {2, 4, 8}


def test_a_loader_whose_windows_are_all_declined_gives_exacts_bits(pack):
    """The fused batch path: photos whose RandomResizedCrop windows never reach twice the output
    (as 500 x 375 photos for 224^2) read through jpeg_scale="reduced" give jpeg_scale="exact"'s batches."""
    small = [i for i in range(len(pack)) if min(pack.load_raw(i)[0].height, pack.load_raw(i)[0].width) < 2 * OUT]
    runs = {}
    for jpeg_scale in ("exact", "reduced"):
        tf = T.Compose([T.RandomResizedCrop(OUT, jpeg_scale=jpeg_scale), T.RandomHorizontalFlip()])
        loader = fastprep.Loader(pack, 4, transform=tf, seed=3, threads=2, sampler=small)
        runs[jpeg_scale] = [img.clone() for b in loader for img in b.data[0]]
    assert len(runs["exact"]) == len(small) > 0
    assert all(torch.equal(a, b) for a, b in zip(runs["exact"], runs["reduced"]))
