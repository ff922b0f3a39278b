"""A pack written to a URL: packed into a local staging folder (resumable, as :func:`fastprep.io.pack`
is), then uploaded shard by shard, the index last, so a reader never finds an index whose shards
are not all there. A re-run uploads only the shards the destination does not hold already: a shard
there is kept only if it is this pack's, checked by its size, its header (number and pack id) and
its records (their digest in its table, against the index's): never by size and id alone. Every
shard sent is read back the same way, and the index goes up only once every shard under it
verifies (then it is read back too): an upload that would leave the URL unreadable fails, naming
the shard, with no index of this pack there.
"""

from __future__ import annotations

import errno
import os
import struct
from typing import Any

import fastprep.io._pack_format as fmt
from fastprep.errors import PackWriteError, ShardFormatError
from fastprep.io._store import Store, open_store
from fastprep.io.packed._identity import check_written
from fastprep.io.packed._pack import PackSummary
from fastprep.io.packed._pack import pack as pack_local
from fastprep.io.remote._pack_source import default_staging_dir, url_key
from fastprep.io.remote._retry import Retry, redact
from fastprep.io.remote._urls import check_writable


def upload_pack(local: str | os.PathLike, url: str, *, storage_options: dict | None = None,
                retry: Retry | None = None) -> int:
    """Uploads the complete pack in folder `local` to `url`; returns how many shards were sent.
    Raises PackWriteError (naming the shard) where the URL does not hold a shard as uploaded.

    Args:
        local: a pack folder (its index written: a finished :func:`fastprep.io.pack`).
        url: the destination, e.g. "s3://bucket/train.packed": any store
            :func:`fastprep.io._store.open_store` opens (a local folder too: a copy of the pack).
        storage_options, retry: as :class:`fastprep.io.remote.RemoteStore`.

    Example:
        >>> fastprep.io.pack("train/", "/scratch/train.packed")
        >>> upload_pack("/scratch/train.packed", "s3://bucket/train.packed")
    """
    check_writable(url, "upload_pack")
    local = os.fspath(local)
    index = os.path.join(local, fmt.INDEX_NAME)
    if not os.path.isfile(index):
        raise FileNotFoundError(f"upload_pack: no {fmt.INDEX_NAME} in {local!r}: not a finished pack")
    check_written(local)  # the local shards are the index's (ShardFormatError names the first that is not)
    entries, pack_id, meta, _ = fmt.read_index(index)
    with open(index, "rb") as f:
        header = f.read(fmt.HEADER_BYTES)
    store = open_store(url, storage_options=storage_options, retry=retry)
    store.make_folder()
    if store.size(fmt.INDEX_NAME) is not None and store.read(fmt.INDEX_NAME, 0, fmt.HEADER_BYTES) != header:
        store.remove(fmt.INDEX_NAME)  # another pack's: readers must not pair it with the new shards
    sent = at = 0
    for k, (name, size, count) in enumerate(meta["shards"]):
        digest = fmt.records_digest(entries[at:at + count])  # what the shard's table must chain to
        at += count
        if remote_shard_differs(store, name, k, size, pack_id, digest) is None:
            continue  # this pack's shard, there from an earlier run
        store.upload(os.path.join(local, name), name)
        sent += 1
        why = remote_shard_differs(store, name, k, size, pack_id, digest)
        if why is not None:
            raise _unreadable(store, name, why)
    store.upload(index, fmt.INDEX_NAME)  # last: the pack is complete at the URL from now on
    got = store.info(fmt.INDEX_NAME)
    if got is None or int(got["size"]) != os.path.getsize(index) or \
            store.read(fmt.INDEX_NAME, 0, fmt.HEADER_BYTES) != header:
        raise _unreadable(store, fmt.INDEX_NAME, "it is not the index uploaded (another upload to the URL at once?)")
    return sent


def _unreadable(store: Store, name: str, why: str) -> PackWriteError:
    return PackWriteError(errno.EIO, f"upload_pack: {store.where(name)} does not hold what was uploaded: {why}. "
                                     f"The pack at {store.shown} is not complete: run the upload again")


