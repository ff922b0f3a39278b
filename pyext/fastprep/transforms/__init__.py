"""torchvision-style transforms backed by fastprep ops.

Each transform is an nn.Module called like a torchvision v2 transform: on an image (a PIL image,
a numpy HWC array, a tensor: CHW, or HWC with layout="HWC", leading dims allowed), or on a
structured sample, a tuple, list or dict of tv_tensors (Image, Video, Mask, BoundingBoxes,
KeyPoints) and plain values, where one random draw applies to every spatial item (_sample.py has
the rules, torchvision v2's). Images come back as CHW tensors, tv_tensors keep their type.

Random transforms draw one int64 seed per sample from torch's generator (or `generator=`), so
torch.manual_seed and the DataLoader's per-worker seeding make them reproducible; they compose
with torchvision's Compose, and torchvision's transforms run inside fastprep's Compose, which also
fuses RandomCrop -> RandomDilatedMask -> RGBToYCbCr into the one op `crop_mask_ycbcr`, and
RandomResizedCrop or Resize (+ CenterCrop), flips, ToDtype, Normalize into `resized_crop`.

| module | what |
| --- | --- |
| inputs | PIL / numpy / tensor images, argument checks, error context |
| sample | structured samples: which leaf is what, sizes, rebuilding |
| window | crop windows, padding modes by index maps, resize, boxes through torchvision |
| geometry | RandomCrop (and what the geometric transforms share) |
| resized_crop | RandomResizedCrop |
| resize | Resize, CenterCrop (validation) |
| flips | RandomHorizontalFlip, RandomVerticalFlip, RandomRotate90 |
| normalize | Normalize |
| pixels | RandomDilatedMask, RGBToYCbCr |
| dtype | ToDtype, to_dtype_image |
| conversions | ToImage, PILToTensor (absorbed by fused runs), ToPILImage (ends fusion) |
| fusion_roles | FusionRole (a step's part in a fused op) and the rows' Patterns of roles |
| fold | where a fused op reads: Geometry, and how each geometric role moves it (FOLDS) |
| fused | the fused ops a plan calls: one row (Fusion) per op, the samples of one call (FusedRun) |
| group | FusedGroup: steps run as one op call, on one sample; what the Loader's batch path asks of it |
| plan | FusionPlan and its table: which steps run as one fused op (Compose's and the Loader's) |
| compose | Compose (a loop over its plan), SeedByIndex |
| workloads | seed_workload: the seed workload's Compose (benchmarks, tools, tests) |
"""

from fastprep.core._rng import thread_seeded
from fastprep.transforms._compose import Compose, SeedByIndex, fusable
from fastprep.transforms._conversions import PILToTensor, ToImage, ToPILImage
from fastprep.transforms._dtype import ToDtype, to_dtype_image
from fastprep.transforms._flips import RandomHorizontalFlip, RandomRotate90, RandomVerticalFlip
from fastprep.transforms._geometry import RandomCrop
from fastprep.transforms._inputs import as_image, require_rgb
from fastprep.transforms._normalize import Normalize
from fastprep.transforms._pixels import RandomDilatedMask, RGBToYCbCr
from fastprep.transforms._plan import FusionPlan
from fastprep.transforms._resize import CenterCrop, Resize
from fastprep.transforms._resized_crop import RandomResizedCrop
from fastprep.transforms._workloads import seed_workload

__all__ = [
    "CenterCrop", "Compose", "FusionPlan", "Normalize", "PILToTensor", "RGBToYCbCr", "RandomCrop", "RandomDilatedMask",
    "RandomHorizontalFlip", "RandomResizedCrop", "RandomRotate90", "RandomVerticalFlip", "Resize", "SeedByIndex",
    "ToDtype", "ToImage", "ToPILImage", "as_image", "fusable", "require_rgb", "seed_workload", "thread_seeded",
    "to_dtype_image",
]
