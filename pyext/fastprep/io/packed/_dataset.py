"""fastprep.io.PackedDataset: the shards :func:`fastprep.io.pack` wrote, read by window.

``load_raw(i)`` hands out the image as a :class:`fastprep.io.WindowedImage`: a :class:`PackedJpeg`
decodes a crop window from the restart intervals covering it (its cost follows the window's area,
not the rows above it), a :class:`PackedRaw` copies the window from the memory-mapped pixels.
fastprep's transforms and the Loader crop them without decoding the rest. Every byte a read uses
is under a CRC checked before use; a corrupt shard raises :class:`ShardFormatError` naming the
shard and record, never a wrong image.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import torch

import fastprep.io._pack_format as fmt
from fastprep.core._args import check_bool
from fastprep.errors import RemoteReadError
from fastprep.io._source import ImageSource
from fastprep.io.jpeg import LAYOUTS, MODES, native
from fastprep.io.jpeg._oriented import oriented
from fastprep.io.jpeg._window_cut import WindowCut
from fastprep.io.packed._local_pack import open_pack_source
from fastprep.io.packed._read_ahead import fetch_ahead
from fastprep.io.packed._records import PackedImage, PackedJpeg, PackedRaw
from fastprep.io.packed._shard_maps import ShardMaps
from fastprep.io.remote._limits import RateLimit
from fastprep.io.remote._retry import Retry
from fastprep.io.remote._window_batch import Probed


class PackedDataset(ImageSource):
    """The images :func:`fastprep.io.pack` packed, read by window: map-style, in the source's order.

    ``load_raw(i)`` returns ``(image, label, *extras)`` with the image a :class:`PackedJpeg` or
    :class:`PackedRaw` (both :class:`fastprep.io.WindowedImage`): fastprep.Loader's threads and
    fastprep's transforms crop it, reading only the window (for raw records, a view of the
    memory map: see PackedRaw). ``dataset[i]`` decodes it whole, then
    applies `transform` (unless it is fastprep's, which reads the window), as ImageFolder does.
    Each shard is memory-mapped on the first read of a record in it, and again after unpickling
    (DataLoader workers); reads are thread-safe. A shard that is missing, truncated or replaced
    fails only the reads of its own records, with a ShardFormatError naming the pack, the shard,
    the record and its source and the cause; the other shards' records read as before.

    Args:
        path: the folder pack wrote.
        transform, target_transform: as torchvision's ImageFolder.
        mode: "RGB", "YCbCr" or "GRAY", as :func:`fastprep.io.decode_jpeg` (raw records: RGB, YCbCr).
        layout: "CHW" (default) or "HWC".
        strict: corrupt JPEG data raises ValueError (default True, as in ImageFolder) instead of a
            CorruptJpegWarning (packed records are checksummed: only an input that was already
            corrupt when packed, with ``pack(strict=False)``, can hold any).
        cache_dir, cache_limit, fetch, storage_options, retry, workers: for a pack at a URL
            ("s3://bucket/train.packed", gs://, az://, http(s)://, file://: whatever fsspec serves;
            ``pip install 'fastprep[remote]'``), see docs/remote.md. Its index is fetched at once;
            shards are downloaded whole into `cache_dir` (default $FASTPREP_CACHE or
            ~/.cache/fastprep/packs) on first use or ahead of it (:meth:`prefetch`, `workers` at
            a time), checked before they are committed, and evicted least recently used past
            `cache_limit` bytes (None: no limit). `fetch` = "shards" always reads from whole
            shards; "ranges" reads a JPEG record whose shard is not cached by byte range, only
            the bytes its window needs; "auto" (default) reads by range only while the pack is
            larger than cache_limit and no epoch order was given to :meth:`prefetch`, or the
            measured link makes whole shards cost more (``fetch_mode`` says which, and why).
            A mapping of the pack's file names to their presigned URLs reads each file from its
            own URL (fastprep.io.remote.sign_pack makes one; docs/remote.md).
            `storage_options` go to the fsspec filesystem (e.g. an S3 endpoint_url); `retry` is a
            :class:`fastprep.io.remote.Retry`. ``bytes_fetched`` counts the bytes read from the
            store, DataLoader workers' included.
        rate_limit: a :class:`fastprep.io.remote.RateLimit` (requests/s, bytes/s) every request to
            the store waits for, shared by this dataset's threads and workers (one object is one
            budget; ranks that each make their own divide the cap among them). None: no cap.
        verify: check the CRCs of the bytes each read uses (default). False skips them (each
            record's header, restart index and every offset are still checked, so nothing is read
            out of bounds): a read of a raw window then costs what an array in memory does (the
            CRC pass reads the window from memory once more), but a corrupt shard byte can come out
            as a wrong pixel instead of an error.
        exif: JPEG records turned upright by the EXIF orientation their source had (the transcoder
            keeps it in the record's JPEG header): each an :class:`fastprep.io.OrientedImage`
            whose windows are the upright image's, as ``ImageFolder(..., exif=True)`` reads the
            files. Images pack converted (inputs that were not JPEGs, stored raw or re-encoded;
            mode "raw"; JPEGs shrunk to fit `max_side`) hold what the decoder gave as stored, and
            no orientation: they are read as they are. A pack written before the orientation was kept reads as
            unturned (re-pack to keep it). Default False, as torchvision's ImageFolder.
        on_error: a record that cannot be read: "raise" (default), "skip" or "warn", as in
            ImageFolder (recorded in ``bad_samples`` under :meth:`where`). ``load_raw`` reads only
            the record's index entry (its pixels are read by window, later): a corrupt record shows
            in the transform, so ``dataset[i]`` (a DataLoader's path) skips it, and the Loader's
            own `on_error` does in its threads.

    Example:
        >>> ds = fastprep.io.PackedDataset("train.packed")
        >>> loader = fastprep.Loader(ds, 256, transform=train_tf, shuffle=True)
    """

    def __init__(self, path: str | os.PathLike | Mapping[str, str], transform: Callable | None = None,
                 target_transform: Callable | None = None, *, mode: str = "RGB", layout: str = "CHW",
                 strict: bool = True, verify: bool = True, cache_dir: str | os.PathLike | None = None,
                 cache_limit: int | None = None, fetch: str = "auto", storage_options: dict | None = None,
                 retry: Retry | None = None, workers: int = 4, exif: bool = False, on_error: str = "raise",
                 rate_limit: RateLimit | None = None):
        if mode not in MODES:
            raise ValueError(f"PackedDataset: expected mode to be one of {MODES}, got {mode!r}")
        if layout not in LAYOUTS:
            raise ValueError(f"PackedDataset: expected layout to be one of {LAYOUTS}, got {layout!r}")
        # a folder, a URL or a mapping of presigned URLs: read through the one pack source interface
        self._source = open_pack_source(path, cache_dir=cache_dir, cache_limit=cache_limit, fetch=fetch,
                                        storage_options=storage_options, retry=retry, workers=workers,
                                        rate_limit=rate_limit)
        self.path = self._source.store.shown  # shown in messages and reprs: no credentials
        self.index_path, index = self._source.fetch_index()  # read and checked there
        self.transform, self.target_transform = transform, target_transform
        self.set_on_error("PackedDataset", on_error)
        self.exif = check_bool("PackedDataset", "exif", exif)
        if not isinstance(verify, bool):
            raise ValueError(f"PackedDataset: expected verify to be a bool, got {verify!r}")
        self.mode, self.layout, self.verify = mode, layout, verify
        self.strict = check_bool("PackedDataset", "strict", strict)
        entries, self.pack_id, meta, self._names_at = index
        self._shards = [(str(name), int(size)) for name, size, _ in meta["shards"]]
        self._source.attach(self.pack_id, self._shards, meta.get("digests"))
        _check_entries(entries, self._shards, self._source.store.where(fmt.INDEX_NAME))
        self._entries = entries
        self._total = sum(size for _, size in self._shards)
        self._mean_record = float(entries["length"].mean()) if len(entries) else 0.0
        self.classes = list(meta["classes"] or [])
        self.class_to_idx = dict(meta.get("class_to_idx") or {c: i for i, c in enumerate(self.classes)})
        self.targets = entries["label"].tolist()
        self.skipped = [(name, why) for _, name, why in meta["skipped"]]
        self.options = meta["options"]
        self._extras = meta["extras"]
        self._maps = ShardMaps(self._shards, self.pack_id, self._source)

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def item_shards(self) -> np.ndarray:
        """The shard of each record (a read-only int array, one per record): what the Loader's
        ``shuffle="shards"`` order and its rank split read (docs/loader.md)."""
        shards = self._entries["shard"].astype(np.int64)
        shards.flags.writeable = False
        return shards

    @property
    def shard_sizes(self) -> list[int]:
        """Each shard's bytes, as the index records them."""
        return [size for _, size in self._shards]

    @property
    def cache_limit(self) -> int | None:
        """A remote pack's cache_limit (bytes; None: no limit, and for a local pack): the Loader's
        ``shuffle="shards"`` refuses a shard window that half of it cannot hold (never sized from it)."""
        return self._source.limit

    def _view(self, k: int, i: int | None = None) -> memoryview:
        """Shard k's bytes (mapped on first use; its file's size checked against the index before
        each read: ShardMaps.check) for record i; ShardFormatError names them if unreadable."""
        view = self._maps.views[k]
        try:
            if view is None:
                view = self._maps.open(k)
            else:
                self._maps.check(k, view)
        except (fmt.ShardFormatError, RemoteReadError) as exc:
            raise self._unreadable(exc, k, i) from exc.__cause__
        return view

    def check_record(self, i: int, k: int, record: memoryview) -> None:
        """Before a read of record i's mapped bytes `record` (of shard k): its shard file still whole."""
        try:
            self._maps.check(k, record)
        except fmt.ShardFormatError as exc:
            raise self._unreadable(exc, k, i) from None

    def _unreadable(self, exc: Exception, k: int, i: int | None) -> Exception:
        what = f"shard {k}" if i is None else f"record {i} ({fmt.read_name(self.index_path, self._names_at, i)})"
        return type(exc)(f"PackedDataset: {what} of pack {self.path} is unreadable: {exc}")

    def shard_tensor(self, k: int) -> torch.Tensor:
        """Shard k's bytes as a 1-D uint8 tensor over its memory map (raw windows are views of it)."""
        self._view(k)
        return self._maps.tensor(k)

    def record(self, i: int) -> memoryview:
        """Record i's bytes (a view of the memory-mapped shard)."""
        e = self._entries[i]
        offset = int(e["offset"])
        return self._view(int(e["shard"]), i)[offset:offset + int(e["length"])]

    def where(self, i: int, source: bool = True) -> str:
        """'<pack>/shard-00001.fpk record 17 (dog/1.jpg)': record i, for messages."""
        shard = self._shards[int(self._entries["shard"][i])][0]
        text = f"{self._source.store.where(shard)} record {i}"
        return f"{text} ({fmt.read_name(self.index_path, self._names_at, i)})" if source else text

    def sample_name(self, i: int) -> str:
        return self.where(i)

    def read_item(self, i: int) -> tuple:
        """(image, label, *extras) of record i, the image read by window on demand (``load_raw(i)``
        is this under the `on_error` policy); with `exif`, a turned JPEG record as an OrientedImage."""
        image = self.record_image(i)
        if self.exif and isinstance(image, PackedJpeg):
            image = oriented(image, image.orientation())
        label = int(self._entries["label"][i])
        if self._extras is None:
            return image, label
        return (image, label, *(self._extras[i] or ()))

    def record_image(self, i: int) -> PackedImage:
        """Record i's image as stored (no EXIF orientation applied), read by window on demand."""
        shard, kind, color, _, offset, length, checksum, height, width, _, _, _ = self._entries[i].item()
        if kind == fmt.KIND_JPEG and self._source.uses_ranges(shard, self._total, self._mean_record):
            record = None  # read by range when the window is known: PackedJpeg.decode / cut
        elif self._source.ahead.probing:
            raise Probed(None)  # a trial run (fetch_ahead): nothing of this record is read by range
        else:
            record = self._view(shard, i)[offset:offset + length]
        cls = PackedJpeg if kind == fmt.KIND_JPEG else PackedRaw
        return cls(self, i, shard, offset, record, checksum, height, width, color)

    def record_head(self, i: int) -> bytes:
        """A remote record's meta block, restart index and JPEG header (fetched by range once and
        kept, as a windowed read of it fetches them): what PackedJpeg.orientation reads."""
        e = self._entries[i]
        if self._source.ahead.probing:  # a trial run (fetch_ahead): the head is read with the batch's
            head = self._source.cached_head(self._shards[int(e["shard"])][0], int(e["offset"]))
            if head is None:
                raise Probed(i)
            return head
        where = f"record {i} ({fmt.read_name(self.index_path, self._names_at, i)})"
        return self._source._head(self._shards[int(e["shard"])][0], int(e["offset"]), int(e["length"]), where,
                                  f"reading {where} by range")

    @property
    def fetch_mode(self) -> tuple[str, str] | None:
        """A remote pack's ("shards" or "ranges", why): how JPEG records of shards not cached are
        read now (fetch="auto" chooses from the pack, the cache and the link measured so far, and
        logs each choice at INFO on the ``fastprep`` logger); None for a local pack."""
        return self._source.fetch_mode(self._total, self._mean_record)

    @property
    def remote(self) -> bool:
        """Whether the pack is read from a URL (through its local shard cache)."""
        return self._source.remote

    @property
    def source_kind(self) -> str:
        """What it is, in fastprep.monitor's words: "remote-pack", else "packed-raw" or "packed-jpeg"."""
        if self.remote:
            return "remote-pack"
        return "packed-raw" if (self.options or {}).get("mode") == "raw" else "packed-jpeg"

    @property
    def bytes_fetched(self) -> int:
        """Bytes this process read from a remote pack's store (shards, index, ranges); 0 for a local pack
        (its records are read through memory maps, not fetched)."""
        return self._source.store.bytes_fetched

    def prefetch(self, order: Sequence[int] | None = None) -> list[int]:
        """Starts downloading the shards of a remote pack in the order `order` (the epoch's record
        indices; default: all, in order) first uses them, `workers` at a time, at most half the
        cache_limit ahead of the shard being read; returns that shard order. A local pack: no-op.
        With fetch="ranges", only the shards of raw records are downloaded (JPEG records are read
        by range: their shards whole would be what "ranges" declines)."""
        order = range(len(self)) if order is None else order
        if self._source.fetch == "ranges":
            kinds = self._entries["kind"]
            order = [i for i in order if kinds[i] != fmt.KIND_JPEG]
            if not order:
                return []
        return self._source.prefetch(self._entries["shard"], order)

    def window_record(self, i: int, window: tuple[int, int, int, int]) -> bytearray:
        """Record i's bytes with only those a decode of `window` reads (fetched by range): what a
        PackedJpeg whose shard is not cached decodes from."""
        if self._source.ahead.probing:
            raise Probed(i, window)  # a trial run (fetch_ahead): the window is read with the batch's
        e = self._entries[i]
        shard = int(e["shard"])
        return self._source.window_record(self._shards[shard][0], int(e["offset"]), int(e["length"]),
                                          int(e["checksum"]), window,
                                          f"record {i} ({fmt.read_name(self.index_path, self._names_at, i)})")

    def fetch_ahead(self, keys: Sequence[int], trial: Callable[[int], object]) -> int:
        """Reads the windows of the records of `keys` that are read by range, together, before their
        decodes ask for them: trial(j) is sample keys[j]'s loading and transform under its own seeds
        (the Loader calls this with each chunk of a batch; fastprep.io.packed._read_ahead). Returns
        the round trips taken; a local pack, or records read from cached shards: 0, nothing done."""
        return fetch_ahead(self, keys, trial)

    def cut_window(self, i: int, crop: tuple[int, int, int, int] | None = None) -> WindowCut:
        """Record i's window as a small JPEG (see :meth:`PackedJpeg.cut`); raw records have none.
        With `exif`, a record stored turned is refused (ValueError): the cut's JPEG decodes to the
        stored pixels, and `crop` would be a window of the upright image, which the dataset hands out."""
        image = self.record_image(i)
        if not isinstance(image, PackedJpeg):
            raise ValueError(f"PackedDataset.cut_window: {self.where(i)} holds raw pixels, not a JPEG")
        if self.exif and (orientation := image.orientation()) != 1:
            raise ValueError(f"PackedDataset.cut_window: {self.where(i)} is stored turned (EXIF orientation "
                             f"{orientation}) and this dataset reads it upright (exif=True): a cut decodes to the "
                             f"stored pixels, not the upright window; decode it on the CPU "
                             f"(load_raw(i)[0].decode(crop)), or cut the stored image with exif=False")
        return image.cut(crop)

    def check_shards(self) -> None:
        """Open every shard and check its size and header against the index (fast: no CRC pass over
        the records, see verify_records); ShardFormatError names the first unreadable shard."""
        for k in range(len(self._shards)):
            self._view(k)

    def verify_records(self) -> None:
        """Check every CRC of every record (reads all the shards); ShardFormatError names the first bad one."""
        mod = native("PackedDataset.verify_records")
        for i in range(len(self)):
            try:
                mod.verify_record(self.record(i), int(self._entries["checksum"][i]))
            except ValueError as exc:
                raise fmt.ShardFormatError(f"PackedDataset.verify_records: {self.where(i)}: {exc}") from None

    def __repr__(self) -> str:
        kinds = np.bincount(self._entries["kind"], minlength=3)
        return (f"PackedDataset({self.path!r}, {len(self)} images ({kinds[fmt.KIND_JPEG]} JPEG, {kinds[fmt.KIND_RAW]} "
                f"raw) in {len(self._shards)} shards, {len(self.classes)} classes, mode={self.mode!r}, "
                f"layout={self.layout!r}{', exif=True' if self.exif else ''}"
                f"{f', fetch={mode[0]!r}' if (mode := self.fetch_mode) else ''}"
                f"{f', on_error={self.on_error!r}' if self.on_error != 'raise' else ''})")


def _check_entries(entries: np.ndarray, shards: list[tuple[str, int]], where: str) -> None:
    """Every entry names a shard of the index and lies inside it, with a known kind: a corrupt index
    is refused when it is opened, not met as a bad read later."""
    if not len(entries):
        return
    sizes = np.array([s for _, s in shards] + [0], dtype=np.uint64)
    shard = np.minimum(entries["shard"], len(shards)).astype(np.int64)
    size = sizes[shard]
    bad = (entries["shard"] >= len(shards)) | ~np.isin(entries["kind"], (fmt.KIND_JPEG, fmt.KIND_RAW)) \
        | (entries["length"] > size) | (entries["offset"] > size - np.minimum(entries["length"], size)) \
        | (entries["offset"] < fmt.HEADER_BYTES)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise fmt.ShardFormatError(f"PackedDataset: {where}: record {i} (shard {entries['shard'][i]}, offset "
                                   f"{entries['offset'][i]}, {entries['length'][i]} bytes, kind "
                                   f"{entries['kind'][i]}) is not inside the pack's shards: the index is corrupt")