def remote_shard_differs(store: Store, name: str, k: int, size: int, pack_id: bytes,
                         digest: str) -> str | None:
    """None where the object `name` is shard k of this pack (its size, its header's number and pack
    id, its table's and its JSON's digest of the records), else what differs. Three small reads:
    the header, the footer, the table with its JSON."""
    info = store.info(name)
    if info is None:
        return "missing"
    if int(info["size"]) != size:
        return f"{int(info['size'])} bytes, not {size}"
    if size < 2 * fmt.HEADER_BYTES:
        return "too short for a shard"
    try:
        number, shard_id = fmt.read_shard_header(store.read(name, 0, fmt.HEADER_BYTES), name)
        if (number, shard_id) != (k, pack_id):
            return f"its header says shard {number} of pack {shard_id.hex()}, not shard {k} of {pack_id.hex()}"
        footer = store.read(name, size - fmt.FOOTER_BYTES, size)
        table_at = struct.unpack_from("<Q", footer, 16)[0]
        if not fmt.HEADER_BYTES <= table_at < size - fmt.FOOTER_BYTES:
            return "its footer is not a shard's"
        entries, meta = fmt.read_shard_trailer(_Tail(store.read(name, table_at, size), table_at, size), name)
    except ShardFormatError as exc:
        return str(exc)
    got = fmt.records_digest(entries)
    if got != digest or meta.get("digest", digest) != digest:  # (format 1 shards record no digest)
        return f"its records' digest is {got}, this pack's {digest}"
    return None


class _Tail:
    """The bytes [base, size) of a file, indexed as :func:`fmt.read_shard_trailer` indexes a whole
    file (a slice before `base` is an error: the footer pointed there)."""

    def __init__(self, data: bytes, base: int, size: int):
        self.data, self.base, self.size = data, base, size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, at: slice) -> bytes:
        start = at.start if at.start is not None else 0
        stop = at.stop if at.stop is not None else self.size
        if start < self.base:
            raise ShardFormatError(f"bytes [{start}, {stop}) are before the table its footer names")
        return self.data[start - self.base:stop - self.base]


def pack(src: Any, dest: str | os.PathLike, *, storage_options: dict | None = None,
         staging: str | os.PathLike | None = None, retry: Retry | None = None, **options: Any) -> PackSummary:
    """Pack an image folder or a map-style dataset into shards + an index for :class:`PackedDataset`,
    in a local folder or at a URL (s3://, gs://, az://, file://: whatever fsspec writes).

    A local `dest` is packed in place, by :func:`fastprep.io.packed._pack.pack` (restart-indexed JPEGs or raw
    pixels, resumable: its docstring and docs/real-files.md say how). A URL `dest` is packed into
    `staging`, then uploaded by :func:`fastprep.io.upload_pack`: shards first, each read back,
    the index last, only the shards the URL does not hold (compared by their records' digest: a
    re-run resumes both the packing and the upload).

    Args:
        src: a folder of class subfolders, or a map-style dataset of ``(image, label, ...)``.
        dest: the folder or URL to write, e.g. "s3://bucket/train.packed".
        storage_options: for a URL: keyword arguments of the fsspec filesystem (an endpoint_url...).
        staging: for a URL: the local folder packed first (default: under $FASTPREP_STAGING, else
            ~/.cache/fastprep/staging, named after the URL, kept for a resume; never under the shard
            cache, whose eviction must not reach it).
        retry: for a URL: how failed uploads are retried (:class:`fastprep.io.remote.Retry`).
        **options: :func:`fastprep.io.packed._pack.pack`'s: mode, max_side, threads, quality, non_jpeg,
            shard_bytes, restart, progress, overwrite, on_error.

    Returns:
        a :class:`PackSummary` (its `dest` the URL, without credentials: see remote.retry.redact).

    Example:
        >>> fastprep.io.pack("train/", "train.packed")
        >>> fastprep.io.pack("train/", "s3://bucket/train.packed")
    """
    store = open_store(dest, storage_options=storage_options, retry=retry)  # a URL's checked before the packing
    if store.local_path(fmt.INDEX_NAME) is not None:  # a folder here: packed in place, nothing to upload
        if storage_options is not None or staging is not None:
            raise ValueError(f"pack: storage_options and staging are for a URL dest, got dest={dest!r}")
        return pack_local(src, dest, **options)
    check_writable(dest, "pack")  # before the packing, which may take hours
    url = str(dest).rstrip("/")
    if staging is None:
        staging = os.path.join(default_staging_dir(), url_key(url))
    summary = pack_local(src, staging, **options)
    upload_pack(staging, url, storage_options=storage_options, retry=retry)
    summary.dest = redact(url)  # shown in its repr: no credentials
    return summary

