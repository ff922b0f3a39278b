"""A small HTTP proxy on 127.0.0.1 in front of an S3-API server, for the remote tests: it counts
the requests, adds latency and a bandwidth limit (one link's: shared by every connection, as a
capped proxy or a NIC shares it), and injects faults into the next N requests that
match: a 503 SlowDown, a stall past the client's timeout, a connection dropped mid-body, a body cut
short (a complete response of fewer bytes than asked), a body with one byte changed. Standard library only; loopback only.
"""

from __future__ import annotations

import http.client
import http.server
import threading
import time
from dataclasses import dataclass, field
from urllib.parse import unquote

SLOWDOWN = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
            b"<Message>Please reduce your request rate.</Message></Error>")
FAULTS = ("503", "stall", "drop", "short", "flip")
CHUNK = 64 << 10  # bytes of a body sent per turn on the link: connections' bodies interleave


class Link:
    """The proxy's one link: each chunk of any connection's body takes its turn, ``n / bandwidth``
    seconds after the chunks reserved before it, so all connections together get `bandwidth`."""

    def __init__(self):
        self._lock = threading.Lock()
        self._free_at = 0.0

    def send(self, h: http.server.BaseHTTPRequestHandler, data: bytes, bandwidth: float | None) -> None:
        for at in range(0, len(data), CHUNK) if bandwidth else ():
            part = data[at:at + CHUNK]
            with self._lock:
                now = time.monotonic()
                self._free_at = max(now, self._free_at) + len(part) / bandwidth
                done = self._free_at
            time.sleep(max(0.0, done - time.monotonic()))
            h.wfile.write(part)
        if not bandwidth:
            h.wfile.write(data)


class _Server(http.server.ThreadingHTTPServer):
    # socketserver's listen backlog of 5 drops the SYNs of a client opening dozens of connections at
    # once (a chunk's range reads), each then waiting out TCP's 1 s retransmission: no store does that
    request_queue_size = 1024


@dataclass
class Fault:
    kind: str
    count: int
    match: str = ""  # a substring of "METHOD /path" the request must contain


@dataclass
class FaultProxy:
    """Start with :meth:`start`; ``url`` is its endpoint; ``log`` holds "METHOD /path range" per request."""

    upstream_port: int
    latency: float = 0.0  # seconds added to every request
    bandwidth: float | None = None  # bytes/s of response bodies, all connections together (Link)
    stall: float = 2.0  # seconds a "stall" fault waits before answering
    log: list[str] = field(default_factory=list)
    times: list[float] = field(default_factory=list)  # time.monotonic() each request of `log` arrived
    faults: list[Fault] = field(default_factory=list)

    def start(self) -> FaultProxy:
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body are two writes: no delayed-ACK stall between them

            def log_message(self, *args):  # quiet
                pass

            def _any(self):
                try:
                    proxy._serve(self)
                except (BrokenPipeError, ConnectionResetError):  # the client hung up (a timeout, a cut): its business
                    self.close_connection = True

            do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _any

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._lock = threading.Lock()
        self.link = Link()
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def inject(self, kind: str, count: int = 1, match: str = "") -> None:
        assert kind in FAULTS, kind
        with self._lock:
            self.faults.append(Fault(kind, count, match))

    def clear(self) -> None:
        with self._lock:
            self.faults.clear()
            self.log.clear()
            self.times.clear()

    def requests(self, match: str = "") -> int:
        with self._lock:
            return sum(match in line for line in self.log)

    def _take_fault(self, line: str) -> str | None:
        with self._lock:
            self.log.append(line)
            self.times.append(time.monotonic())
            for f in self.faults:
                if f.count > 0 and f.match in line:
                    f.count -= 1
                    return f.kind
        return None

    def _serve(self, h: http.server.BaseHTTPRequestHandler) -> None:
        # the path unquoted: gs:// names an object "prefix%2Fshard-00000.fpk"
        ranged = h.headers.get("Range") or h.headers.get("x-ms-range", "")  # az:// sends its own header
        line = f"{h.command} {unquote(h.path.split('?', 1)[0])} {ranged}"
        fault = self._take_fault(line)
        body = _request_body(h)
        if self.latency:
            time.sleep(self.latency)
        if fault == "503":
            return _reply(h, 503, {"Content-Type": "application/xml"}, SLOWDOWN)
        if fault == "stall":
            time.sleep(self.stall)
        conn = http.client.HTTPConnection("127.0.0.1", self.upstream_port, timeout=30)
        headers = {k: v for k, v in h.headers.items() if k.lower() not in ("transfer-encoding", "connection")}
        if body is not None:
            headers["Content-Length"] = str(len(body))
        conn.request(h.command, h.path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        conn.close()
        dropped = ("transfer-encoding", "connection") + (() if h.command == "HEAD" else ("content-length",))
        out = {k: v for k, v in resp.getheaders() if k.lower() not in dropped}
        if fault == "drop" and h.command == "GET" and len(data) > 1:
            h.send_response(resp.status)
            for k, v in out.items():
                h.send_header(k, v)
            h.send_header("Content-Length", str(len(data)))
            h.end_headers()
            self.link.send(h, data[:len(data) // 2], self.bandwidth)
            h.wfile.flush()
            h.close_connection = True
            h.connection.shutdown(2)  # the connection dies mid-body
            return None
        if fault == "short" and h.command == "GET" and len(data) > 1:
            data = data[:len(data) // 2]  # a complete response, of half the bytes asked
        if fault == "flip" and h.command == "GET" and data:
            data = data[:len(data) // 2] + bytes([data[len(data) // 2] ^ 0x55]) + data[len(data) // 2 + 1:]
        return _reply(h, resp.status, out, data, self)


def _request_body(h: http.server.BaseHTTPRequestHandler) -> bytes | None:
    if h.headers.get("Transfer-Encoding", "").lower() == "chunked":
        chunks = []
        while True:
            size = int(h.rfile.readline().split(b";")[0].strip(), 16)
            if size == 0:
                while h.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return b"".join(chunks)
            chunks.append(h.rfile.read(size))
            h.rfile.readline()
    n = int(h.headers.get("Content-Length") or 0)
    return h.rfile.read(n) if n or h.command in ("PUT", "POST") else None


def _reply(h: http.server.BaseHTTPRequestHandler, status: int, headers: dict, data: bytes,
           proxy: FaultProxy | None = None) -> None:
    h.send_response(status)
    for k, v in headers.items():
        h.send_header(k, v)
    if h.command != "HEAD":
        h.send_header("Content-Length", str(len(data)))
    h.end_headers()
    if h.command != "HEAD":
        proxy.link.send(h, data, proxy.bandwidth) if proxy is not None else h.wfile.write(data)


if __name__ == "__main__":  # a proxy process (benchmarks): fault_proxy.py UPSTREAM_PORT LATENCY_S [BYTES_PER_S]
    import sys  # prints its port

    p = FaultProxy(int(sys.argv[1]), latency=float(sys.argv[2]),
                   bandwidth=float(sys.argv[3]) if len(sys.argv) > 3 else None).start()
    print(p.port, flush=True)
    threading.Event().wait()
