"""fastprep.io.pack: an image folder or a map-style dataset into a few large shard files plus an
index (the format: fastprep/io/shards.py), read back by :class:`fastprep.io.PackedDataset`.

Resumable: shards are written whole (temporary name, fsync, rename) in source order, so after a
kill ``pack`` keeps the shards it finds (same sources and options: the pack id in each shard says
so) and goes on after the last one's sources. The index comes last.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import warnings
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fastprep.io import shards as fmt
from fastprep.io.errors import PackWriteError
from fastprep.io.folder import IMG_EXTENSIONS, find_classes, make_dataset
from fastprep.io.pack_items import Options, Packed, Unreadable, extras_of, label_of, make_record
from fastprep.io.pack_writer import ShardWriter, completed_shards
from fastprep.progress import Progress

MODES, NON_JPEG = ("jpeg", "raw"), ("encode", "raw")


class PackWarning(UserWarning):
    """Inputs the packer skipped (unreadable) or read with libjpeg's recovery from corrupt data."""


@dataclass
class PackSummary:
    """What :func:`pack` did."""

    dest: str
    records: int
    shards: int
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (name, why)
    warnings: list[tuple[str, str]] = field(default_factory=list)  # (name, libjpeg's words)
    input_bytes: int = 0  # of the source files (a folder's), else 0
    packed_bytes: int = 0  # of the shards and the index
    resumed: int = 0  # records found done in shards of an interrupted run
    seconds: float = 0.0


@dataclass
class Sources:
    """What to pack: item i's name, and a loader returning (image, label, extras)."""

    names: list[str]
    load: Callable[[int], tuple[Any, Any, tuple]]
    classes: list[str] | None
    fingerprint: Any
    sizes: list[int] | None  # input bytes per item (a folder's files), for the progress and the summary


def _folder(root: str) -> Sources:
    classes, class_to_idx = find_classes(root)
    samples = make_dataset(root, class_to_idx, IMG_EXTENSIONS)
    stats = [os.stat(p) for p, _ in samples]
    names = [os.path.relpath(p, root) for p, _ in samples]
    listing = [(n, s.st_size, s.st_mtime_ns) for n, s in zip(names, stats, strict=True)]
    return Sources(names, lambda i: (samples[i][0], samples[i][1], ()), classes, {"folder": listing},
                   [s.st_size for s in stats])


def _dataset(ds: Any) -> Sources:
    samples = getattr(ds, "samples", None)
    untransformed = getattr(ds, "transform", None) is None and getattr(ds, "target_transform", None) is None
    root = getattr(ds, "root", None)
    if untransformed and isinstance(root, (str, os.PathLike)) and isinstance(samples, list) and samples and all(
            isinstance(s, tuple) and len(s) == 2 and isinstance(s[0], str) for s in samples):
        files = _folder(os.fspath(root))  # an ImageFolder's own files: transcoded, not re-encoded
        if [os.path.join(os.fspath(root), n) for n in files.names] == [s[0] for s in samples]:
            return files
    try:
        n = len(ds)
    except TypeError:
        raise TypeError(f"pack: expected a folder path or a map-style dataset (len and [i]), got "
                        f"{type(ds).__name__}") from None

    def load(i: int) -> tuple[Any, Any, tuple]:
        item = ds[i]
        if not isinstance(item, (tuple, list)) or len(item) < 2:
            raise TypeError(f"pack: item {i} of the dataset is a {type(item).__name__}; expected (image, label, ...)")
        return item[0], item[1], tuple(item[2:])

    classes = getattr(ds, "classes", None)
    classes = list(classes) if isinstance(classes, (list, tuple)) and all(isinstance(c, str) for c in classes) \
        else None
    return Sources([f"item {i}" for i in range(n)], load, classes,
                   {"dataset": f"{type(ds).__module__}.{type(ds).__qualname__}", "len": n}, None)


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


