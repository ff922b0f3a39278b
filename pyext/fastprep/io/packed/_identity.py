"""What a pack is a pack of: :func:`fastprep.io.pack` continues (or returns) a pack in DEST only when
it is of the same source with the same options, checked shard by shard; anything else is refused
by name (:class:`PackSourceError`). Before pack reports success, the index it wrote is read back
against its shards.

Each shard records its source ({"type", "items"}), the options, and a digest per source item
(_pack_sources.py). A kept shard is checked against the source by recomputing the digests of the
items it claims: free for a folder (relative path, size, mtime; also in the pack id), one read of
each item for a dataset (no conversion: the items are read, not transcoded or encoded, in the
packing threads). A dataset of the same type and length but other images, labels or extras differs
at its first differing item; a dataset whose items change between reads (random transforms) never
matches.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

import fastprep.io._pack_format as fmt
from fastprep.core._progress import Progress
from fastprep.errors import PackSourceError
from fastprep.io.packed._pack_item import Options
from fastprep.io.packed._pack_sources import Sources, shown
from fastprep.io.packed._writer import Kept

DIGEST_CHARS = 16  # hex digits of one item's digest in a shard's "inputs"


def pack_identity(sources: Sources, opts: Options) -> tuple[bytes, dict]:
    """(source id, the identity each shard records). The source id covers the source's type and
    length, the options, the classes and class_to_idx, the format, a folder's whole listing (its
    paths, sizes, times and labels), and a dataset's first item (read once more: the first item
    is in any shard a resume keeps, so the id never refuses what they accept). Unfinished shards
    carry it in their header; a finished pack's id is :func:`content_id`."""
    identity = {"source": sources.kind, "options": opts.as_dict(), "classes": sources.classes,
                "class_to_idx": sources.class_to_idx}
    listing = sources.listing_digest or (sources.digest(0) if sources.names else "")
    text = json.dumps({**identity, "listing": listing, "format": fmt.FORMAT_VERSION}, sort_keys=True)
    source_id = hashlib.sha256(text.encode()).digest()[:16]
    return source_id, {**identity, "source_id": source_id.hex()}


def content_id(source_id: bytes, done: list) -> bytes:
    """A finished pack's id: its source id with every source item's digest, every shard's records
    (their checksums, labels and places) and what was skipped. Two packs share it only where they
    hold the same records of the same items: the remote cache and upload_pack rely on that."""
    h = hashlib.sha256(b"fastprep pack content\0" + source_id)
    for _, meta in done:
        h.update(json.dumps([meta["first"], meta["end"], meta["inputs"], meta["digest"], meta["skipped"]]).encode())
    return h.digest()[:16]


def stamp_shards(dest: str, count: int, pack_id: bytes) -> None:
    """Write `pack_id` into the header of shards 0..count-1 (those that carry another: a resumed
    pack's) and fsync them: the index that names pack_id comes after."""
    for k in range(count):
        path = os.path.join(dest, fmt.shard_name(k))
        with open(path, "r+b") as f:
            head = f.read(fmt.HEADER_BYTES)
            if fmt.read_shard_header(head, path)[1] == pack_id:
                continue
            f.seek(0)
            f.write(fmt.shard_header(k, pack_id))
            f.flush()
            os.fsync(f.fileno())


def refuse(dest: str, what: str) -> PackSourceError:
    return PackSourceError(f"pack: {dest} holds a pack of another source: {what}; pass overwrite=True or choose "
                           f"another DEST")


def _differs(old: dict, new: dict) -> str:
    keys = sorted(set(old) | set(new))
    return ", ".join(f"{k} {old.get(k)!r} -> {new.get(k)!r}" for k in keys if old.get(k) != new.get(k))


def _old_default(old: dict, new: dict) -> str:
    """Advice for a pack made when non_jpeg's default was "encode" (it is "raw" now), resumed with the default."""
    if old.get("non_jpeg") == "encode" and new.get("non_jpeg") == "raw":
        return (" (non_jpeg's default became 'raw', lossless; this pack was made with 'encode', the old default: "
                "pass non_jpeg='encode' (--non-jpeg encode) to resume or return it)")
    return ""


