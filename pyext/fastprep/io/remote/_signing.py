"""Presigned URLs for a pack in object storage: every file of it signed by the store's own client,
for a machine that reads the pack with no credentials of its own (``PackedDataset(urls)``)."""

from __future__ import annotations

import os
import tempfile

import fastprep.io._pack_format as fmt
from fastprep.io.remote._retry import Retry
from fastprep.io.remote._store import RemoteStore


def sign_pack(url: str, expires: int = 3600, *, storage_options: dict | None = None,
              retry: Retry | None = None) -> dict[str, str]:
    """Presigned URLs for every file of the pack at `url` (its index and shards), valid `expires`
    seconds: ``{"index.fpi": "https://...?X-Amz-Signature=...", "shard-00000.fpk": ..., ...}``, for
    ``PackedDataset(urls)`` on a machine with no credentials. Signed by the store's own client
    (fsspec's ``sign``: s3fs; gcsfs with a service account's key; adlfs with an account key).

    Example:
        >>> urls = sign_pack("s3://bucket/train.packed", expires=6 * 3600)
        >>> ds = fastprep.io.PackedDataset(urls, cache_dir="/local-nvme/cache")
    """
    store = RemoteStore(url, storage_options, retry)
    size = store.size(fmt.INDEX_NAME)
    if size is None:
        raise FileNotFoundError(f"sign_pack: no {fmt.INDEX_NAME} at {store.shown}: not a pack")
    with tempfile.TemporaryDirectory() as tmp:
        store.download(fmt.INDEX_NAME, os.path.join(tmp, fmt.INDEX_NAME), size)
        names = [name for name, _, _ in fmt.read_index(os.path.join(tmp, fmt.INDEX_NAME))[2]["shards"]]
    return {name: store.call(f"signing {name}", name, lambda n=name: store.fs.sign(store._path(n), expiration=expires))
            for name in [fmt.INDEX_NAME, *names]}
