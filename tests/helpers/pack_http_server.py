"""A tiny HTTP server on 127.0.0.1 serving a folder for the remote tests: HEAD and GET with byte
ranges (what fsspec's HTTP client sends), and the misbehaviours the tests need: a token required in
the query string or in basic auth (else 403), a fixed status for every request (an S3-style 403
body, a 500), and trickling (a few bytes, then a pause: never quiet long enough for a per-request
timeout, bounded by `trickle_for` seconds so it stops by itself).
"""

from __future__ import annotations

import base64
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

S3_DENIED = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code>'
             b"<Message>Access Denied</Message><RequestId>1</RequestId></Error>")


class PackServer:
    """Serves `folder` at http://127.0.0.1:<port>/ until stop() (`port`: a free one, or a stopped
    server's to take its place); `log` lists (method, path) seen."""

    def __init__(self, folder: str, *, token: str | None = None, auth: tuple[str, str] | None = None,
                 status: int | None = None, body: bytes = b"", trickle: str | None = None,
                 trickle_for: float = 20.0, port: int = 0):
        self.folder, self.token, self.auth, self.status, self.body = folder, token, auth, status, body
        self.trickle, self.trickle_for = trickle, trickle_for  # files whose GET trickles
        self.log: list[tuple[str, str]] = []
        self.stopping = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_HEAD(self):
                server.answer(self, head=True)

            def do_GET(self):
                server.answer(self, head=False)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)  # port: another's, to restart it
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> PackServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def _allowed(self, handler: BaseHTTPRequestHandler, query: dict) -> bool:
        if self.token is not None and query.get("token") != [self.token]:
            return False
        if self.auth is not None:
            want = "Basic " + base64.b64encode(f"{self.auth[0]}:{self.auth[1]}".encode()).decode()
            return handler.headers.get("Authorization") == want
        return True

    def answer(self, h: BaseHTTPRequestHandler, head: bool) -> None:
        parts = urlsplit(h.path)
        self.log.append((h.command, h.path))
        if self.status is not None or not self._allowed(h, parse_qs(parts.query)):
            body = self.body if self.status is not None else S3_DENIED
            h.send_response(self.status or 403)
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            if not head:
                h.wfile.write(body)
            return
        path = os.path.join(self.folder, parts.path.lstrip("/"))
        if not os.path.isfile(path):
            h.send_response(404)
            h.send_header("Content-Length", "0")
            h.end_headers()
            return
        with open(path, "rb") as f:
            data = f.read()
        start, end = 0, len(data)
        ranged = h.headers.get("Range", "")
        if ranged.startswith("bytes="):
            a, _, b = ranged[6:].partition("-")
            start, end = int(a or 0), min(int(b) + 1 if b else len(data), len(data))
        h.send_response(206 if ranged else 200)
        h.send_header("Content-Length", str(end - start))
        h.send_header("Accept-Ranges", "bytes")
        if ranged:
            h.send_header("Content-Range", f"bytes {start}-{end - 1}/{len(data)}")
        h.end_headers()
        if head:
            return
        if self.trickle is None or not parts.path.endswith(self.trickle):
            h.wfile.write(data[start:end])
            return
        stop_at = time.monotonic() + self.trickle_for  # bounded: the server stops by itself
        for i in range(start, end, 16):
            if self.stopping.is_set() or time.monotonic() > stop_at:
                return
            try:
                h.wfile.write(data[i:min(i + 16, end)])
                h.wfile.flush()
            except OSError:  # the client gave up
                return
            time.sleep(0.05)
