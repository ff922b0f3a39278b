"""fastprep.io.remote: packs in object storage (s3://, gs://, az://, http(s)://, file://), read
through a local shard cache or by byte range (docs/remote.md).

- :class:`RemoteStore`: a URL prefix's objects through fsspec, retried and counted.
- :class:`ShardCache`: shards downloaded whole, checked, committed by rename, evicted LRU.
- :class:`RateLimit`: a cap on a store's requests and bytes per second, shared by its workers.
- :class:`Prefetcher`: shards downloaded ahead in an epoch's first-use order.
- :mod:`ranges`: the bytes a JPEG window's decode needs.
- :func:`sign_pack`: presigned URLs for every file of a pack, for ``PackedDataset(urls)``.

Packing to a URL (``fastprep.io.pack(src, url)``, ``fastprep.io.upload_pack``) is io.packed's: it
packs, then uploads through this package.
"""

from fastprep.io.remote._cache import ShardCache
from fastprep.io.remote._limits import RateLimit
from fastprep.io.remote._prefetch import Prefetcher
from fastprep.io.remote._retry import Retry
from fastprep.io.remote._signing import sign_pack
from fastprep.io.remote._store import RemoteStore, is_url

__all__ = ["Prefetcher", "RateLimit", "RemoteStore", "Retry", "ShardCache", "is_url", "sign_pack"]
