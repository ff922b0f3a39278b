"""The user `python -m fastprep bench --data DIR --transform MODULE:ATTR` measures: a transform module
written per test, and a minimal torchvision stand-in (the same class names, in modules named
torchvision.*) where torchvision does not import (tests/tools/conftest.py's `user` fixture)."""

import sys
import textwrap
import types

import numpy as np
import torch
from PIL import Image

import fastprep.tools.bench._usual as bench_usual

from helpers.foreign_steps import ForeignCompose

QUICK_BENCH = ["--cores", "1", "--batch-size", "2", "--seconds", "0", "--quick"]  # bench's shortest run


class _Step:
    def __init__(self, **kwargs):
        self.__dict__.update(kwargs)


def fake_v2():
    """A torchvision.transforms.v2 stand-in: the attributes the port reads, and calls that work on
    PIL images (the usual pipeline runs them)."""
    v2 = types.ModuleType("torchvision.transforms.v2")

    class Compose(ForeignCompose):
        pass

    class RandomResizedCrop(_Step):
        def __init__(self, size):
            super().__init__(size=[size, size], scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3), interpolation="bilinear",
                             antialias=True)

        def __call__(self, img):
            if isinstance(img, torch.Tensor):  # a CHW tensor (ToImage first, or a pack decoded by fastprep)
                return torch.nn.functional.interpolate(img[None].float(), self.size)[0].to(img.dtype)
            return img.resize(tuple(self.size))

    class ToImage(_Step):
        def __call__(self, img):
            return img if isinstance(img, torch.Tensor) else torch.from_numpy(np.array(img)).permute(2, 0, 1)

    class ToDtype(_Step):
        def __init__(self, dtype, scale=False):
            super().__init__(dtype=dtype, scale=scale)

        def __call__(self, x):
            return x.to(self.dtype) / (255 if self.scale else 1)

    class GaussianBlur(_Step):  # no port in fastprep
        def __init__(self, kernel_size):
            super().__init__(kernel_size=kernel_size)

        def __call__(self, x):
            return x

    for cls in (Compose, RandomResizedCrop, ToImage, ToDtype, GaussianBlur):
        cls.__module__ = "torchvision.transforms.v2._fake"
        setattr(v2, cls.__name__, cls)
    return v2


def fake_v1(transforms):
    """torchvision.transforms' v1 classes on `transforms` (a stand-in module): they take PIL images
    only, as torchvision's ToTensor does (ColorJitter has no port in fastprep)."""

    def pil_only(img, step):
        if not isinstance(img, Image.Image):
            raise TypeError(f"{step}: pic should be PIL Image. Got {type(img)}")

    class Compose(ForeignCompose):
        pass

    class CenterCrop(_Step):
        def __init__(self, size):
            super().__init__(size=(size, size))

        def __call__(self, img):
            pil_only(img, "CenterCrop")
            left, top = (img.width - self.size[1]) // 2, (img.height - self.size[0]) // 2
            return img.crop((left, top, left + self.size[1], top + self.size[0]))

    class ColorJitter(_Step):
        def __init__(self, brightness):
            super().__init__(brightness=(1 - brightness, 1 + brightness), contrast=None, saturation=None, hue=None)

        def __call__(self, img):
            pil_only(img, "ColorJitter")
            return img

    class ToTensor(_Step):
        def __call__(self, img):
            pil_only(img, "ToTensor")
            return torch.from_numpy(np.array(img)).permute(2, 0, 1).float() / 255

    for cls in (Compose, CenterCrop, ColorJitter, ToTensor):
        cls.__module__ = "torchvision.transforms.transforms"
        setattr(transforms, cls.__name__, cls)


USER_MODULE = """
import torch
from torchvision import transforms as v1
from torchvision.transforms import v2

ported = v2.Compose([v2.RandomResizedCrop(32), v2.ToImage(), v2.ToDtype(torch.float32, scale=True)])
blurred = v2.Compose([v2.ToImage(), v2.RandomResizedCrop(32), v2.GaussianBlur(3), v2.ToDtype(torch.float32)])
jittered = v1.Compose([v1.CenterCrop(32), v1.ColorJitter(0.2), v1.ToTensor()])  # v1: PIL images only
NUMBER = 5


def make():
    return v2.Compose([v2.RandomResizedCrop(32), v2.ToImage(), v2.ToDtype(torch.float32, scale=True)])


def broken(image):
    raise RuntimeError("boom")
"""


def user_module(tmp_path, monkeypatch):
    """Writes the user's transform module (a fresh name per tmp_path) and makes it importable, with
    torchvision faked in where it does not import; yields its name, then forgets the module."""
    real, _ = bench_usual.torchvision_v2()
    if real is None:
        from fastprep.tools import photos

        tv = types.ModuleType("torchvision")
        tv.__version__ = "0.0+fake"
        datasets, transforms = types.ModuleType("torchvision.datasets"), types.ModuleType("torchvision.transforms")
        datasets.ImageFolder = photos.ImageFolder  # the same layout, order and Pillow loader
        transforms.v2 = fake_v2()
        fake_v1(transforms)
        for name, module in [("torchvision", tv), ("torchvision.datasets", datasets),
                             ("torchvision.transforms", transforms), ("torchvision.transforms.v2", transforms.v2)]:
            monkeypatch.setitem(sys.modules, name, module)
    name = f"user_tf_{abs(hash(str(tmp_path))) % 10**8}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(USER_MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


