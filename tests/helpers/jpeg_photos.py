"""Real photos written as JPEGs for the fastprep.io tests: scikit-image's data images (shipped
with the package, no download) encoded by Pillow with the settings under test."""

import io
import subprocess
import sys
from functools import cache

import numpy as np
import pytest

import fastprep.io as fio

needs_decoder = pytest.mark.skipif(not fio.available(), reason="fastprep._jpeg not built: " + fio.jpeg.INSTALL_HINT)

SUBSAMPLINGS = {"4:4:4": 0, "4:2:2": 1, "4:2:0": 2}  # Pillow's subsampling codes
PHOTOS = ("astronaut", "coffee", "chelsea", "rocket", "hubble_deep_field", "immunohistochemistry")


@cache
def photo(name: str) -> np.ndarray:
    data = pytest.importorskip("skimage.data", reason="the test photos come from scikit-image")
    return np.ascontiguousarray(getattr(data, name)())


def encode(arr: np.ndarray, quality: int = 90, subsampling: str = "4:2:0", progressive: bool = False,
           **kw) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="JPEG", quality=quality, subsampling=SUBSAMPLINGS[subsampling],
                              progressive=progressive, **kw)
    return buf.getvalue()


@cache
def photo_jpeg(name: str, subsampling: str = "4:2:0", progressive: bool = False,
               shape: tuple[int, int] | None = None) -> bytes:
    """Photo `name`, cut to `shape` (odd sizes test partial iMCUs), as a quality-90 JPEG."""
    arr = photo(name)
    if shape is not None:
        arr = np.ascontiguousarray(arr[:shape[0], :shape[1]])
    return encode(arr, subsampling=subsampling, progressive=progressive)


@cache
def grey_jpeg(progressive: bool = False, shape: tuple[int, int] = (512, 512)) -> bytes:
    arr = photo("camera")[:shape[0], :shape[1]]
    return encode(np.ascontiguousarray(arr), subsampling="4:4:4", progressive=progressive)


def write_tree(root, files: dict) -> None:
    """Writes each relative path of `files` (a folder tree of class subfolders) with the bytes its
    function makes."""
    for rel, make in files.items():
        (root / rel).parent.mkdir(exist_ok=True)
        (root / rel).write_bytes(make())


def packed_tree(root, files: dict, shard_bytes: int = 1 << 14):
    """`files` written under root/src (write_tree) and packed into root/pack, in small shards so a
    few photos make several; returns root/pack."""
    (root / "src").mkdir()
    write_tree(root / "src", files)
    fio.pack(root / "src", root / "pack", progress=False, shard_bytes=shard_bytes)
    return root / "pack"


def folder_with_a_cut_jpeg(root, counts: dict[str, int], shape: tuple[int, int], bad: int):
    """Class folders of noise JPEGs (quality 90), `counts[cls]` in each, numbered across the classes
    (cat/0.jpg, ..., dog/4.jpg); file number `bad` cut in half (in its scan, as a truncated
    download is). Returns that file's path."""
    rng = np.random.default_rng(0)
    paths = []
    for cls, n in counts.items():
        (root / cls).mkdir(parents=True, exist_ok=True)
        for _ in range(n):
            paths.append(root / cls / f"{len(paths)}.jpg")
            paths[-1].write_bytes(encode(rng.integers(0, 256, (*shape, 3), dtype=np.uint8)))
    data = paths[bad].read_bytes()
    paths[bad].write_bytes(data[:len(data) // 2])
    return paths[bad]


def pil_decode(data: bytes, mode: str = "RGB") -> np.ndarray:
    from PIL import Image

    with Image.open(io.BytesIO(data)) as img:
        return np.array(img.convert(mode))


def child_outcomes(code: str) -> list[int]:
    """Run `code` in a child process (a crash or exit() there fails the test, not the suite) and
    return the ints its last line prints: the counts of the outcomes it saw."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return [int(v) for v in out.stdout.split("\n")[-2].split()]
