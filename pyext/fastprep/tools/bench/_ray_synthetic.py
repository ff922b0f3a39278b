"""The benchmark's synthetic images as a Ray dataset (`python -m fastprep bench --ray` and the Ray
tests): the same rows as pipelines.SyntheticImages, so Ray and the DataLoader pipelines are
measured on the same data."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import ray.data

from fastprep.tools.bench._pipelines import NUM_CLASSES, SOURCE_SIZE, make_source


@functools.lru_cache(maxsize=4)
def _source_pool(pool: int, seed: int, size: int) -> np.ndarray:
    return np.stack([make_source(i, seed, size) for i in range(pool)])


class SyntheticSource:
    """`load` for synthetic_images(decoded=False): source index -> the HWC uint8 image, from a
    pool made once per Ray worker process (it stands in for decoding a file)."""

    def __init__(self, pool: int = 8, seed: int = 0, size: int | None = None):
        self.pool, self.seed, self.size = pool, seed, size or SOURCE_SIZE

    def __call__(self, index: Any) -> np.ndarray:
        return _source_pool(self.pool, self.seed, self.size)[int(index) % self.pool]


def _synthetic_rows(batch: dict[str, np.ndarray], source: SyntheticSource | None,
                    num_classes: int) -> dict[str, np.ndarray]:
    ids = batch["id"]
    image = ids if source is None else np.stack([source(i) for i in ids])
    return {"id": ids, "image": image, "label": ids % num_classes}


def synthetic_images(n: int, pool: int = 8, seed: int = 0, size: int | None = None,
                     decoded: bool = True) -> ray.data.Dataset:
    """Ray's twin of pipelines.SyntheticImages: rows {id, image, label}, row i holding
    the image and label of SyntheticImages(...).load_raw(i). With decoded=False the image column
    holds the source index and ``CompactMap(..., load=SyntheticSource(pool, seed, size))``
    makes the image in the task that transforms it (as a decode would), so no 3 MB sources
    travel through the object store."""
    source = SyntheticSource(pool, seed, size) if decoded else None
    return ray.data.range(n).map_batches(_synthetic_rows, batch_format="numpy",
                                         fn_kwargs=dict(source=source, num_classes=NUM_CLASSES))
