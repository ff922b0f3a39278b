"""Fusion rows declare what they make (FusedGroup.makes: every sample's image shape and dtype, from
the group's roles), and the Loader's slot ring allocates its image storage from that declaration;
a first sample whose image is of another kind (an image the op does not take, run step by step)
is laid out as it comes, as an unfused pipeline's is."""

import numpy as np
import pytest
import torch

import fastprep
import fastprep.batch._slots as slots
from fastprep import transforms as T

pytestmark = pytest.mark.one_backend  # layouts and shapes: no kernel's bits compared

PIPELINES = {  # name: (transform, what its fused op declares: (shape, dtype) or None)
    "crop mask ycbcr": (lambda: T.Compose([T.RandomCrop(20, layout="HWC"), T.RandomDilatedMask(0.25),
                                           T.RGBToYCbCr()]), ((3, 20, 20), torch.uint8)),
    "ycbcr to float": (lambda: T.Compose([T.RandomHorizontalFlip(), T.RandomCrop((16, 24), layout="HWC"),
                                          T.RandomDilatedMask(0.25), T.RGBToYCbCr(torch.float16)]),
                       ((3, 16, 24), torch.float16)),
    "resized crop": (lambda: T.Compose([T.RandomResizedCrop((12, 18)), T.RandomVerticalFlip()]),
                     ((3, 12, 18), torch.uint8)),
    "resize then center crop": (lambda: T.Compose([T.Resize(30), T.CenterCrop(20),
                                                   T.ToDtype(torch.float32, scale=True), T.Normalize([0.5], [0.2])]),
                                ((3, 20, 20), torch.float32)),
    "crop then resize": (lambda: T.Compose([T.RandomCrop(30), T.Resize((14, 10))]), ((3, 14, 10), torch.uint8)),
    "resize of the shorter side": (lambda: T.Compose([T.Resize(30), T.RandomHorizontalFlip()]), None),
}


def _images(n: int, c: int = 3) -> list[tuple[np.ndarray, int]]:
    rng = np.random.default_rng(n)
    return [(rng.integers(0, 256, (40 + 3 * i, 44 - 2 * i, c), dtype=np.uint8), i) for i in range(n)]


@pytest.mark.parametrize("name", PIPELINES)
def test_a_fused_row_declares_what_it_makes(name):
    make, declared = PIPELINES[name]
    group = T.FusionPlan.of(make()).fused
    assert group is not None and group.makes == declared
    made = {(tuple(out.shape), out.dtype) for out in (make()(image) for image, _ in _images(3))}  # numpy: HWC
    assert made == {declared} if declared is not None else len(made) == 3  # None: the size follows the image's


def test_the_loader_lays_its_images_out_from_the_declaration():
    transform = PIPELINES["crop mask ycbcr"][0]()
    loader = fastprep.Loader(_images(8), 4, transform=transform, seed=1, threads=1)
    batches = [b.data[0].clone() for b in loader]
    ring = loader.spare_ring.ring
    assert ring.image == ((3, 20, 20), torch.uint8) and all(tuple(b.shape) == (4, 3, 20, 20) for b in batches)


def test_the_declared_storage_is_the_slots_or_dropped_for_another_kind():
    ring = slots.SlotRing(2, 4, pin=False, image=((3, 5, 6), torch.uint8))
    declared = [t.data_ptr() for t in ring._declared]
    ring.ensure_spec((torch.zeros(3, 5, 6, dtype=torch.uint8), 1), 0)
    assert [ring.storage(k)[0].data_ptr() for k in range(2)] == declared
    other = slots.SlotRing(2, 4, pin=False, image=((3, 5, 6), torch.uint8))
    other.ensure_spec((torch.zeros(1, 5, 6, dtype=torch.uint8), 1), 0)  # a grey image, run step by step
    assert tuple(other.storage(0)[0].shape) == (4, 1, 5, 6) and other._declared is None
    later = slots.SlotRing(2, 4, pin=False, image=((3, 5, 6), torch.uint8))
    declared = [t.data_ptr() for t in later._declared]
    later.ensure_spec({"label": 1, "image": torch.zeros(3, 5, 6, dtype=torch.uint8)}, 0)  # not the first field
    assert [later.storage(k)[1].data_ptr() for k in range(2)] == declared


def test_images_the_op_does_not_take_are_laid_out_as_they_come():
    transform = T.Compose([T.RandomResizedCrop(12), T.RandomHorizontalFlip()])  # the op takes RGB only
    loader = fastprep.Loader(_images(6, c=1), 3, transform=transform, seed=2, threads=1)
    assert [tuple(b.data[0].shape) for b in loader] == [(3, 1, 12, 12)] * 2
