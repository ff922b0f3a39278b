"""What each store's fsspec client is told so that fastprep's :class:`Retry` is the one bounded retry
loop and ``Retry.timeout`` the per-request timeout: every client retries on its own by default, with
backoffs that stack under fastprep's (gcsfs: 6 tries a request, up to 32 s apart; azure-core under
adlfs: 3 retries, up to a minute apart; botocore under s3fs: up to 5), so a 503 or a dropped body
would be tried 30 times and a store that is down waited for minutes before fastprep even hears of it.
One loop stays that no option reaches: azure-storage's downloader reads a body cut short or dropped
up to 3 times within one of fastprep's tries.

Only where the caller left the client's own settings alone: ``storage_options`` that set them win.
"""

from __future__ import annotations

import inspect
from typing import Any

from fastprep.io.remote._deadline import http_timeout

S3 = ("s3", "s3a")
GS = ("gs", "gcs")
AZ = ("az", "abfs", "abfss")
HTTP = ("http", "https")  # where "?..." is a query string (a token, a signature), not part of a name


def client_options(protocol: str, options: dict, timeout: float, signed: bool = False) -> dict:
    """storage_options with the client's own retries off and `timeout` per request, where unset;
    `signed` (a query string or presigned URLs): URLs sent as given, their escapes kept (aiohttp
    would turn X-Amz-Credential's "%2F" into "/", which is no longer what was signed)."""
    options = dict(options)
    if protocol in HTTP and signed:
        options.setdefault("encoded", True)
    if protocol in S3 and "config_kwargs" not in options:
        # max_pool_connections: botocore's 10 would cap a chunk's range reads (read together) at 10 in flight
        options["config_kwargs"] = {"retries": {"total_max_attempts": 1}, "connect_timeout": timeout,
                                    "read_timeout": timeout, "max_pool_connections": 64}
    if protocol in HTTP and "timeout" not in options.get("client_kwargs", {}):
        options["client_kwargs"] = {**options.get("client_kwargs", {}), "timeout": http_timeout(timeout)}
    if protocol in GS:
        options.setdefault("requests_timeout", timeout)
    if protocol in AZ:
        options.setdefault("connection_timeout", timeout)
        options.setdefault("read_timeout", timeout)
    return options


def single_try(fs: Any, protocol: str, options: dict) -> None:
    """Turns the connected client's own retry loop off (see the module docstring)."""
    if protocol in S3 and "config_kwargs" not in options:
        fs.retries = 1  # s3fs's own loop, around botocore's
    elif protocol in GS:
        # gcsfs retries inside a decorator on its async request methods (no option): the undecorated
        # ones. Only coroutines wrapping coroutines: fsspec's sync methods (call, rm, ...) wrap their
        # async twins too, and a static method (close_session) must stay unbound.
        for cls in type(fs).__mro__:
            if cls.__module__.startswith("gcsfs"):
                for name, method in vars(cls).items():
                    bare = getattr(method, "__wrapped__", None)
                    if (inspect.iscoroutinefunction(method) and inspect.iscoroutinefunction(bare)
                            and name not in fs.__dict__):
                        setattr(fs, name, bare.__get__(fs))
    elif protocol in AZ and "retry_policy" not in options:
        # adlfs passes no retry option to azure-core: its policy, shared by every blob client made from it
        policy = getattr(getattr(getattr(fs, "service_client", None), "_config", None), "retry_policy", None)
        if policy is not None and hasattr(policy, "total_retries"):
            policy.total_retries = 0


def put_file(fs: Any, protocol: str, local: str, path: str) -> None:
    """The local file `local` to the object `path`. gcsfs sends a file under 5 MiB as one multipart
    request whose file part ends in a bare LF before the boundary, so a file ending in '\\r' reads there
    as CRLF + boundary and loses that byte (the GCS emulator keeps 37320 of 37321; a shard's last byte
    is '\\r' one time in 256). Its write stream sends the bytes raw (a resumable upload), every byte kept."""
    if protocol not in GS:
        fs.put_file(local, path)
        return
    with open(local, "rb") as src, fs.open(path, "wb") as dst:
        while block := src.read(16 << 20):
            dst.write(block)
