"""`diagnose` on an ImageFolder pipeline: JPEG files (mosaics of scikit-image's photos, 1024x1024,
quality 90) decoded by fastprep.io.ImageFolder.load_raw, the fused crop 256 -> mask -> YCbCr, and
a small CPU model step. The caching method should blame raw loading (the decode) first.

Run: python -m fastprep diagnose benchmarks.imagefolder_diagnose:factory --steps 10
"""

import atexit
import shutil
import tempfile

import torch

import fastprep.io as fio
from fastprep import transforms as T
from fastprep.tools.demo_model import train_step

FILES, SIZE, CLASSES = 64, 1024, 4


def make_folder(root: str, files: int = FILES, size: int = SIZE) -> str:
    """root/class_k/i.jpg: photo mosaics (fastprep.tools.photos.mosaic), rolled so every file differs."""
    from fastprep.tools.photos import write_mosaic_folder

    return write_mosaic_folder(root, files, size, CLASSES)


def factory(batch_size: int = 16):
    root = tempfile.mkdtemp(prefix="fastprep-imagefolder-")
    atexit.register(shutil.rmtree, root, True)
    train_tf = T.Compose([T.RandomCrop(256), T.RandomDilatedMask(0.25), T.RGBToYCbCr(out_dtype=torch.float32,
                                                                                     scale=1 / 255)])
    dataset = fio.ImageFolder(make_folder(root), transform=train_tf)
    step = train_step(CLASSES)  # diagnose --demo's model and step
    return dataset, step, batch_size
