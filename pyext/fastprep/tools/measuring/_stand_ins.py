"""The datasets and loaders the caching method swaps in, and how it finds raw loading and the
transforms inside a dataset.

Splitting a dataset into raw loading and transforms (`split_dataset`), first match wins, walking
down through wrappers:

1. ``load_raw(i)`` and ``apply_transform(raw)`` on the dataset: used as they are.
2. a ``transform`` attribute (torchvision's convention): the item fetched from a shallow copy
   whose ``transform`` (and joint ``transforms``, when set) is the identity is the raw sample; the
   transform is applied to its first element when it is a tuple or list (``(image, target)``),
   else to it.
3. a wrapped dataset in ``.dataset`` (fastprep's SeedByIndex, torch's Subset, any wrapper storing
   its inner dataset there): the split of that inner dataset, with a Subset's ``indices`` mapping
   the index. Work a wrapper does itself is then counted as raw loading.

The cached raw sample of level 4 is decoded (`decoded`): a fastprep.io.WindowedImage (a JpegFile
of ImageFolder(roi=True), a packed record) becomes its pixels and a lazily opened PIL image is
loaded, so that decoding, wherever it happens in the pipeline (a crop reading a JPEG window
included), is billed to raw loading and never to the transforms.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from torch.utils.data import DataLoader, Dataset, RandomSampler, Subset

from fastprep.core._tree import tree_map
from fastprep.io._windowed import WindowedImage


class RawSplit:
    """Raw loading and transforms of a dataset: `load(i)` and `apply(raw)`; `path` says how the
    split was found (e.g. "SeedByIndex.dataset -> ImageFolder.transform")."""

    def __init__(self, inner: Any, how: str, maps: list[Any], path: str):
        self.inner, self.how, self.maps, self.path = inner, how, maps, path
        if how == "transform":
            self.bare = copy.copy(inner)
            # The identity, not None: a dataset may call its transform without checking for None.
            self.bare.transform = identity if inner.transform is not None else None
            if getattr(inner, "transforms", None) is not None:
                self.bare.transforms = joint_identity

    def load(self, i: int) -> Any:
        for indices in self.maps:
            i = indices[i]
        if self.how == "load_raw":
            return self.inner.load_raw(i)
        return self.bare[i]

    def apply(self, raw: Any) -> Any:
        if self.how == "load_raw":
            return self.inner.apply_transform(raw)
        return apply_to_image(self.inner.transform, raw, getattr(self.inner, "transforms", None))


def identity(x: Any) -> Any:
    return x


def joint_identity(*xs: Any) -> Any:
    return xs


def apply_to_image(transform: Any, raw: Any, joint: Any = None) -> Any:
    """`transform` on the image of a raw sample: its first element when it is a tuple or list;
    or, without `transform`, a joint ``transforms(image, target)``."""
    if transform is None:
        return joint(*raw) if joint is not None and isinstance(raw, (tuple, list)) else raw
    if isinstance(raw, (tuple, list)) and raw:
        items = [transform(raw[0]), *raw[1:]]
        return items if isinstance(raw, list) else tuple(items)
    return transform(raw)


def decoded(raw: Any) -> Any:
    """`raw` with its images decoded, as level 4 caches it: every WindowedImage (JpegFile,
    PackedJpeg, ...) replaced by ``decode()`` (its whole image, in its own layout: what a
    transform that is not fastprep's gets, and what fastprep's crop cuts the same window from,
    same bits), every PIL image loaded (``Image.open`` decodes only on first access)."""
    def one(x: Any) -> Any:
        if isinstance(x, WindowedImage):
            pixels = x.decode()
            return pixels if pixels.is_contiguous() else pixels.contiguous()  # a packed raw record's map view
        if callable(getattr(x, "load", None)) and type(x).__module__.startswith("PIL."):
            x.load()
        return x

    return tree_map(one, raw)


def split_dataset(dataset: Any) -> RawSplit:
    """Find raw loading and the transforms in `dataset` (see the module doc), or raise TypeError
    saying what was looked for."""
    d, maps, path = dataset, [], []
    for _ in range(32):  # a wrapper chain deeper than this is a cycle
        name = type(d).__name__
        if callable(getattr(d, "load_raw", None)) and callable(getattr(d, "apply_transform", None)):
            return RawSplit(d, "load_raw", maps, " -> ".join([*path, f"{name}.load_raw/apply_transform"]))
        if hasattr(d, "transform") and not isinstance(d, _View):
            return RawSplit(d, "transform", maps, " -> ".join([*path, f"{name}.transform"]))
        inner = getattr(d, "dataset", None)
        if inner is None:
            break
        if isinstance(d, Subset):
            maps.insert(0, d.indices)  # applied outermost first
        path.append(f"{name}.dataset")
        d = inner
    chain = " -> ".join([*path, type(d).__name__])
    raise TypeError(f"{chain} has neither load_raw(i) + apply_transform(raw), nor a `transform` "
                    f"attribute, nor a wrapped `.dataset`")


class _View(Dataset):
    """Base of the stand-ins: `length` items; attributes other than its own come from `like`
    (a Loader reads `transform` to decide how to seed, a wrapper's `load_raw` must map indices)."""

    def __init__(self, length: int, like: Any = None):
        self.length, self.like = length, like

    def __len__(self) -> int:
        return self.length

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("length", "like", "inner", "make"):
            raise AttributeError(name)  # unpickling looks these up before __init__ ran
        like = self.__dict__.get("like")
        if like is None or name == "load_raw":
            raise AttributeError(name)
        return getattr(like, name)


class Repeat(_View):
    """`make()` for every index: one sample, cached, `length` times."""

    def __init__(self, make: Callable[[], Any], length: int, like: Any = None):
        super().__init__(length, like)
        self.make = make

    def __getitem__(self, i: int) -> Any:
        return self.make()


class Cycle(_View):
    """`inner` repeated to `length` items (item i is inner[i % len(inner)]), so one epoch of it
    lasts a whole measurement: no epoch restart, no worker start-up inside the timed window."""

    def __init__(self, inner: Any, length: int):
        super().__init__(length, inner)
        self.inner = inner

    def __getitem__(self, i: int) -> Any:
        return self.inner[i % len(self.inner)]

    @property
    def load_raw(self) -> Callable[[int], Any]:
        load = getattr(self.inner, "load_raw", None)
        if load is None:
            raise AttributeError("load_raw")
        return _Modulo(load, len(self.inner))


class _Modulo:
    def __init__(self, fn: Callable[[int], Any], n: int):
        self.fn, self.n = fn, n

    def __call__(self, i: int) -> Any:
        return self.fn(i % self.n)


class Constant:
    def __init__(self, value: Any):
        self.value = value

    def __call__(self) -> Any:
        return self.value


class TransformOf:
    """The transforms of `split` run on one cached raw sample, every call."""

    def __init__(self, split: RawSplit, raw: Any):
        self.split, self.raw = split, raw

    def __call__(self) -> Any:
        return self.split.apply(self.raw)


class LoaderTransformOf:
    """A fastprep.Loader's `transform` run on one cached raw sample, every call."""

    def __init__(self, transform: Any, raw: Any):
        self.transform, self.raw = transform, raw

    def __call__(self) -> Any:
        return apply_to_image(self.transform, self.raw)


def rebuild_dataloader(loader: DataLoader, dataset: Any, **changes: Any) -> DataLoader:
    """A DataLoader like `loader` (workers, collate, pinning, prefetch, persistence, ...) over
    `dataset`, with `changes` (DataLoader keywords) applied. A custom sampler is replaced by a
    sequential or random one over the new dataset."""
    if loader.batch_size is None:
        raise TypeError("diagnose: a DataLoader with a batch_sampler (batch_size=None) cannot be rebuilt "
                        "over a stand-in dataset; give batch_size and a sampler instead")
    kwargs: dict[str, Any] = dict(
        batch_size=loader.batch_size, shuffle=isinstance(loader.sampler, RandomSampler),
        num_workers=loader.num_workers, collate_fn=loader.collate_fn, pin_memory=loader.pin_memory,
        drop_last=loader.drop_last, timeout=loader.timeout, worker_init_fn=loader.worker_init_fn,
        multiprocessing_context=loader.multiprocessing_context, generator=loader.generator,
        persistent_workers=loader.persistent_workers)
    if loader.num_workers > 0:
        kwargs["prefetch_factor"] = loader.prefetch_factor
    if getattr(loader, "pin_memory_device", ""):
        kwargs["pin_memory_device"] = loader.pin_memory_device
    if hasattr(loader, "in_order"):
        kwargs["in_order"] = loader.in_order
    kwargs.update(changes)
    if kwargs["num_workers"] == 0:  # DataLoader refuses these without workers
        kwargs.pop("prefetch_factor", None)
        kwargs["persistent_workers"] = False
    return DataLoader(dataset, **kwargs)


SAME = object()  # rebuild_fastprep_loader: keep the loader's transform


def rebuild_fastprep_loader(loader: Any, dataset: Any, transform: Any = SAME, **changes: Any) -> Any:
    """A fastprep.Loader like `loader` (threads, depth, device, expand, seed, ...) over `dataset`,
    with `changes` (any Loader keyword, batch_size included) applied."""
    from fastprep.loader import Loader  # noqa: PLC0415 (the Loader pulls in the slots machinery)

    batch_size = changes.pop("batch_size", loader.batch_size)
    kwargs: dict[str, Any] = dict(
        transform=loader.transform if transform is SAME else transform, shuffle=loader.shuffle,
        drop_last=loader.drop_last, threads=loader.threads, device=loader.device, depth=loader.depth,
        expand=loader.expand, seed=loader.seed)
    kwargs.update(changes)
    return Loader(dataset, batch_size, **kwargs)
