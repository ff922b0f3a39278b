"""The decode split's test photos and pipelines (Loader(decode_on=...)): every row of the fusion
table, and the batches a Loader yields, kept."""

import torch

import fastprep
from fastprep import transforms as T

from helpers.jpeg_photos import grey_jpeg, photo_jpeg

FILES = {
    "a/420.jpg": lambda: photo_jpeg("coffee", "4:2:0", False, (181, 203)),
    "a/422p.jpg": lambda: photo_jpeg("chelsea", "4:2:2", True, (150, 163)),
    "b/444.jpg": lambda: photo_jpeg("astronaut", "4:4:4", False, (131, 157)),
    "b/grey.jpg": lambda: grey_jpeg(False, (91, 130)),
    "b/420b.jpg": lambda: photo_jpeg("rocket", "4:2:0", False, (97, 250)),
}


def pipeline(flips: str = "before", out_dtype=None, scale: float = 1.0):
    """The crop + mask + YCbCr row: RandomCrop(48) with flips before or after, or quarter turns
    ("turns": around a square crop; "turn, crop not square": before a 48 x 40 one)."""
    crop = [T.RandomCrop(48)]
    steps = {"none": crop, "before": [T.RandomHorizontalFlip(), *crop], "after": [*crop, T.RandomHorizontalFlip()],
             "turns": [T.RandomRotate90(), *crop, T.RandomVerticalFlip(), T.RandomRotate90(p=0.7)],
             "turn, crop not square": [T.RandomHorizontalFlip(), T.RandomRotate90(), T.RandomCrop((48, 40))]}
    return T.Compose([*steps[flips], T.RandomDilatedMask(0.25), T.RGBToYCbCr(out_dtype, scale)])


MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def resized(kind: str = "rrc", flips: str = "before", normalize: bool = True):
    """The resized-crop row: RandomResizedCrop(40) or Resize(64) + CenterCrop(48), flips or quarter
    turns, ToDtype (+ Normalize)."""
    window = [T.RandomResizedCrop(40)] if kind == "rrc" else [T.Resize(64), T.CenterCrop(48)]
    # "turns": quarter turns after the resize (around Resize's crop: its turns' sizes differ per sample)
    turns = [window[0], T.RandomRotate90(), *window[1:], T.RandomVerticalFlip(), T.RandomRotate90(p=0.7)]
    steps = {"none": window, "before": [T.RandomHorizontalFlip(), *window],
             "after": [*window, T.RandomHorizontalFlip(), T.RandomVerticalFlip()], "turns": turns}[flips]
    tail = [T.ToDtype(torch.float32, scale=True), *([T.Normalize(MEAN, STD)] if normalize else [])]
    return T.Compose([*steps, *tail] if kind == "rrc" or normalize else steps)


def batches(dataset, **kw):
    """Every batch's fields, kept (a batch without decode is valid until the next is asked for)."""
    return [tuple(x.clone() for x in (b.data if isinstance(b, fastprep.CompactBatch) else b))
            for b in fastprep.Loader(dataset, **kw)]
