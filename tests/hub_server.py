"""A stand-in for the Hugging Face Hub on a loopback port, for the tests of ``-hf``.

It speaks the part of the Hub's HTTP API that huggingface_hub uses to fetch and search
models: the model's files (``/api/models/USER/REPO``), the model search
(``/api/models?search=...``), and ``/USER/REPO/resolve/REV/FILE`` with ``HEAD`` (the
``ETag``, ``X-Repo-Commit`` and size huggingface_hub reads before a download) and ``GET``
with ``Range``. A missing repository answers 404 with ``X-Error-Code: RepoNotFound``, as
the Hub does. Every request is recorded, headers included, so tests can check what was
asked; ``drop_after`` cuts a file's next ``GET`` after that many bytes of its body, and
``hold_at`` pauses it there until the test lets it go on.

It can lie as a hostile mirror would (``FakeHub.lie``): an ETag or a commit that names a
path, a size that is not the body's, a redirect anywhere or round in a loop, a body cut
at the same byte on every try, other bytes than the ones hashed, or a trickle.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    query: str = ""
    status: int = 0
    body_bytes: int = 0

    def header(self, name: str) -> str | None:
        """A header as sent, whatever its case (huggingface_hub sends ``authorization``)."""
        return next((value for key, value in self.headers.items() if key.lower() == name.lower()), None)


@dataclass
class Lie:
    """How a hostile Hub answers for one file; None leaves that part honest."""

    etag: str | None = None
    """The ``ETag`` of the file's answers (an absolute path, ``../``, a device...)."""
    commit: str | None = None
    size: int | None = None
    """The size announced by ``HEAD`` (``X-Linked-Size``), whatever the body is."""
    body: bytes | None = None
    """Sent by ``GET`` instead of the file (the ETag stays the real file's hash)."""
    redirect: str | None = None
    """``Location`` of a 302 answered to ``GET`` (and to ``HEAD`` when ``head_too``)."""
    head_too: bool = False
    cut_at: int | None = None
    """The body always ends at this byte of the file, on every try, with the connection cut."""
    trickle: float | None = None
    """Seconds between two bytes of the body."""
    hang_at: int | None = None
    """The body stops at this byte of the file, on every try, and the connection stays open."""


