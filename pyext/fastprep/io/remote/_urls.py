"""Pack URLs: what names a remote pack (a URL, or a mapping of its files to presigned URLs) and
which of them can be written.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastprep.io.remote._clients import HTTP
from fastprep.io.remote._redaction import redact

__all__ = ["INDEX_NAME", "check_writable", "is_url", "signed_files"]

INDEX_NAME = "index.fpi"  # fastprep.io._pack_format.INDEX_NAME (that layer is above this one)


def is_url(path: Any) -> bool:
    """Whether a pack path is a URL (read through fsspec) rather than a local folder: a str with
    "://", or a mapping of the pack's file names to their URLs (presigned URLs, one per file)."""
    return (isinstance(path, str) and "://" in path) or isinstance(path, Mapping)


def signed_files(urls: Mapping) -> tuple[str, dict[str, str]]:
    """A mapping of file name -> URL (presigned URLs: each signs its own object's path, so the
    pack's files cannot share one) checked: (the pack's URL, the index's without its name and
    query, the mapping as a dict)."""
    where = "RemoteStore: a mapping of the pack's files to their URLs"
    bad = [k for k, v in urls.items() if not (isinstance(k, str) and "/" not in k and isinstance(v, str)
                                                and v.split("://", 1)[0].lower() in HTTP)]
    if bad:
        raise ValueError(f"{where} takes file names (such as {INDEX_NAME!r}, 'shard-00000.fpk') to http(s):// "
                         f"URLs; got {bad[0]!r}: {redact(str(urls[bad[0]]))!r}")
    if INDEX_NAME not in urls:
        raise ValueError(f"{where} must name the index, {INDEX_NAME!r}; got {sorted(urls)[:4]}")
    base = redact(urls[INDEX_NAME]).rstrip("/")
    base = base[:-len(INDEX_NAME) - 1] if base.endswith("/" + INDEX_NAME) else base
    return base, dict(urls)


def check_writable(url: Any, who: str) -> None:
    """ValueError where `url` cannot be written through fsspec: http(s):// (a web server takes no
    uploads) or a mapping of presigned URLs (each signed for reading)."""
    if isinstance(url, Mapping) or str(url).split("://", 1)[0].lower() in HTTP:
        shown = "a mapping of presigned URLs" if isinstance(url, Mapping) else redact(str(url))
        raise ValueError(f"{who}: {shown} is read-only here (http(s):// takes no uploads): upload to the "
                         f"store's own URL (s3://, gs://, az://) or copy the pack folder to the web server")
