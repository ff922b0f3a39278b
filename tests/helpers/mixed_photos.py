"""A map-style dataset of RGB images of mixed sizes (numpy HWC arrays, or PIL images), for the
Loader's fused rows against SeedByIndex + DataLoader with the unfused steps."""

import numpy as np
from torch.utils.data import Dataset

SIZES = [(60, 80), (80, 52), (45, 45), (70, 96), (50, 66)]


class Photos(Dataset):
    """(image, label) for i in range(n): the pool's image i % len(pool), transformed, and i; the
    pool is `sizes`' random images (seed 1), as PIL images with `as_pil`."""

    def __init__(self, transform=None, as_pil=False, n=20, sizes=SIZES):
        rng = np.random.default_rng(1)
        self.pool = [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for h, w in sizes]
        if as_pil:
            import PIL.Image  # noqa: PLC0415 (only the PIL cases need it)

            self.pool = [PIL.Image.fromarray(a) for a in self.pool]
        self.transform, self.n = transform, n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        image = self.pool[i % len(self.pool)]
        return (self.transform(image) if self.transform is not None else image), i
