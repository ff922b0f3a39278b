"""Checks every fastprep.io dataset source passes: fastprep's transforms on its items (read by
window) give the bits of the same transforms on the decoded images, through a DataLoader with 0
and 2 workers and through fastprep.Loader."""

import torch
from torch.utils.data import DataLoader

import fastprep
from fastprep import transforms as T
from fastprep.core._rng import item_seed, seeded

SEED = 11


def train_tf(fuse: bool = True) -> T.Compose:
    return T.seed_workload(64, fuse=fuse)


def expected_sample(image: torch.Tensor, seed: int) -> torch.Tensor:
    """The unfused steps on a decoded CHW image under `seed`, as SeedByIndex runs a sample."""
    with seeded(seed):
        return train_tf(fuse=False)(image)


def collect(batches) -> tuple[torch.Tensor, torch.Tensor]:
    images, labels = [], []
    for b in batches:
        x, y = b.data if isinstance(b, fastprep.CompactBatch) else b
        images.append(x.clone())
        labels.append(torch.as_tensor(y).clone())
    return torch.cat(images), torch.cat(labels)


def check_map_source(make, decoded: list[torch.Tensor], labels: list[int]) -> None:
    """`make(transform)` builds the source; `decoded[i]` is item i's image decoded whole (CHW).
    SeedByIndex + DataLoader (0 and 2 workers) and fastprep.Loader (2 threads, the fused path)
    must all give the decoded images' bits."""
    want = torch.stack([expected_sample(img, item_seed(SEED, i, 0)) for i, img in enumerate(decoded)])
    runs = {f"DataLoader, {w} workers": DataLoader(T.SeedByIndex(make(train_tf()), seed=SEED), batch_size=3,
                                                   num_workers=w, collate_fn=fastprep.compact_collate)
            for w in (0, 2)}
    runs["Loader, 2 threads"] = fastprep.Loader(make(None), 3, transform=train_tf(), seed=SEED, threads=2)
    for what, loader in runs.items():
        images, got_labels = collect(loader)
        assert torch.equal(images, want), what
        assert got_labels.tolist() == labels, what
