"""fastprep.io.pack: an image folder or a map-style dataset into a few large shard files plus an
index (the format: fastprep/io/_pack_format.py), read back by :class:`fastprep.io.PackedDataset`.

Resumable: shards are written whole (temporary name, fsync, rename) in source order, so after a
kill ``pack`` keeps the shards it finds, once each is checked to be of the same source and options
(_identity.py; anything else is refused by name), and goes on after the last one's sources.
The index comes last, and is read back against the shards before pack returns. One writer at a
time: DEST is locked while pack writes (_lock.py).

An input that cannot be packed (unreadable, not an image, a dataset item that raises) meets the
bad-sample policy (fastprep/core/_bad_samples.py): ``on_error="raise"`` stops the pack naming it;
"skip" / "warn" leave it out, named in the summary, the index and the shard that holds its place
(records keep their source index, so a pack with skipped items resumes and maps to its source).
The policy is not part of the pack's identity: a pack stopped by "raise" resumes under "skip"; a
pack that left items out is refused by "raise" as a fresh run would (it names the first).
"""

from __future__ import annotations

import dataclasses
import errno
import os
import time
import warnings
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

import fastprep.io._pack_format as fmt
from fastprep.core._args import check_bool
from fastprep.core._bad_samples import BadSamples, check_on_error
from fastprep.core._progress import Progress
from fastprep.errors import PackSourceError, PackWarning, PackWriteError
from fastprep.io.packed._identity import check_kept, check_written, content_id, pack_identity, stamp_shards
from fastprep.io.packed._lock import pack_lock
from fastprep.io.packed._pack_item import Options, Packed, Unreadable, make_record
from fastprep.io.packed._pack_sources import Item, Sources, dataset_sources, folder_sources, shown
from fastprep.io.packed._pack_summary import PackSummary, add_shard_kinds
from fastprep.io.packed._writer import ShardWriter, overwritten_files, scan_shards

MODES, NON_JPEG = ("jpeg", "raw"), ("encode", "raw")


def _check_options(mode: str, max_side: Any, threads: Any, quality: Any, non_jpeg: str, shard_bytes: Any,
                   restart: Any) -> None:
    def positive_int(name: str, v: Any, lo: int = 1, hi: int | None = None) -> None:
        if isinstance(v, bool) or not isinstance(v, int) or v < lo or (hi is not None and v > hi):
            rng = f"in [{lo}, {hi}]" if hi is not None else f">= {lo}"
            raise ValueError(f"pack: expected {name} to be an int {rng}, got {v!r}")

    if mode not in MODES:
        raise ValueError(f"pack: expected mode to be one of {MODES}, got {mode!r}")
    if non_jpeg not in NON_JPEG:
        raise ValueError(f"pack: expected non_jpeg to be one of {NON_JPEG}, got {non_jpeg!r}")
    if max_side is not None:
        positive_int("max_side", max_side)
    if threads is not None:
        positive_int("threads", threads)
    positive_int("quality", quality, 1, 100)
    positive_int("shard_bytes", shard_bytes, 1 << 12)
    positive_int("restart", restart, 1, 64)


def _convert(sources: Sources, i: int, opts: Options) -> tuple[Item, Packed | None]:
    """Item i and its record; None when it is skipped (``item.unreadable`` says why)."""
    item = sources.read(i)
    if item.unreadable is None:
        try:
            return item, make_record(item.image, opts)
        except Unreadable as exc:
            item.unreadable, item.error = str(exc), exc
    return item, None


def _bad_item(sources: Sources, i: int, name: str, why: str, found: str = "") -> PackSourceError:
    """The error on_error="raise" stops the pack with: the item named (a folder's by its path)."""
    n = len(sources.names)
    where = f"{shown(name)!r} (item {i} of {n})" if sources.sizes else f"item {i} (of {n})"
    return PackSourceError(f"pack: {where}: {why}{found} (on_error='skip' leaves such items out of the pack)")