def check_kept(dest: str, kept: list[Kept], identity: dict, sources: Sources, threads: int,
               progress: bool) -> None:
    """Refuse (PackSourceError naming what differs) unless every kept shard is of this source and options."""
    for shard in kept:
        meta = shard.meta
        if shard.version < 2 or "source" not in meta:
            raise refuse(dest, f"it was written by an older fastprep (pack format {shard.version}), which did not "
                               f"record its source")
        if shard.version < 3 or "source_id" not in meta:  # it still reads: only resuming or returning it is refused
            raise refuse(dest, f"it was written by an older fastprep (pack format {shard.version}), which did not "
                               f"record its classes or every item in its pack id (it still reads as it is)")
        if meta["options"] != identity["options"]:
            raise refuse(dest, f"other options ({_differs(meta['options'], identity['options'])})"
                               f"{_old_default(meta['options'], identity['options'])}")
        if meta["source"] != identity["source"]:
            old, new = meta["source"], identity["source"]
            raise refuse(dest, f"it packed a {old['type']} of {old['items']} items, this is a {new['type']} of "
                               f"{new['items']} items")
        for key in ("classes", "class_to_idx"):
            if meta.get(key) != identity[key]:
                raise refuse(dest, f"other {key} ({meta.get(key)!r} -> {identity[key]!r})")
    total = sum(s.meta["end"] - s.meta["first"] for s in kept)
    bar = Progress(f"pack {os.path.basename(os.path.normpath(dest))}: checking") if progress and total and \
        not sources.sizes else None
    try:
        _check_items(dest, kept, sources, threads, bar, total)
    finally:
        if bar is not None:
            bar.close()
    if any(s.meta["source_id"] != identity["source_id"] for s in kept):  # a folder's files after the kept ones
        end = kept[-1].meta["end"]
        raise refuse(dest, f"the folder's files changed since it was begun (the {end} items packed are the same; "
                           f"one after them was added, removed, resized, modified or relabelled)")


def _check_items(dest: str, kept: list[Kept], sources: Sources, threads: int, bar: Progress | None,
                 total: int) -> None:
    n, done = len(sources.names), 0
    with ThreadPoolExecutor(threads, thread_name_prefix="fastprep-pack-check") as pool:
        for shard in kept:
            first, end, stored = shard.meta["first"], shard.meta["end"], shard.meta["inputs"]
            step = 256 * threads
            for lo in range(first, end, step):
                hi = min(end, lo + step)
                digests = pool.map(sources.digest, range(lo, hi)) if not sources.sizes else \
                    map(sources.digest, range(lo, hi))  # a folder's digests cost no read
                for i, got in zip(range(lo, hi), digests, strict=True):
                    at = (i - first) * DIGEST_CHARS
                    if stored[at:at + DIGEST_CHARS] != got:
                        name = f", {shown(sources.names[i])!r}" if sources.sizes else ""
                        what = "its name, size or modification time" if sources.sizes else "its image, label " \
                            "or extras (a dataset whose items change between reads, by random transforms say, never " \
                            "matches)"
                        raise refuse(dest, f"item {i} (of {n}{name}) differs from the one packed: {what}")
                done += hi - lo
                if bar is not None:
                    bar(f"{done}/{total} packed items checked", done / total)


def check_written(dest: str) -> None:
    """The index just written read back against its shards, as PackedDataset opens them (every shard
    present, of the size, number and pack id the index says) and more (each shard's table equals
    the index's records for it): ShardFormatError names the first disagreement."""
    index_path = os.path.join(dest, fmt.INDEX_NAME)
    entries, pack_id, meta, _ = fmt.read_index(index_path)
    at = 0
    for k, (name, size, count) in enumerate(meta["shards"]):
        path = os.path.join(dest, name)
        with open(path, "rb") as f:
            got = os.fstat(f.fileno()).st_size
            if got != size:
                raise fmt.ShardFormatError(f"pack: {path} is {got} bytes where the index just written says {size}: "
                                           f"another process wrote into {dest}?")
            data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            number, shard_id = fmt.read_shard_header(data[:fmt.HEADER_BYTES], path)
            table, shard_meta = fmt.read_shard_trailer(data, path)
        finally:
            data.close()
        mine = entries[at:at + count]
        if number != k or shard_id != pack_id or not np.array_equal(table, mine) or \
                shard_meta.get("digest") != meta.get("digests", [shard_meta.get("digest")] * (k + 1))[k]:
            raise fmt.ShardFormatError(f"pack: {path} does not hold the records the index just written says: "
                                       f"another process wrote into {dest}?")
        at += count
    if at != len(entries):
        raise fmt.ShardFormatError(f"pack: {index_path} lists {len(entries)} records, its shards {at}")
