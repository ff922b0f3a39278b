"""The object stores the remote tests run against, each a real server on a free loopback port behind
tests/helpers/fault_proxy.py's proxy, started once per test session and per store:

    s3    moto's S3 server (tests/helpers/s3_server.py; or the store FASTPREP_TEST_S3_* names)
    gs    gcp-storage-emulator (PyPI) read through gcsfs
    az    Azurite's blob service (npm: azurite) read through adlfs, with its account key checked
    http  nginx serving a folder, every object behind a token in the query string (read-only)

`store` (the fixture) is parametrized over them; a store whose client or server is not installed
is skipped with what to install, unless FASTPREP_REQUIRE_STORES=1 (.ci/slow, which installs them
all), where that is a failure. docs/remote.md says how to start each by hand.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from helpers import s3_server
from helpers.fault_proxy import FaultProxy
from helpers.s3_server import Child, free_port, wait_for

BUCKET = "fastprep-test"
# Azurite's well-known development account (published in Azure's docs; accepted by no real account).
AZ_ACCOUNT = "devstoreaccount1"
AZ_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
# Where .ci/stores installs Azurite (npm); FASTPREP_AZURITE names another azurite-blob.
AZURITE = os.environ.get("FASTPREP_AZURITE") or os.path.expanduser(
    "~/.cache/fastprep/azurite-3.37.0/node_modules/.bin/azurite-blob")


@dataclass
class Store:
    """One store's pack prefix for this session: ``url(name)`` a pack's URL, ``options()`` its
    storage_options, ``proxy`` the fault proxy in front of it (None for a store the environment
    names over https), ``data`` the substring of a data request's proxy log line ("GET /bucket")."""

    kind: str
    root: str  # the prefix's URL, with no query
    opts: dict = field(default_factory=dict)
    proxy: FaultProxy | None = None
    data: str = "GET /"
    query: str = ""  # an http store's token query, put after every object's name
    served: Path | None = None  # a read-only store's folder (http): packs are copied there
    wrong: dict | None = None  # storage_options (or {"query": ...}) with a credential the server refuses
    secret: str | None = None  # the credential in options() or the URL, which nothing may show
    endpoint: str | None = None

    def data_of(self, path: str) -> str:
        """The proxy log's line start for a read of the object at `path` under the prefix."""
        prefix = self.root.split("://", 1)[1].split("/", 1)[1]
        return f"{self.data}{'/o' if self.kind == 'gs' else ''}/{prefix}/{path}"

    @property
    def writable(self) -> bool:
        return self.served is None

    def url(self, name: str) -> str:
        return f"{self.root}/{name}" + (f"?{self.query}" if self.query else "")

    def options(self) -> dict:
        return json.loads(json.dumps(self.opts))  # a copy: clients may change what they are given

    def needs_writable(self) -> None:
        if not self.writable:
            pytest.skip(f"{self.kind}:// is read-only here (a web server): nothing is uploaded to it")

    def pack(self, src, name: str, staging, **kw) -> None:
        """fio.pack(src) to this store's `name`, its local copy in `staging`."""
        import fastprep.io as fio  # noqa: PLC0415

        if self.writable:
            fio.pack(src, self.url(name), storage_options=self.options(), staging=staging, **kw)
        else:
            fio.pack(src, staging, **kw)
            shutil.copytree(staging, self.served / name, dirs_exist_ok=True)


def _require(why: str) -> None:
    if os.environ.get("FASTPREP_REQUIRE_STORES") == "1":
        pytest.fail(f"FASTPREP_REQUIRE_STORES=1 but {why}")
    pytest.skip(why)


def _import(module: str, install: str):
    try:
        return __import__(module)
    except ImportError:
        _require(f"the {module} tests need it: {install}")


def start_s3(tmp: Path):
    where, handle = s3_server.start()
    return Store("s3", f"s3://{where.bucket}/{where.prefix}", where.options(), where.proxy,
                 f"GET /{where.bucket}", endpoint=where.endpoint), handle


def start_gs(tmp: Path):
    # gcsfs's default class asks the bucket's layout over gRPC first (60 s against an emulator):
    # the plain JSON-API class is what an emulator serves. Read when gcsfs is imported.
    os.environ["GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"] = "false"
    _import("gcsfs", "pip install gcsfs")
    _import("gcp_storage_emulator", "pip install gcp-storage-emulator")
    port = free_port()
    server = Child([sys.executable, "-c", "from gcp_storage_emulator.__main__ import main; main()", "start",
                    "-H", "127.0.0.1", "--port", str(port), "--in-memory", "--default-bucket", BUCKET, "-q"], ready="")
    wait_for(port)
    proxy = FaultProxy(port).start()
    prefix = f"fastprep-test-{uuid.uuid4().hex[:8]}"
    return Store("gs", f"gs://{BUCKET}/{prefix}", {"endpoint_url": proxy.url, "token": "anon", "project": "test"},
                 proxy, "GET /download/storage/v1/b/" + BUCKET, endpoint=proxy.url), (proxy, server)