def pack(src: Any, dest: str | os.PathLike, *, mode: str = "jpeg", max_side: int | None = None,
         threads: int | None = None, quality: int = 90, non_jpeg: str = "raw", shard_bytes: int = 256 << 20,
         restart: int = 4, progress: bool = True, overwrite: bool = False, on_error: str = "raise",
         strict: bool = True) -> PackSummary:
    """Pack an image folder or a map-style dataset into shards + an index for :class:`PackedDataset`.

    JPEGs are transcoded losslessly (the same DCT coefficients) to baseline Huffman with a restart
    marker every K MCUs (K divides the MCU row, near `restart`), so a crop window decodes from the
    restart intervals covering it only; other images (PNG, pixels, ...) are stored as raw pixels,
    losslessly (``non_jpeg="raw"``, the default), or encoded once as JPEG at `quality`
    (``non_jpeg="encode"``: lossy, smaller, and GPU-decodable). ``mode="raw"`` stores every image
    as uint8 pixels (read through a memory map). The summary counts each kind of input (transcoded,
    re-encoded, stored raw, encoded, skipped) with its bytes in and out.

    An input that cannot be packed (an unreadable file, not an image, a dataset item that raises)
    stops the pack (``on_error="raise"``, the default: a PackSourceError naming it) or is left out
    (``"skip"``; ``"warn"`` also gives a :class:`fastprep.core._bad_samples.BadSampleWarning` for each),
    named with its cause in ``summary.skipped`` and the pack's ``skipped``.

    DEST may hold a pack of the same source and options: a finished one is returned, an interrupted
    one is resumed. Each kept shard is checked against the source first: a folder's files by
    relative path, size and modification time (no read), a dataset's items by a digest of each
    (its items are read again, not converted). A pack of anything else is refused by name unless
    `overwrite`. One pack at a time writes a DEST (a lock file, ``DEST/.pack.lock``).

    Args:
        src: a folder of class subfolders (torchvision's ImageFolder layout, order and labels), or a
            map-style dataset of ``(image, label, ...)``: image as JPEG/PNG bytes, a path, a PIL image,
            an HWC uint8 array or a CHW uint8 tensor; int labels; later fields JSON values. An
            untransformed ImageFolder (fastprep's or torchvision's) packs its files.
        dest: the folder to write (created).
        mode: "jpeg" or "raw".
        max_side: shrink images whose longer side is larger to this (Lanczos; a JPEG is then
            re-encoded at `quality`: lossy). None (default) keeps every pixel.
        threads: converting threads (default: every core); a dataset's ``[i]`` is called from them.
        quality: JPEG quality for inputs that are encoded (non-JPEGs, and `max_side` shrinks).
        non_jpeg: "raw" (default: pixels, lossless) or "encode" (JPEG at `quality`: lossy) for inputs
            that are not JPEGs, in mode "jpeg". Packs made before "raw" became the default hold
            "encode": resuming one needs ``non_jpeg="encode"`` (another value is refused by name).
        shard_bytes: a shard is closed once it holds this many bytes (default 256 MiB).
        restart: target MCUs per restart interval (4: 64 px of a 4:2:0 row).
        progress: a progress bar with the time left on stderr.
        overwrite: delete the pack DEST holds, if any (its shards and index only), and pack anew,
            instead of resuming it or refusing one of another source.
        on_error: "raise" (default), "skip" or "warn": what an input that cannot be packed does
            (fastprep.core._bad_samples). A dataset item with a bad label, extras or image type is a bug,
            not a bad sample: it raises whatever the policy.
        strict: a JPEG with corrupt data libjpeg would recover from (a truncated file) is an input
            that cannot be packed (default True, as Pillow raises on it); False packs it as libjpeg
            decodes it, with a PackWarning naming it. Not part of the pack's identity (as `on_error`).

    Returns:
        a :class:`PackSummary`.

    Raises:
        ValueError: a bad option.
        PackSourceError: (a ValueError) an input cannot be packed (on_error="raise"), or an item of the
            dataset is malformed (bad label, image or extras): the message names the item, the
            original error is ``__cause__``; or DEST holds a pack of another source or options (the
            message says what differs).
        PackLockedError: another pack is writing DEST (its pid and host are named).
        PackWriteError: (an OSError) the destination cannot be written (full or read-only disk),
            naming the file; the shards completed before are kept and a later run resumes from them.

    Example:
        >>> fastprep.io.pack("train/", "train.packed")          # or: python -m fastprep pack train/ train.packed
        >>> ds = fastprep.io.PackedDataset("train.packed")
    """
    _check_options(mode, max_side, threads, quality, non_jpeg, shard_bytes, restart)
    bad = BadSamples("pack", check_on_error("pack", on_error))
    if not isinstance(overwrite, bool):
        raise ValueError(f"pack: expected overwrite to be a bool, got {overwrite!r}")
    start = time.perf_counter()
    dest = os.fspath(dest)
    if isinstance(src, (str, os.PathLike)):
        if not os.path.isdir(src):
            raise FileNotFoundError(f"pack: {os.fspath(src)!r} is not a folder")
        sources = folder_sources(os.fspath(src))
    else:
        sources = dataset_sources(src)
    if os.path.exists(dest) and not os.path.isdir(dest):
        raise PackWriteError(errno.ENOTDIR, f"pack: DEST {dest!r} is a file, not a folder: choose another DEST")
    threads = threads or (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
    opts = Options(mode, max_side, quality, non_jpeg, restart, check_bool("pack", "strict", strict))
    summary = PackSummary(dest, 0, 0, input_bytes=sum(sources.sizes or []), on_error=on_error, bad_samples=bad)
    done: list = []
    try:
        os.makedirs(dest, exist_ok=True)
        with pack_lock(dest):
            _pack_locked(sources, opts, dest, done, summary, threads, shard_bytes, progress, overwrite)
    except OSError as exc:
        raise _write_error(exc, dest, done) from exc
    return _finish(summary, dest, done, start)


def _pack_locked(sources: Sources, opts: Options, dest: str, done: list, summary: PackSummary, threads: int,
                 shard_bytes: int, progress: bool, overwrite: bool) -> None:
    """pack's work once DEST is locked: keep what is of this source, convert the rest, write the index."""
    index_path = os.path.join(dest, fmt.INDEX_NAME)
    if overwrite:  # whatever pack DEST holds goes (only a pack's own files: anything else in DEST stays)
        for name in overwritten_files(dest):
            os.remove(os.path.join(dest, name))
    scan = scan_shards(dest)
    if opts.mode == "raw" and scan.kept and scan.kept[0].meta.get("options", {}).get("mode") == "raw":
        # non_jpeg means nothing to mode "raw": a kept raw pack's value (the old default "encode") is taken
        opts = dataclasses.replace(opts, non_jpeg=scan.kept[0].meta["options"].get("non_jpeg", opts.non_jpeg))
    source_id, identity = pack_identity(sources, opts)
    check_kept(dest, scan.kept, identity, sources, threads, progress)
    scan.drop_stale()
    done.extend((s.entries, s.meta) for s in scan.kept)
    summary.resumed = sum(len(e) for e, _ in done)
    for _, meta in done:  # items the kept shards left out meet this run's policy, as a fresh run's would
        for i, name, why in meta["skipped"]:
            if summary.on_error == "raise":
                raise _bad_item(sources, i, name, why, f" (left out of the pack {dest} holds)")
            summary.bad_samples.record(i, shown(name), Unreadable(why))
    first = done[-1][1]["end"] if done else 0
    if first == len(sources.names) and done and _index_id(index_path) == content_id(source_id, done):
        try:
            check_written(dest)
            return
        except fmt.ShardFormatError:  # an index that disagrees with the (checked) shards: written again
            pass
    if os.path.exists(index_path):  # an index beside unfinished shards is stale: the new one comes last
        os.remove(index_path)
    bar = Progress(f"pack {os.path.basename(os.path.normpath(dest))}") if progress else None
    try:
        _run(sources, opts, dest, source_id, identity, first, done, summary, threads, shard_bytes, bar)
    finally:
        if bar is not None:
            bar.close()
    if not done:  # nothing to pack: one empty shard records that
        done.append(ShardWriter(dest, 0, source_id, 0, identity).close(0))
    # Shards are written under the source id; the finished pack's id covers every item and record,
    # put in each shard's header before the index that names it is written.
    pack_id = content_id(source_id, done)
    stamp_shards(dest, len(done), pack_id)
    _write_index(index_path, done, pack_id, sources, opts)
    check_written(dest)


_ROOM = (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC))
_WRITABLE = (errno.EROFS, errno.EACCES, errno.EPERM)


