"""One file's bytes fetched from the Hub into its partial file, checked as they come.

The request goes through huggingface_hub's session (its headers, token and proxy
settings), but the loop is llamachat's own, so that each thing a server can get wrong
is noticed where it happens and told in words:

- every redirect is checked before it is followed (``sessions.hub.names``), and a loop
  of them ends;
- progress is reported as bytes arrive, not once per 10 MB;
- a server that sends nothing is timed out per read, one that trickles (less than
  ``STALL_BYTES`` in ``STALL_SECONDS``) is given up on;
- a body cut short is resumed from the bytes written (a ``Range`` request) while tries
  bring new bytes, and given up on after ``TRIES`` that bring none; a body longer than
  announced is refused at the first byte too many;
- the bytes are hashed as they are written and must match the content hash the Hub
  gave (the ETag: SHA-256 for LFS files, git's blob SHA-1 for the others), else the
  partial file is deleted.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import urljoin, urlsplit

from sessions.hub.cache_layout import open_partial
from sessions.hub.errors import HubError
from sessions.hub.names import check_redirect, is_sha256
from sessions.units import human_size

STALL_SECONDS = 30.0
STALL_BYTES = 32 * 1024
"""Less than this many bytes in ``STALL_SECONDS`` and the download is given up on."""
TRIES = 6
"""Tries in a row that bring no new byte before a broken download is given up on."""
RETRY_WAIT = 1.0
"""Seconds between two tries."""
MAX_REDIRECTS = 10
REPORT_EVERY = 0.1
"""Seconds between two progress reports."""
CONNECT_TIMEOUT = 10.0
HASH_BLOCK = 1 << 20

Report = Callable[[int, bool], None]
"""Called with the bytes in the partial file and whether the file is complete."""


def read_timeout() -> float:
    """Seconds one read waits for a byte: ``HF_HUB_DOWNLOAD_TIMEOUT`` (as huggingface_hub), else 10."""
    try:
        return max(float(os.environ.get("HF_HUB_DOWNLOAD_TIMEOUT", "")), 0.1)
    except ValueError:
        return 10.0


class _Restart(HubError):
    """The server answered a resumed request with the whole file, or refused the range."""


@dataclass
class Transfer:
    """Fetch ``url`` (where the Hub's answer sent the file) into ``partial``."""

    hub: Any
    url: str
    origin: str
    """The endpoint's URL of the file: redirects are judged against it, and the token
    goes only to its host."""
    file: str
    where: str
    size: int | None
    etag: str
    headers: dict[str, str]
    partial: Path
    report: Report
    done: int = 0
    _digest: Any = field(default=None, repr=False)
    _window: tuple[float, int] = (0.0, 0)

    def run(self) -> None:
        """Fill the partial file to its full size and check it; ``HubError`` or the
        transport's error when it cannot be, the partial file kept unless its bytes are wrong."""
        with os.fdopen(open_partial(self.partial), "r+b") as out:
            self._resume(out)
            self._window = (time.monotonic(), 0)  # spans the tries: a server that sends a byte per try stalls too
            best, fruitless = self.done, 0
            while not self._complete():
                last: BaseException | None = None
                try:
                    self._get(out)
                except _Restart:
                    self._start_over(out)
                except Exception as error:  # the transport's (httpx2) errors: resumed below
                    if not _transport(error):
                        raise
                    last = error
                else:
                    if self.size is None:
                        break  # no size announced: the body's clean end is the file's end
                    if not self._complete():
                        self._discard()
                        raise HubError(f"{self.where} sent {human_size(self.done)} for {self.file} where it "
                                       f"announced {human_size(self.size)}: the download was deleted; "
                                       "try again later")
                    break
                if self.done > best:
                    best, fruitless = self.done, 0
                else:
                    fruitless += 1
                if fruitless >= TRIES:
                    raise self._broken(last, fruitless)
                time.sleep(RETRY_WAIT)
            out.flush()
            os.fsync(out.fileno())
        self._check_hash()
        self.report(self.done, True)

    def _complete(self) -> bool:
        return self.size is not None and self.done == self.size

    def _resume(self, out: BinaryIO) -> None:
        """Hash what an earlier try left, to go on from it."""
        self._digest = hashlib.sha256() if is_sha256(self.etag) else None
        if self.size is not None and os.fstat(out.fileno()).st_size > self.size:
            out.truncate(0)
        while block := out.read(HASH_BLOCK):
            if self._digest is not None:
                self._digest.update(block)
        self.done = out.tell()
        self.report(self.done, False)

    def _start_over(self, out: BinaryIO) -> None:
        out.seek(0)
        out.truncate(0)
        self.done = 0
        self._digest = hashlib.sha256() if is_sha256(self.etag) else None

    def _get(self, out: BinaryIO) -> None:
        url = self.url
        for _hop in range(MAX_REDIRECTS + 1):
            headers = {key: value for key, value in self.headers.items()
                       if key.lower() != "authorization" or _same_origin(url, self.origin)}
            headers["Accept-Encoding"] = "identity"
            if self.done:
                headers["Range"] = f"bytes={self.done}-"
            with self.hub.get_session().stream("GET", url, headers=headers, timeout=_timeout(),
                                               follow_redirects=False) as response:
                if response.has_redirect_location:
                    url = check_redirect(self.origin, urljoin(url, response.headers["Location"]), self.file,
                                         self.where)
                    continue
                if response.status_code == 416 and self.done:
                    raise _Restart()
                if response.status_code >= 400:
                    response.read()
                    self.hub.utils.hf_raise_for_status(response)
                if self.done and response.status_code != 206:
                    raise _Restart()  # the Range was ignored: the whole file comes again
                if self.done and not _range_starts_at(response.headers.get("Content-Range"), self.done):
                    raise _Restart()
                self._take(response, out)
                return
        raise HubError(f"{self.where} sent the download of {self.file} round a loop of redirects: "
                       "refused; check HF_ENDPOINT or try again later")

    def _take(self, response: Any, out: BinaryIO) -> None:
        reported = 0.0
        for chunk in response.iter_bytes():
            if not chunk:
                continue
            if self.size is not None and self.done + len(chunk) > self.size:
                self._discard()
                raise HubError(f"{self.where} sent more than the {human_size(self.size)} it announced for "
                               f"{self.file}: the download was deleted; try again later")
            out.write(chunk)
            if self._digest is not None:
                self._digest.update(chunk)
            self.done += len(chunk)
            now = time.monotonic()
            self._check_stall(now, len(chunk))
            if now - reported >= REPORT_EVERY:
                reported = now
                self.report(self.done, False)

    def _check_stall(self, now: float, arrived: int) -> None:
        began, got = self._window
        got += arrived
        if now - began < STALL_SECONDS:
            self._window = (began, got)
            return
        if got < STALL_BYTES:
            raise HubError(f"the download of {self.file} from {self.where} stalled: {human_size(got)} came in "
                           f"{now - began:.0f} s; try again later (the {human_size(self.done)} fetched are kept "
                           "and the next try goes on from them)")
        self._window = (now, 0)

    def _broken(self, last: BaseException | None, tries: int) -> BaseException:
        total = f" of {human_size(self.size)}" if self.size is not None else ""
        kept = (f"; the {human_size(self.done)} fetched are kept and the next try goes on from them"
                if self.done else "")
        if last is not None and type(last).__name__ in ("ConnectError", "ConnectTimeout"):
            return last  # the Hub out of reach: told as such
        if last is not None and "Timeout" in type(last).__name__:
            return HubError(f"{self.where} sent nothing for {read_timeout():g} s, {tries} times in a row, "
                            f"during the download of {self.file} (at {human_size(self.done)}{total}): "
                            f"try again later{kept}")
        return HubError(f"the download of {self.file} from {self.where} broke off {tries} times in a row at "
                        f"{human_size(self.done)}{total}: try again later{kept}")

    def _check_hash(self) -> None:
        if self._digest is not None:
            found = self._digest.hexdigest()
        else:
            found = _git_blob_sha1(self.partial)
        if found != self.etag:
            self._discard()
            raise HubError(f"the {human_size(self.done)} {self.where} sent for {self.file} do not match the "
                           "content hash it gave: the download was deleted; try again later")

    def _discard(self) -> None:
        self.partial.unlink(missing_ok=True)


def _timeout() -> Any:
    # huggingface_hub's HTTP client is its own fork of httpx, imported with it (deferred:
    # only a download needs it).
    import httpx2

    read = read_timeout()
    return httpx2.Timeout(CONNECT_TIMEOUT, read=read, write=read, pool=CONNECT_TIMEOUT)


def _git_blob_sha1(path: Path) -> str:
    """Git's name for a file's content: the SHA-1 of ``blob <size>\\0`` and the bytes."""
    digest = hashlib.sha1(usedforsecurity=False)
    digest.update(b"blob %d\0" % path.stat().st_size)
    with open(path, "rb") as data:
        while block := data.read(HASH_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def _same_origin(url: str, other: str) -> bool:
    one, two = urlsplit(url), urlsplit(other)
    return (one.scheme, one.hostname, one.port) == (two.scheme, two.hostname, two.port)


def _range_starts_at(content_range: str | None, start: int) -> bool:
    """``Content-Range: bytes START-END/TOTAL`` begins where the partial file ends."""
    if not content_range or not content_range.startswith("bytes "):
        return False
    first = content_range.removeprefix("bytes ").split("-", 1)[0]
    return first.isdigit() and int(first) == start


def _transport(error: BaseException) -> bool:
    """An error of the connection (cut, timed out, refused), worth another try."""
    module = type(error).__module__
    return module.startswith(("httpx", "httpcore")) and not type(error).__name__ == "TooManyRedirects" \
        or isinstance(error, ConnectionError | TimeoutError)