def _convert(sources: Sources, i: int, opts: Options) -> Packed | tuple[str, str]:
    """Item i's record, or (name, why) when it is skipped. Programming errors (a bad label) raise."""
    name = sources.names[i]
    try:
        image, label, rest = sources.load(i)
    except Unreadable as exc:
        return name, str(exc)
    if isinstance(image, str) and not sources.sizes:
        name = image
    packed_label, packed_extras = label_of(label, name), extras_of(rest, name)
    try:
        p = make_record(image, opts)
    except Unreadable as exc:
        return name, str(exc)
    p.label, p.extras = packed_label, packed_extras
    return p


def pack(src: Any, dest: str | os.PathLike, *, mode: str = "jpeg", max_side: int | None = None,
         threads: int | None = None, quality: int = 90, non_jpeg: str = "encode", shard_bytes: int = 256 << 20,
         restart: int = 4, progress: bool = True) -> PackSummary:
    """Pack an image folder or a map-style dataset into shards + an index for :class:`PackedDataset`.

    JPEGs are transcoded losslessly (the same DCT coefficients) to baseline Huffman with a restart
    marker every K MCUs (K divides the MCU row, near `restart`), so a crop window decodes from the
    restart intervals covering it only; other images are encoded once at `quality` or stored raw
    (`non_jpeg`). ``mode="raw"`` stores every image as uint8 pixels (read through a memory map).
    Unreadable inputs are skipped and named (a :class:`PackWarning` and ``summary.skipped``).

    Args:
        src: a folder of class subfolders (torchvision's ImageFolder layout, order and labels), or a
            map-style dataset of ``(image, label, ...)``: image as JPEG/PNG bytes, a path, a PIL image,
            an HWC uint8 array or a CHW uint8 tensor; int labels; later fields JSON values. An
            untransformed ImageFolder (fastprep's or torchvision's) packs its files.
        dest: the folder to write (created); an interrupted pack there is resumed.
        mode: "jpeg" or "raw".
        max_side: shrink images whose longer side is larger to this (Lanczos; a JPEG is then
            re-encoded at `quality`: lossy). None (default) keeps every pixel.
        threads: converting threads (default: every core); a dataset's ``[i]`` is called from them.
        quality: JPEG quality for inputs that are encoded (non-JPEGs, and `max_side` shrinks).
        non_jpeg: "encode" (default) or "raw" for inputs that are not JPEGs, in mode "jpeg".
        shard_bytes: a shard is closed once it holds this many bytes (default 256 MiB).
        restart: target MCUs per restart interval (4: 64 px of a 4:2:0 row).
        progress: a progress bar with the time left on stderr.

    Returns:
        a :class:`PackSummary`.

    Raises:
        ValueError: a bad option.
        TypeError: a dataset item that is not (image, int label, ...).
        PackWriteError: (an OSError) the destination cannot be written (full or read-only disk),
            naming the file; the shards completed before are kept and a later run resumes from them.

    Example:
        >>> fastprep.io.pack("train/", "train.packed")          # or: python -m fastprep pack train/ train.packed
        >>> ds = fastprep.io.PackedDataset("train.packed")
    """
    _check_options(mode, max_side, threads, quality, non_jpeg, shard_bytes, restart)
    start = time.perf_counter()
    dest = os.fspath(dest)
    if isinstance(src, (str, os.PathLike)):
        if not os.path.isdir(src):
            raise FileNotFoundError(f"pack: {os.fspath(src)!r} is not a folder")
        sources = _folder(os.fspath(src))
    else:
        sources = _dataset(src)
    opts = Options(mode, max_side, quality, non_jpeg, restart)
    text = json.dumps({"sources": sources.fingerprint, "options": opts.as_dict(), "format": fmt.FORMAT_VERSION},
                      sort_keys=True)
    pack_id = hashlib.sha256(text.encode()).digest()[:16]
    summary = PackSummary(dest, 0, 0, input_bytes=sum(sources.sizes or []))
    done: list = []
    bar = None
    try:
        os.makedirs(dest, exist_ok=True)
        done = completed_shards(dest, pack_id)
        summary.resumed = sum(len(e) for e, _ in done)
        first = done[-1][1]["end"] if done else 0
        index_path = os.path.join(dest, fmt.INDEX_NAME)
        if first == len(sources.names) and _index_id(index_path) == pack_id:
            return _finish(summary, dest, done, start)
        if os.path.exists(index_path):  # an index beside unfinished shards is stale: the new one comes last
            os.remove(index_path)
        bar = Progress(f"pack {os.path.basename(os.path.normpath(dest))}") if progress else None
        _run(sources, opts, dest, pack_id, first, done, summary, threads, shard_bytes, bar)
        if not done:  # nothing to pack: one empty shard records that
            done.append(ShardWriter(dest, 0, pack_id, 0).close(0))
        _write_index(index_path, done, pack_id, sources, opts)
    except OSError as exc:
        kept = sum(len(e) for e, _ in done)
        raise PackWriteError(exc.errno, f"pack: cannot write {exc.filename or dest}: {exc.strerror or exc}. The "
                                 f"{len(done)} complete shards ({kept} records) in {dest} are kept: make room (or "
                                 f"make it writable) and run pack again to resume") from exc
    finally:
        if bar is not None:
            bar.close()
    return _finish(summary, dest, done, start)