def _write_error(exc: OSError, dest: str, done: list) -> PackWriteError:
    """An OSError of pack's writing, with the advice its errno calls for."""
    if isinstance(exc, PackWriteError):
        return exc
    kept = sum(len(e) for e, _ in done)
    advice = "make room and run pack again to resume" if exc.errno in _ROOM else \
        "make it writable and run pack again to resume" if exc.errno in _WRITABLE else \
        "run pack again to resume once that is fixed"
    where = shown(os.fspath(exc.filename)) if exc.filename else dest
    return PackWriteError(exc.errno, f"pack: cannot write {where}: {exc.strerror or exc}. The {len(done)} complete "
                                     f"shards ({kept} records) in {dest} are kept: {advice}")


def _index_id(path: str) -> bytes | None:
    """The pack id of an existing, readable index, else None."""
    try:
        return fmt.read_index(path)[1]
    except (OSError, fmt.ShardFormatError):
        return None


def _run(sources: Sources, opts: Options, dest: str, pack_id: bytes, identity: dict, first: int, done: list,
         summary: PackSummary, threads: int, shard_bytes: int, bar: Progress | None) -> None:
    """Convert items first.. in threads and append them in order, sealing a shard whenever it is full
    (appended to `done`). On any error the unfinished shard's temporary file is removed."""
    n = len(sources.names)
    total = sum(sources.sizes) if sources.sizes else n
    progress_at = sum(sources.sizes[:first]) if sources.sizes else first
    writer = None
    with ThreadPoolExecutor(threads, thread_name_prefix="fastprep-pack") as pool:
        pending: deque = deque()
        nxt = first
        try:
            for i in range(first, n):
                while nxt < n and len(pending) < 4 * threads:
                    pending.append(pool.submit(_convert, sources, nxt, opts))
                    nxt += 1
                item, record = pending.popleft().result()
                if writer is None:
                    writer = ShardWriter(dest, len(done), pack_id, i, identity)
                if record is not None:
                    record.label, record.extras = item.label, item.extras
                    writer.add(i, item.name, record, item.digest)
                    summary.warnings += [(item.name, w) for w in record.warnings]
                elif summary.on_error == "raise":
                    raise _bad_item(sources, i, item.name, item.unreadable) from item.error
                else:
                    summary.bad_samples.record(i, shown(item.name), item.error or Unreadable(item.unreadable))
                    writer.skip(i, item.name, item.unreadable, item.digest, sources.sizes[i] if sources.sizes else 0)
                progress_at += sources.sizes[i] if sources.sizes else 1
                if bar is not None:
                    bar(f"{i + 1}/{n} images", progress_at / max(total, 1))
                if writer.bytes >= shard_bytes or i + 1 == n:
                    done.append(writer.close(i + 1))
                    writer = None
        except BaseException:
            for f in pending:
                f.cancel()
            if writer is not None:  # nothing half-written stays
                writer.abort()
            raise


