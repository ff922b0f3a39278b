"""fastprep.Loader over an ImageFolder of JPEG photos, decoded whole or by window (roi=True), into
the fused crop + mask + YCbCr op: what a training job reading files sees, per batch of 32.

Images: 48 files of 1024x1024 mosaics of scikit-image's photos (bench_decode.mosaic: Pillow,
quality 90, 4:2:0), 256x256 crops. The Loader decodes in its threads (the decoder releases the
GIL); with roi=True the fused path decodes only each crop's window (same bits: tests/io/test_io_folder.py).

Run: python -m pytest benchmarks/bench_imagefolder.py --benchmark-only -p no:logging
"""

import pytest
from bench_decode import mosaic

import fastprep
import fastprep.io as fio
from fastprep import transforms as T

pytestmark = pytest.mark.skipif(not fio.available(), reason="fastprep._jpeg not built (no libjpeg-turbo)")

FILES, BATCH = 48, 32


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    from PIL import Image

    root = tmp_path_factory.mktemp("photos")
    image = mosaic(1024)
    for k in range(FILES):
        cls = root / f"c{k % 4}"
        cls.mkdir(exist_ok=True)
        # Rolled copies: each file a different image of the same kind, so no decode is cached.
        Image.fromarray(image.take(range(k * 37, k * 37 + 1024), axis=1, mode="wrap")).save(
            cls / f"{k}.jpg", quality=90)
    return root


def _epoch_time(benchmark, folder, roi: bool, threads: int) -> None:
    benchmark.group = f"loader over JPEG files, threads={threads}, batch {BATCH}"
    tf = T.seed_workload(256)
    loader = fastprep.Loader(fio.ImageFolder(folder, roi=roi), BATCH, transform=tf, seed=0, threads=threads,
                             drop_last=True)

    def epoch():
        n = 0
        for batch in loader:
            n += batch.data[0].shape[0]
            batch.release()
        return n

    assert benchmark.pedantic(epoch, rounds=5, warmup_rounds=1) == FILES // BATCH * BATCH


@pytest.mark.parametrize("threads", [1, 2])
def test_loader_whole_decode(benchmark, folder, threads):
    """The baseline: ImageFolder decodes every file whole (what torchvision's does too)."""
    _epoch_time(benchmark, folder, False, threads)


@pytest.mark.parametrize("threads", [1, 2])
def test_loader_fastprep_roi_decode(benchmark, folder, threads):
    _epoch_time(benchmark, folder, True, threads)