@dataclass
class FakeHub:
    """The repositories served (repo -> file name -> bytes) and what was asked."""

    url: str = ""
    repos: dict[str, dict[str, bytes]] = field(default_factory=dict)
    downloads: dict[str, int] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)
    drop_after: dict[str, int] = field(default_factory=dict)
    """File name -> bytes of body sent before the connection is cut (once)."""
    hold_at: dict[str, tuple[int, threading.Event]] = field(default_factory=dict)
    """File name -> (bytes, event): the body pauses after that many bytes until the event is set
    (or the test ends: however slow the machine, a hold never lets go by itself mid-test)."""
    lies: dict[str, Lie] = field(default_factory=dict)
    """File name -> how the Hub lies about it, on every request."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    closing: threading.Event = field(default_factory=threading.Event)
    """Set when the test ends: a hanging answer lets go then."""

    def lie(self, name: str, **how: object) -> None:
        """Lie about file ``name`` from now on (the fields of ``Lie``)."""
        self.lies[name] = Lie(**how)  # type: ignore[arg-type]

    def add(self, repo: str, files: dict[str, bytes | Path], downloads: int = 0) -> None:
        self.repos[repo] = {name: data.read_bytes() if isinstance(data, Path) else data
                            for name, data in files.items()}
        self.downloads[repo] = downloads

    def gets(self, name: str) -> list[Request]:
        """The GET requests of file ``name`` (the downloads, not the checks)."""
        return [r for r in self.requests if r.method == "GET" and r.path.endswith("/" + name)]


class _Handler(BaseHTTPRequestHandler):
    hub: FakeHub
    protocol_version = "HTTP/1.1"

    def log_message(self, *_args) -> None:  # quiet: the tests read ``hub.requests``
        pass

    def _record(self) -> Request:
        url = urlsplit(self.path)
        request = Request(self.command, unquote(url.path), dict(self.headers.items()), url.query)
        with self.hub.lock:
            self.hub.requests.append(request)
        return request

    def _send(self, request: Request, status: int, body: bytes = b"", headers: dict | None = None,
              *, head: bool = False, declared: int | None = None) -> None:
        request.status = status
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, str(value))
        self.send_header("Content-Length", str(len(body) if declared is None else declared))
        self.end_headers()
        if not head:
            self.wfile.write(body)
            request.body_bytes = len(body)

    def _not_found(self, request: Request, code: str, head: bool = False) -> None:
        self._send(request, 404, b'{"error":"not found"}',
                   {"X-Error-Code": code, "X-Error-Message": "Repository not found",
                    "Content-Type": "application/json"}, head=head)

    def do_HEAD(self) -> None:
        self._resolve(head=True)

    def do_GET(self) -> None:
        path = unquote(urlsplit(self.path).path)
        if path == "/api/models":
            self._search()
        elif path.startswith("/api/models/"):
            self._info(path)
        else:
            self._resolve(head=False)

    def _search(self) -> None:
        request = self._record()
        query = parse_qs(urlsplit(self.path).query)
        words = (query.get("search") or [""])[0].lower()
        found = [{"id": repo, "downloads": self.hub.downloads.get(repo, 0), "likes": 0, "tags": ["gguf"]}
                 for repo, files in self.hub.repos.items()
                 if words in repo.lower() and any(name.endswith(".gguf") for name in files)]
        found.sort(key=lambda entry: -entry["downloads"])
        limit = int((query.get("limit") or ["1000"])[0])
        self._send(request, 200, json.dumps(found[:limit]).encode(), {"Content-Type": "application/json"})

    def _info(self, path: str) -> None:
        request = self._record()
        repo = path.removeprefix("/api/models/")
        if repo not in self.hub.repos:
            self._not_found(request, "RepoNotFound")
            return
        info = {"id": repo, "sha": COMMIT, "tags": ["gguf"],
                "siblings": [{"rfilename": name} for name in self.hub.repos[repo]]}
        self._send(request, 200, json.dumps(info).encode(), {"Content-Type": "application/json"})

    def _resolve(self, *, head: bool) -> None:
        request = self._record()
        parts = request.path.lstrip("/").split("/")
        repo, name = "/".join(parts[:2]), "/".join(parts[4:])
        if repo not in self.hub.repos or parts[2:3] != ["resolve"]:
            self._not_found(request, "RepoNotFound", head)
            return
        data = self.hub.repos[repo].get(name)
        if data is None:
            self._not_found(request, "EntryNotFound", head)
            return
        lie = self.hub.lies.get(name, Lie())
        if lie.redirect is not None and (lie.head_too or not head):
            self._send(request, 302, b"", {"Location": lie.redirect}, head=head)
            return
        headers = {"ETag": f'"{hashlib.sha256(data).hexdigest() if lie.etag is None else lie.etag}"',
                   "X-Repo-Commit": COMMIT if lie.commit is None else lie.commit,
                   "Accept-Ranges": "bytes", "Content-Type": "application/octet-stream"}
        if lie.size is not None:
            headers["X-Linked-Size"] = str(lie.size)
        if lie.body is not None:
            data = lie.body
        start = 0
        wanted = request.header("Range") or ""
        if wanted.startswith("bytes=") and not head:
            start = int(wanted.removeprefix("bytes=").split("-")[0])
            headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
        if start >= len(data) > 0:
            self._send(request, 416, b"", {"Content-Range": f"bytes */{len(data)}"})
            return
        body = data[start:]
        status = 206 if start else 200
        if lie.cut_at is not None and not head:
            self._send(request, status, body[: max(lie.cut_at - start, 0)], headers, declared=len(body))
            self.close_connection = True
            self.wfile.flush()
            self.connection.shutdown(2)
            return
        if lie.hang_at is not None and not head:
            self._send(request, status, body[: max(lie.hang_at - start, 0)], headers, declared=len(body))
            self.wfile.flush()
            self.hub.closing.wait(60)
            return
        if lie.trickle is not None and not head:
            self._send(request, status, b"", headers, declared=len(body))
            for index in range(len(body)):
                self.wfile.write(body[index:index + 1])
                self.wfile.flush()
                request.body_bytes = index + 1
                time.sleep(lie.trickle)  # the trickle itself: the server's pace, not a wait in a test
            return
        with self.hub.lock:
            cut = None if head else self.hub.drop_after.pop(name, None)
            hold = None if head else self.hub.hold_at.pop(name, None)
        if hold is not None:
            request.status = status
            self._send(request, status, body[:hold[0]], headers, declared=len(body))
            self.wfile.flush()
            while not hold[1].wait(1.0) and not self.hub.closing.is_set():
                pass  # the hold's own pace: the server looks at the test's end once a second
            self.wfile.write(body[hold[0]:])
            request.body_bytes = len(body)
            return
        if cut is None:
            self._send(request, status, body, headers, head=head,
                       declared=lie.size if head and lie.size is not None else None)
            return
        self._send(request, status, body[:cut], headers, declared=len(body))
        self.close_connection = True
        self.wfile.flush()
        self.connection.shutdown(2)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        """A client that left mid-answer (a stopped download) is no failure of the server."""


@pytest.fixture
def fake_hub(monkeypatch, tmp_path):
    """A running ``FakeHub``, with ``HF_ENDPOINT`` pointing at it and ``HF_HOME`` private."""
    hub = FakeHub()
    handler = type("Handler", (_Handler,), {"hub": hub})
    server = _Server(("127.0.0.1", 0), handler)
    hub.url = f"http://127.0.0.1:{server.server_address[1]}"
    # ``shutdown`` waits for the serving loop's next look at its flag: 0.5 s by default.
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, name="fake-hub",
                              daemon=True)
    thread.start()
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    try:
        yield hub
    finally:
        hub.closing.set()
        server.shutdown()
        server.server_close()
