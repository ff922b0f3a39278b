"""`python -m fastprep diagnose --demo`: a small CNN trained on an ImageFolder of JPEG photos, fed
the usual way and the fastprep way, on CPU. The two ports are also what the diagnose reliability
test and benchmarks/imagefolder_diagnose.py run.

- usual (the torchvision port): DataLoader over a torchvision-style ImageFolder (Pillow decodes
  each file whole in ``__getitem__``, then its ``transform`` attribute runs) with the target
  workload's usual transform (PIL -> tensor, float crop / mask / YCbCr) and default_collate,
  float32 batches;
- fastprep: fastprep.Loader over fastprep.io.ImageFolder(roi=True), the fused
  crop -> dilated mask -> YCbCr Compose decoding only each crop's window (libjpeg-turbo, in the
  Loader's threads) straight into its batch slots, CompactBatch expanded (/255) before the step.
  Without fastprep's JPEG decoder (fastprep.io.available() False) the files are decoded whole
  by Pillow into HWC arrays instead.

`pool` > 1 trains on the batch average-pooled by that factor: a step as fast, next to the CPU's
decoding, as an accelerator's (the reliability test and the benchmark use 4).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader

import fastprep.tools.bench._pipelines as pipelines


class TinyNet(nn.Module):
    """Small enough that a CPU step is cheap next to the usual pipeline's transforms."""

    def __init__(self, num_classes: int = pipelines.NUM_CLASSES):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 16, 5, stride=4), nn.ReLU(),
                                      nn.Conv2d(16, 32, 3, stride=4), nn.ReLU(),
                                      nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.head = nn.Linear(32, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


def train_step(num_classes: int, device: str = "cpu", pool: int = 1):
    """A step function training a fresh TinyNet on `device`: takes (images float32 NCHW, int64
    labels) already there; with `pool` > 1, on the images average-pooled by that factor."""
    torch.manual_seed(0)
    model = TinyNet(num_classes).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step(batch: Any) -> torch.Tensor:
        images, labels = batch
        if pool > 1:
            images = nn.functional.avg_pool2d(images, pool)
        loss = nn.functional.cross_entropy(model(images), labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.detach()

    return step


def usual_pipeline(root: str, batch_size: int = 8, workers: int = 0, device: str = "cpu",
                   pool: int = 1) -> tuple[DataLoader, Any]:
    """(DataLoader, step_fn): Pillow decode in the dataset, the usual float transform, default_collate."""
    from fastprep.tools.photos import ImageFolder  # noqa: PLC0415

    dataset = ImageFolder(root, transform=pipelines.usual_transform)
    loader = DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=workers,
                        pin_memory=torch.device(device).type == "cuda")
    return loader, train_step(len(dataset.classes), device, pool)


def fastprep_pipeline(root: str, batch_size: int = 8, threads: int = 1, device: str = "cpu",
                      pool: int = 1) -> tuple[Any, Any]:
    """(fastprep.Loader, step_fn): ImageFolder(roi=True), the fused transform decoding each crop's
    window into the slots, CompactBatch expanded /255 (see the module doc without the decoder)."""
    import fastprep  # noqa: PLC0415
    import fastprep.io as fio  # noqa: PLC0415
    from fastprep import transforms as T  # noqa: PLC0415
    from fastprep.tools import photos  # noqa: PLC0415

    if fio.available():
        dataset, layout = fio.ImageFolder(root, roi=True), "CHW"
    else:
        dataset, layout = photos.ImageFolder(root, loader=photos.decode_array), "HWC"
    loader = fastprep.Loader(dataset, batch_size, transform=T.seed_workload(layout=layout), shuffle=True,
                             threads=threads, device=None if device == "cpu" else device, expand=True, seed=0)
    return loader, train_step(len(dataset.classes), device, pool)


def demo_factory(length: int = 512, batch_size: int = 16):
    """(dataset, step_fn, batch_size) for the usual pipeline on synthetic sources feeding TinyNet
    (a factory in the CLI's first form, without photos)."""
    dataset = pipelines.SyntheticImages(length, pipelines.usual_transform, pool=4, as_pil=True)
    return dataset, train_step(pipelines.NUM_CLASSES), batch_size