def _index_id(path: str) -> bytes | None:
    """The pack id of an existing, readable index, else None."""
    try:
        return fmt.read_index(path)[1]
    except (OSError, fmt.ShardFormatError):
        return None


def _run(sources: Sources, opts: Options, dest: str, pack_id: bytes, first: int, done: list, summary: PackSummary,
         threads: int | None, shard_bytes: int, bar: Progress | None) -> None:
    """Convert items first.. in threads and append them in order, sealing a shard whenever it is full
    (appended to `done`). On any error the unfinished shard's temporary file is removed."""
    n = len(sources.names)
    total = sum(sources.sizes) if sources.sizes else n
    progress_at = sum(sources.sizes[:first]) if sources.sizes else first
    threads = threads or (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
    writer = None
    with ThreadPoolExecutor(threads, thread_name_prefix="fastprep-pack") as pool:
        pending: deque = deque()
        nxt = first
        try:
            for i in range(first, n):
                while nxt < n and len(pending) < 4 * threads:
                    pending.append(pool.submit(_convert, sources, nxt, opts))
                    nxt += 1
                result = pending.popleft().result()
                if writer is None:
                    writer = ShardWriter(dest, len(done), pack_id, i)
                if isinstance(result, Packed):
                    writer.add(i, sources.names[i], result)
                    summary.warnings += [(sources.names[i], w) for w in result.warnings]
                else:
                    writer.skip(i, *result)
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
    meta = {"classes": sources.classes,
            "shards": [[fmt.shard_name(k), int(m["bytes"]), len(e)] for k, (e, m) in enumerate(done)],
            "skipped": [s for _, m in done for s in m["skipped"]], "options": opts.as_dict(),
            "extras": extras if any(x is not None for x in extras) else None}
    fmt.write_durably(path, fmt.index_bytes(entries, pack_id, meta, names))


def _finish(summary: PackSummary, dest: str, done: list, start: float) -> PackSummary:
    summary.records = sum(len(e) for e, _ in done)
    summary.shards = len(done)
    summary.skipped = [(name, why) for _, m in done for _, name, why in m["skipped"]]
    files = [fmt.shard_name(k) for k in range(len(done))] + [fmt.INDEX_NAME]
    summary.packed_bytes = sum(os.path.getsize(os.path.join(dest, f)) for f in files)
    summary.seconds = time.perf_counter() - start
    if summary.skipped or summary.warnings:
        lines = [f"skipped {name}: {why}" for name, why in summary.skipped[:10]]
        lines += [f"{name}: libjpeg recovered from corrupt data: {w}" for name, w in summary.warnings[:10]]
        more = len(summary.skipped) + len(summary.warnings) - len(lines)
        warnings.warn(PackWarning(f"pack {dest}: " + "; ".join(lines) + (f"; and {more} more" if more > 0 else "")),
                      stacklevel=3)
    return summary
