"""`python -m fastprep diagnose --demo`: a small CNN trained on the target pipeline, on CPU."""

from __future__ import annotations

import torch
from torch import nn

from fastprep.tools import pipelines


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


def demo_factory(length: int = 512, batch_size: int = 16):
    """(dataset, step_fn, batch_size) for the usual pipeline feeding TinyNet."""
    torch.manual_seed(0)
    dataset = pipelines.SyntheticImages(length, pipelines.usual_transform, pool=4, as_pil=True)
    model = TinyNet()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step(batch):
        images, labels = batch
        loss = nn.functional.cross_entropy(model(images), labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.detach()

    return dataset, step, batch_size
