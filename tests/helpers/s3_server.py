"""The S3-API server the remote tests read from: moto's standalone server on a free loopback port,
started once per test session, behind tests/helpers/fault_proxy.py's proxy.

The same tests run against a real store (MinIO, AWS S3, any S3-compatible endpoint) when these
are set; credentials then come from the client's usual sources (AWS_ACCESS_KEY_ID /
AWS_SECRET_ACCESS_KEY, ~/.aws, an instance role):

    FASTPREP_TEST_S3_BUCKET    a bucket the tests may write under (a fresh prefix per run)
    FASTPREP_TEST_S3_ENDPOINT  its endpoint URL (e.g. http://127.0.0.1:9000 for MinIO); unset: AWS.
                               An http:// endpoint is put behind the fault proxy; https:// or AWS
                               run the tests that need no proxy and skip the others.

GCS via its S3-compatible XML API: FASTPREP_TEST_S3_ENDPOINT=https://storage.googleapis.com with
HMAC keys in AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from urllib.parse import urlparse

import pytest

from helpers.fault_proxy import FaultProxy


@dataclass
class S3:
    bucket: str
    prefix: str
    endpoint: str | None  # what the client talks to (the proxy where there is one)
    proxy: FaultProxy | None

    def url(self, name: str) -> str:
        return f"s3://{self.bucket}/{self.prefix}/{name}"

    def options(self, **config) -> dict:
        return {"endpoint_url": self.endpoint} if self.endpoint else {}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Child:
    """A server process (stop() ends it)."""

    def __init__(self, args: list[str], ready: str | None = None, cwd: str | None = None):
        # stdout read only for the ready line: a server's output otherwise goes nowhere (an unread pipe fills)
        out = subprocess.PIPE if ready is None else subprocess.DEVNULL
        self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.DEVNULL, text=True, cwd=cwd)
        self.line = self.proc.stdout.readline().strip() if ready is None else ready

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def wait_for(port: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), 0.5).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _test_credentials() -> None:
    """moto's stand-in credentials, where the environment names none."""
    for key, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                       ("AWS_DEFAULT_REGION", "us-east-1")):
        os.environ.setdefault(key, value)


def moto_process(bucket: str = "fastprep-test") -> tuple[int, Child]:
    """moto's S3 server in a process of its own on a free loopback port, holding `bucket`: (port, it)."""
    pytest.importorskip("moto.server", reason="needs moto's S3 server: pip install 'moto[s3]' flask flask-cors")
    _test_credentials()
    port = free_port()
    server = Child([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], ready="")
    wait_for(port)
    import boto3  # noqa: PLC0415 (moto's dependency)

    boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1").create_bucket(Bucket=bucket)
    return port, server


def proxy_process(upstream_port: int, latency: float, bandwidth: float | None = None) -> Child:
    """fault_proxy.py in a process of its own in front of `upstream_port`, adding `latency` per
    request (and capping the link at `bandwidth` bytes/s); its port is ``.line``."""
    return Child([sys.executable, os.path.join(os.path.dirname(__file__), "fault_proxy.py"), str(upstream_port),
                  str(latency), *([] if bandwidth is None else [str(bandwidth)])])


def start_processes(latency: float) -> tuple[S3, object]:
    """moto and the proxy (adding `latency` per request) in processes of their own (a benchmark's:
    in-process servers would share its GIL); no fault injection."""
    port, server = moto_process()
    proxy = proxy_process(port, latency)
    return S3("fastprep-test", f"bench-{uuid.uuid4().hex[:8]}", f"http://127.0.0.1:{proxy.line}", None), \
        (proxy, server)


def start() -> tuple[S3, object]:
    """The S3 endpoint the tests use, and what to stop at the end."""
    pytest.importorskip("s3fs", reason="the remote tests need s3fs: pip install 'fastprep[remote]'")
    bucket = os.environ.get("FASTPREP_TEST_S3_BUCKET")
    prefix = f"fastprep-test-{uuid.uuid4().hex[:8]}"
    if bucket:
        endpoint = os.environ.get("FASTPREP_TEST_S3_ENDPOINT")
        if endpoint and urlparse(endpoint).scheme == "http":
            proxy = FaultProxy(urlparse(endpoint).port or 80).start()
            return S3(bucket, prefix, proxy.url, proxy), proxy
        return S3(bucket, prefix, endpoint, None), None
    server_mod = pytest.importorskip("moto.server", reason="the remote tests start moto's S3 server: "
                                                           "pip install 'moto[s3]' flask flask-cors (in the test extra)")
    _test_credentials()
    port = free_port()
    server = server_mod.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    import boto3  # noqa: PLC0415 (moto's dependency)

    boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1").create_bucket(
        Bucket="fastprep-test")
    proxy = FaultProxy(port).start()
    return S3("fastprep-test", prefix, proxy.url, proxy), (server, proxy)


def stop(handle: object) -> None:
    for h in handle if isinstance(handle, tuple) else (handle,):
        if h is not None:
            h.stop()


@pytest.fixture(scope="session")
def s3():
    """The session's S3 endpoint (moto on loopback behind the fault proxy, or the store the
    environment names); the proxy's faults and log are cleared before each use."""
    where, handle = start()
    yield where
    stop(handle)