def _write_index(path: str, done: list, pack_id: bytes, sources: Sources, opts: Options) -> None:
    entries = np.concatenate([e for e, _ in done]) if done else np.zeros(0, fmt.ENTRY)
    names = [n for _, meta in done for n in meta["names"]]
    extras = [x for _, meta in done for x in (meta["extras"] or [None] * len(meta["names"]))]
    meta = {"classes": sources.classes, "class_to_idx": sources.class_to_idx,
            "shards": [[fmt.shard_name(k), int(m["bytes"]), len(e)] for k, (e, m) in enumerate(done)],
            "skipped": [s for _, m in done for s in m["skipped"]], "options": opts.as_dict(),
            "extras": extras if any(x is not None for x in extras) else None, "source": sources.kind,
            "digests": [m["digest"] for _, m in done]}
    fmt.write_durably(path, fmt.index_bytes(entries, pack_id, meta, names))


def _finish(summary: PackSummary, dest: str, done: list, start: float) -> PackSummary:
    summary.records = sum(len(e) for e, _ in done)
    summary.shards = len(done)
    summary.skipped = [(name, why) for _, m in done for _, name, why in m["skipped"]]
    for entries, meta in done:
        add_shard_kinds(summary, meta, len(entries))
    files = [fmt.shard_name(k) for k in range(len(done))] + [fmt.INDEX_NAME]
    summary.packed_bytes = sum(os.path.getsize(os.path.join(dest, f)) for f in files)
    summary.seconds = time.perf_counter() - start
    if summary.warnings:
        lines = [f"{shown(name)}: libjpeg recovered from corrupt data: {w}" for name, w in summary.warnings[:10]]
        more = len(summary.warnings) - len(lines)
        warnings.warn(PackWarning(f"pack {dest}: " + "; ".join(lines) + (f"; and {more} more" if more > 0 else "")),
                      stacklevel=3)
    return summary
