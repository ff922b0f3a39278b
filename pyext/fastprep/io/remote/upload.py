"""A pack written to a URL: packed into a local staging folder (resumable, as :func:`fastprep.io.pack`
is), then uploaded shard by shard, the index last, so a reader never finds an index whose shards
are not all there. A re-run uploads only the shards missing at the destination (or not of this
pack: the size and the pack id in their header are compared).
"""

from __future__ import annotations

import os
from typing import Any

from fastprep.io.packed import format as fmt
from fastprep.io.packed.pack import PackSummary
from fastprep.io.packed.pack import pack as pack_local
from fastprep.io.remote.pack_source import default_staging_dir, url_key
from fastprep.io.remote.retry import Retry, redact
from fastprep.io.remote.store import RemoteStore, is_url


def upload_pack(local: str | os.PathLike, url: str, *, storage_options: dict | None = None,
                retry: Retry | None = None) -> int:
    """Uploads the complete pack in folder `local` to `url`; returns how many shards were sent.

    Args:
        local: a pack folder (its index written: a finished :func:`fastprep.io.pack`).
        url: the destination, e.g. "s3://bucket/train.packed".
        storage_options, retry: as :class:`fastprep.io.remote.RemoteStore`.

    Example:
        >>> fastprep.io.pack("train/", "/scratch/train.packed")
        >>> upload_pack("/scratch/train.packed", "s3://bucket/train.packed")
    """
    local = os.fspath(local)
    index = os.path.join(local, fmt.INDEX_NAME)
    if not os.path.isfile(index):
        raise FileNotFoundError(f"upload_pack: no {fmt.INDEX_NAME} in {local!r}: not a finished pack")
    _, pack_id, meta, _ = fmt.read_index(index)
    store = RemoteStore(url, storage_options, retry)
    store.make_folder()
    if store.size(fmt.INDEX_NAME) is not None and _remote_id(store, fmt.INDEX_NAME, 16) != pack_id:
        store.remove(fmt.INDEX_NAME)  # another pack's: readers must not pair it with the new shards
    sent = 0
    for name, size, _ in meta["shards"]:
        if store.size(name) == size and _remote_id(store, name, 16) == pack_id:
            continue  # already there from an earlier run
        store.upload(os.path.join(local, name), name)
        sent += 1
    store.upload(index, fmt.INDEX_NAME)  # last: the pack is complete at the URL from now on
    return sent


def _remote_id(store: RemoteStore, name: str, at: int) -> bytes:
    """The 16-byte pack id at byte `at` of an object's header (index and shard headers both keep it there)."""
    head = store.read(name, 0, fmt.HEADER_BYTES)
    return bytes(head[at:at + 16]) if len(head) == fmt.HEADER_BYTES else b""


def pack(src: Any, dest: str | os.PathLike, *, storage_options: dict | None = None,
         staging: str | os.PathLike | None = None, retry: Retry | None = None, **options: Any) -> PackSummary:
    """Pack an image folder or a map-style dataset into shards + an index for :class:`PackedDataset`,
    in a local folder or at a URL (s3://, gs://, az://, file://: whatever fsspec writes).

    A local `dest` is packed in place, by :func:`fastprep.io.packed.pack.pack` (restart-indexed JPEGs or raw
    pixels, resumable: its docstring and docs/real-files.md say how). A URL `dest` is packed into
    `staging`, then uploaded by :func:`fastprep.io.remote.upload_pack`: shards first, the index last,
    only the shards the URL lacks (a re-run resumes both the packing and the upload).

    Args:
        src: a folder of class subfolders, or a map-style dataset of ``(image, label, ...)``.
        dest: the folder or URL to write, e.g. "s3://bucket/train.packed".
        storage_options: for a URL: keyword arguments of the fsspec filesystem (an endpoint_url...).
        staging: for a URL: the local folder packed first (default: under $FASTPREP_STAGING, else
            ~/.cache/fastprep/staging, named after the URL, kept for a resume; never under the shard
            cache, whose eviction must not reach it).
        retry: for a URL: how failed uploads are retried (:class:`fastprep.io.remote.Retry`).
        **options: :func:`fastprep.io.packed.pack.pack`'s: mode, max_side, threads, quality, non_jpeg,
            shard_bytes, restart, progress, overwrite, on_error.

    Returns:
        a :class:`PackSummary` (its `dest` the URL, without credentials: see remote.retry.redact).

    Example:
        >>> fastprep.io.pack("train/", "train.packed")
        >>> fastprep.io.pack("train/", "s3://bucket/train.packed")
    """
    if not is_url(os.fspath(dest) if isinstance(dest, os.PathLike) else dest):
        if storage_options is not None or staging is not None:
            raise ValueError(f"pack: storage_options and staging are for a URL dest, got dest={dest!r}")
        return pack_local(src, dest, **options)
    url = str(dest).rstrip("/")
    if staging is None:
        staging = os.path.join(default_staging_dir(), url_key(url))
    summary = pack_local(src, staging, **options)
    upload_pack(staging, url, storage_options=storage_options, retry=retry)
    summary.dest = redact(url)  # shown in its repr: no credentials
    return summary