def az_connection(endpoint: str, key: str = AZ_KEY) -> str:
    return (f"DefaultEndpointsProtocol=http;AccountName={AZ_ACCOUNT};AccountKey={key};"
            f"BlobEndpoint={endpoint}/{AZ_ACCOUNT};")


def start_az(tmp: Path):
    _import("adlfs", "pip install adlfs")
    if not os.access(AZURITE, os.X_OK):
        _require(f"the az:// tests need Azurite at {AZURITE}: bash .ci/stores installs it "
                 f"(or FASTPREP_AZURITE=path/to/azurite-blob)")
    port = free_port()
    server = Child([AZURITE, "--blobHost", "127.0.0.1", "--blobPort", str(port), "--inMemoryPersistence",
                    "--silent", "--skipApiVersionCheck", "--disableTelemetry"], ready="", cwd=tmp)
    wait_for(port, 60)
    proxy = FaultProxy(port).start()
    import fsspec  # noqa: PLC0415

    opts = {"connection_string": az_connection(proxy.url)}
    fsspec.filesystem("az", skip_instance_cache=True, **opts).mkdir(BUCKET)
    prefix = f"fastprep-test-{uuid.uuid4().hex[:8]}"
    wrong = {"connection_string": az_connection(proxy.url, "A" * 20 + AZ_KEY[20:])}
    return Store("az", f"az://{BUCKET}/{prefix}", opts, proxy, f"GET /{AZ_ACCOUNT}/{BUCKET}", wrong=wrong, secret=AZ_KEY,
                 endpoint=proxy.url), (proxy, server)


NGINX_CONF = """daemon off;
worker_processes 1;
{user}
pid {tmp}/nginx.pid;
error_log {tmp}/error.log;
events {{ worker_connections 256; }}
http {{
  access_log off;
  client_body_temp_path {tmp}/body; proxy_temp_path {tmp}/proxy; fastcgi_temp_path {tmp}/fastcgi;
  uwsgi_temp_path {tmp}/uwsgi; scgi_temp_path {tmp}/scgi;
  server {{
    listen 127.0.0.1:{port};
    root {root};
    location / {{
      if ($arg_token != "{token}") {{ return 403; }}
    }}
  }}
}}
"""


def start_http(tmp: Path):
    _import("aiohttp", "pip install 'fastprep[remote]'")
    nginx = shutil.which("nginx") or ("/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK) else None)
    if nginx is None:
        _require("the http:// tests need nginx: apt-get install nginx-light")
    root, token, port = tmp / "www", f"tok{uuid.uuid4().hex}", free_port()
    prefix = f"fastprep-test-{uuid.uuid4().hex[:8]}"
    (root / prefix).mkdir(parents=True)
    conf = tmp / "nginx.conf"
    # as root, nginx's workers run as `nobody`, who cannot read pytest's private tmp folders
    user = "user root;" if os.geteuid() == 0 else ""
    conf.write_text(NGINX_CONF.format(user=user, tmp=tmp, port=port, root=root, token=token))
    server = Child([nginx, "-p", str(tmp), "-c", str(conf), "-e", str(tmp / "error.log")], ready="")
    wait_for(port)
    proxy = FaultProxy(port).start()
    host = urlsplit(proxy.url).netloc
    return Store("http", f"http://{host}/{prefix}", {}, proxy, "GET ", query=f"token={token}",
                 served=root / prefix, wrong={"query": f"token=wrong{token}"}, secret=token, endpoint=proxy.url), (proxy, server)


STARTERS = {"s3": start_s3, "gs": start_gs, "az": start_az, "http": start_http}
# s3 runs in the README's quick test command; the other servers' suites in .ci/slow (their start-up
# and a second pass over the suite per store: minutes on 2 cores).
KINDS = [pytest.param("s3", id="s3")] + [pytest.param(k, id=k, marks=pytest.mark.slow) for k in ("gs", "az", "http")]


@pytest.fixture(scope="session", params=KINDS)
def store(request):
    """A store of each kind (module docstring): a fresh prefix; its proxy's faults and log cleared
    by the tests that use them."""
    tmp = Path(tempfile.mkdtemp(prefix=f"fastprep-{request.param}-"))
    where, handle = STARTERS[request.param](tmp)
    yield where
    s3_server.stop(handle)
    shutil.rmtree(tmp, ignore_errors=True)
