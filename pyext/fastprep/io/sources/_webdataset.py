"""fastprep.io.WebDataset: tar shards in the `webdataset` library's layout as an IterableDataset
(DataLoader workers, many ranks), JPEG members as window-decodable JpegFiles.

Order. Each epoch the shard list is shuffled by (seed, epoch) (``shuffle=True``), dealt to the
ranks (``shards[rank::world_size]``) and then to the readers of a rank (``[part::parts]``: the
DataLoader's workers, or a thread-based loader's readers). Each reader streams its shards in turn
through a shuffle buffer of `buffer` samples seeded by (seed, epoch, its shards). Over an epoch
the ranks together read every shard, hence every sample, exactly once.

Randomness. The transform of the sample with key k runs under ``item_seed(seed, k, epoch)``
(torch's generator seeded, as SeedByIndex does by index): a sample's bits do not depend on the
order, the worker, the rank or the buffer. Keys must be unique across the shards. A key of
decimal digits seeds as its number (``"00000007"`` as 7): shards that write_webdataset wrote
from a map-style dataset give the bits SeedByIndex gives that dataset in a DataLoader.

Policy when shards are few. A rank with no shard at all is an error (``len(shards) <
world_size``): it would deliver no batch and a DDP job would wait for it forever. A reader with no
shard (more DataLoader workers than the rank's shards) reads nothing; the rank's other readers
still read all its shards. Ranks get ``len(shards) // world_size`` shards, one more for the first
``len(shards) % world_size``: with shards of equal size (``write_webdataset``'s `maxcount`) and a
shard count divisible by the world size, every rank gets the same number of samples (what DDP's
lock-step needs; otherwise use torch.distributed.algorithms.Join or drop the epoch's tail).

The contract a thread-based loader uses (no processes, no pickling):

- ``set_epoch(e)``: the epoch the next iteration reads (the shard order, the buffers, the seeds).
- ``shards_for(epoch, part, parts)``: reader `part` of `parts` on this rank: its shard list.
- ``raw_samples(shards, epoch)``: (key, sample before the transform) from those shards, through
  the shuffle buffer; images are JpegFiles with ``roi=True``.
- ``apply_transform(raw)`` under ``item_seed(seed, key, epoch)`` (``sample_seed(key, epoch)``), in
  any thread: fastprep's transforms read each JpegFile by window.

``iter(dataset)`` does exactly that for one reader per DataLoader worker (or one in-process).
DataLoader workers get a fresh copy of the dataset each epoch, so ``set_epoch`` on the main copy
reaches them, unless ``persistent_workers=True`` (then the workers keep the epoch they started with).
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from fastprep.core._args import check_bool, check_int
from fastprep.core._rng import check_epoch, draw_seed, item_seed, seed_argument, seeded
from fastprep.io._source import apply_transform, distributed_rank
from fastprep.io.jpeg import check_image_args
from fastprep.io.sources._tar_shards import MemberDecoder, expand_urls, grouped, open_url, shard_members

DEFAULT_FIELDS = ("jpg;jpeg;png", "cls")


def shuffled(items: Iterator[Any], size: int, rng: random.Random) -> Iterator[Any]:
    """`items` through a buffer of `size`: each new item replaces a random one, which is yielded."""
    buf: list[Any] = []
    for x in items:
        if len(buf) < size:
            buf.append(x)
            continue
        k = rng.randrange(size)
        yield buf[k]
        buf[k] = x
    rng.shuffle(buf)
    yield from buf


class WebDataset(torch.utils.data.IterableDataset):
    """Samples of tar shards in webdataset's layout (``0001.jpg``, ``0001.cls``, ...), read as a
    stream, shuffled by shard and by a sample buffer, split across ranks and readers (see the
    module's docstring for the order, the seeds and the contract a thread-based loader uses).

    Args:
        urls: the shards: a list of paths, or a string with brace ranges (``"train-{000..099}.tar"``);
            ``pipe:<command>`` reads a command's output (``pipe:aws s3 cp s3://b/x.tar -``).
        transform: applied to the image (the first field); fastprep's transforms read JpegFiles by
            window, any other transform gets them decoded.
        target_transform: applied to the second field.
        fields: the members that make a sample, by extension, ``;`` between alternatives: a tuple
            gives tuples, a string the one value, None a dict of every member (with ``__key__``
            and ``__url__``). Default: ``("jpg;jpeg;png", "cls")``, (image, int label).
        shuffle: shuffle the shard order each epoch and pass samples through the buffer.
        buffer: the shuffle buffer's size in samples (memory: that many encoded samples per reader).
        seed: the base seed of the order and the transforms (default: drawn from torch's generator).
        rank, world_size: this process's part of the shards; default: torch.distributed's when it is
            initialised when the dataset is made, else torchrun's RANK / WORLD_SIZE, else 0 of 1.
        roi: JPEG members as JpegFiles (decoded by window); False decodes them whole.
        mode, layout: as in :func:`fastprep.io.decode_jpeg`.
        strict: corrupt JPEG data raises ValueError naming the member (default True, as Pillow
            raises); False decodes it as libjpeg recovers it, with a CorruptJpegWarning.
        exif: image members turned upright by their EXIF orientation (decode_jpeg's `exif`; with
            `roi`, JpegFiles whose windows are the upright image's). Default False.
        decoders: ``{extension: callable(bytes)}`` for members fastprep does not decode (``.pyd``
            pickles stay bytes unless you pass ``{"pyd": pickle.loads}``) or to replace its own.
        open_shard: ``callable(url) -> binary file`` (fsspec.open(url).open, ...); default: local
            files and ``pipe:``.

    Example:
        >>> ds = WebDataset("train-{000..127}.tar", transform=train_tf, shuffle=True, seed=0)
        >>> loader = DataLoader(ds, batch_size=256, num_workers=8, collate_fn=fastprep.compact_collate)
        >>> for epoch in range(epochs):
        ...     ds.set_epoch(epoch)
        ...     for images, labels in loader: ...
    """

    source_kind = "windowed"  # what it is, in fastprep.monitor's words: tar shards read by window

    def __init__(self, urls: Any, transform: Callable | None = None, target_transform: Callable | None = None, *,
                 fields: Sequence[str] | str | None = DEFAULT_FIELDS, shuffle: bool = False, buffer: int = 1000,
                 seed: int | None = None, rank: int | None = None, world_size: int | None = None, roi: bool = True,
                 mode: str = "RGB", layout: str = "CHW", strict: bool = True, exif: bool = False,
                 decoders: dict[str, Callable[[bytes], Any]] | None = None,
                 open_shard: Callable[[str], Any] | None = None):
        who = "WebDataset"
        try:
            self.shards = expand_urls(urls)
        except ValueError as exc:
            raise ValueError(f"{who}: {exc}") from None
        if not self.shards:
            raise ValueError(f"{who}: no shards in {urls!r}")
        if open_shard is None:
            missing = [u for u in self.shards if not u.startswith("pipe:") and not os.path.isfile(u)]
            if missing:
                raise FileNotFoundError(f"{who}: {len(missing)} of {len(self.shards)} shards are not files: "
                                        f"{missing[:3]}{' ...' if len(missing) > 3 else ''}")
        check_image_args(who, mode, layout)
        if isinstance(fields, (list, tuple)) and not all(isinstance(f, str) and f for f in fields) \
                or not isinstance(fields, (str, list, tuple, type(None))):
            raise ValueError(f"{who}: expected fields to be a tuple of extensions, one extension or None, "
                             f"got {fields!r}")
        check_int(who, "buffer", buffer, 1)
        self.rank, self.world_size = distributed_rank(who, rank, world_size)
        if len(self.shards) < self.world_size:
            raise ValueError(f"{who}: {len(self.shards)} shards for {self.world_size} ranks: rank "
                             f"{len(self.shards)} and later would read nothing (and DDP would wait for them "
                             f"forever); write at least {self.world_size} shards (write_webdataset's maxcount)")
        self.transform, self.target_transform, self.layout = transform, target_transform, layout
        self.fields, self.shuffle, self.buffer = fields, check_bool(who, "shuffle", shuffle), buffer
        self.seed = draw_seed() if seed is None else seed_argument(who, "seed", seed)
        self.open_shard = open_shard or open_url
        strict = check_bool(who, "strict", strict)
        self.decode_member = MemberDecoder(who, roi=roi, mode=mode, layout=layout, strict=strict, decoders=decoders,
                                           exif=check_bool(who, "exif", exif))
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """The epoch the next iteration reads: its shard order, buffer and transform seeds."""
        self.epoch = check_epoch("WebDataset", epoch)

    def shards_for(self, epoch: int | None = None, part: int = 0, parts: int = 1) -> list[str]:
        """The shards reader `part` of `parts` on this rank reads in `epoch` (default: the current)."""
        epoch = self.epoch if epoch is None else check_epoch("WebDataset", epoch)
        if not (isinstance(part, int) and isinstance(parts, int) and 0 <= part < parts):
            raise ValueError(f"WebDataset: expected 0 <= part < parts, got part={part!r}, parts={parts!r}")
        order = self.shards
        if self.shuffle:
            g = torch.Generator()
            g.manual_seed(item_seed(self.seed, "shards", epoch))
            order = [self.shards[k] for k in torch.randperm(len(self.shards), generator=g).tolist()]
        return order[self.rank::self.world_size][part::parts]

    def sample_seed(self, key: str, epoch: int | None = None) -> int:
        """The seed sample `key`'s transform runs under in `epoch` (a key of digits as its number)."""
        number = key.isascii() and key.isdigit() and len(key) <= 18  # below 2^63
        return item_seed(self.seed, int(key) if number else key, self.epoch if epoch is None else epoch)

    def raw_samples(self, shards: Sequence[str], epoch: int | None = None) -> Iterator[tuple[str, Any]]:
        """(key, sample before the transform) of `shards` in turn, through the shuffle buffer."""
        epoch = self.epoch if epoch is None else epoch
        stream = ((key, url, members) for url in shards
                  for key, members in grouped(url, shard_members(url, self.open_shard)))
        if self.shuffle:
            rng = random.Random(item_seed(self.seed, "buffer\n" + "\n".join(shards), epoch))
            stream = shuffled(stream, self.buffer, rng)
        for key, url, members in stream:
            yield key, self.make_sample(url, key, members)

    def make_sample(self, url: str, key: str, members: dict[str, bytes]) -> Any:
        """The sample `fields` asks for, each member decoded by its extension."""
        if self.fields is None:
            out = {ext: self.decode_member(url, key, ext, data) for ext, data in members.items()}
            return {"__key__": key, "__url__": url, **out}
        fields = (self.fields,) if isinstance(self.fields, str) else self.fields
        values = []
        for field in fields:
            ext = next((e for e in field.split(";") if e in members), None)
            if ext is None:
                raise ValueError(f"WebDataset: {url}: sample {key!r} has no {field!r} member (it has "
                                 f"{sorted(members)})")
            values.append(self.decode_member(url, key, ext, members[ext]))
        return values[0] if isinstance(self.fields, str) else tuple(values)

    def apply_transform(self, raw: Any) -> Any:
        return apply_transform(raw, self.transform, self.target_transform, self.layout)

    def _reader_samples(self) -> Iterator[tuple[str, Any]]:
        """(key, raw sample) of this reader's shards (a DataLoader worker's part, else all of this
        rank's) in the current epoch."""
        info = torch.utils.data.get_worker_info()
        part, parts = (info.id, info.num_workers) if info is not None else (0, 1)
        return self.raw_samples(self.shards_for(self.epoch, part, parts), self.epoch)

    def iter_raw(self) -> Iterator[Any]:
        """The samples before the transform (images as JpegFiles), in ``iter(self)``'s order: what
        ``load_raw`` is to a map-style dataset. fastprep.Loader reads these when it is given the
        transform, so that a crop decodes only its window."""
        for _key, raw in self._reader_samples():
            yield raw

    def __iter__(self) -> Iterator[Any]:
        epoch = self.epoch
        for key, raw in self._reader_samples():
            if self.transform is None and self.target_transform is None:
                yield self.apply_transform(raw)
                continue
            with seeded(self.sample_seed(key, epoch)):
                sample = self.apply_transform(raw)
            yield sample

    def __repr__(self) -> str:
        return (f"WebDataset({len(self.shards)} shards, fields={self.fields!r}, shuffle={self.shuffle}, "
                f"rank {self.rank} of {self.world_size})")
