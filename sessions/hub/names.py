"""What the Hub says about a file, checked before anything is written to disk.

The server at ``HF_ENDPOINT`` is a stranger: a mirror a user set, or anything answering
for it. huggingface_hub 2.4.0 joins the file's ``ETag`` to the cache folder as it came,
so ``"/home/me/.bashrc"`` or ``"../../../x"`` named a file anywhere the user can write.
So every name taken from an answer is checked here first: the content hash (the ETag:
a git blob's SHA-1 or an LFS file's SHA-256, lower-case hex), the commit (a SHA-1), the
file's path in the repository, and every redirect (to the Hub's own host or its storage,
never from https down to http).
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

from sessions.hub.errors import HubError
from sessions.text_safety import inert

_SHA1 = re.compile(r"[0-9a-f]{40}")
_SHA256 = re.compile(r"[0-9a-f]{64}")
HUB_STORAGE = ("hf.co", "huggingface.co")
"""The Hub's own domains: its files are served from their subdomains (``cdn-lfs.hf.co``,
``cas-bridge.xethub.hf.co``), whatever mirror handed out the redirect."""
SHOWN = 200
"""Characters of a refused value quoted in the message."""


def shown(value: object) -> str:
    """A value from the server, quoted for a message: inert and cut short."""
    text = inert(str(value))
    return repr(text if len(text) <= SHOWN else text[:SHOWN] + "…")


def is_sha256(etag: str) -> bool:
    """An LFS file's ETag: the SHA-256 of its bytes (a git blob's is its SHA-1)."""
    return _SHA256.fullmatch(etag) is not None


def check_etag(etag: str | None, file: str, where: str) -> str:
    """``etag`` when it is a content hash, the only thing a blob may be named after."""
    if etag is None or not (_SHA1.fullmatch(etag) or _SHA256.fullmatch(etag)):
        raise HubError(f"{where} named the content of {file} {shown(etag)}, which is not a content hash: "
                       "refused before anything was written")
    return etag


def check_commit(commit: str | None, repo: str, where: str) -> str:
    """``commit`` when it is a commit hash (the snapshot's folder is named after it)."""
    if commit is None or not _SHA1.fullmatch(commit):
        raise HubError(f"{where} named the revision of {repo} {shown(commit)}, which is not a commit hash: "
                       "refused before anything was written")
    return commit


def safe_file_name(name: str) -> bool:
    """A relative path of plain names: no ``..``, no ``.``, no empty part, no backslash,
    no control character; the snapshot's file is made at it."""
    parts = name.split("/")
    return (bool(name) and len(name) <= 1024 and "\\" not in name and not any(ord(char) < 32 for char in name)
            and all(part not in ("", ".", "..") for part in parts))


def check_file_name(name: str, repo: str) -> str:
    if not safe_file_name(name):
        raise HubError(f"{repo} lists a file named {shown(name)}, which is not a safe file name: refused")
    return name


def _origin_base(host: str) -> str:
    """The domain whose subdomains count as the endpoint's own: the host itself when it
    is an address or a domain of two labels, else the host less its first label
    (``hf.example.com`` serves from ``*.example.com``)."""
    try:
        ipaddress.ip_address(host)
        return host
    except ValueError:
        labels = host.split(".")
        return host if len(labels) <= 2 else ".".join(labels[1:])


def _within(host: str, domain: str) -> bool:
    return host == domain or host.endswith("." + domain)


def redirect_allowed(start: str, target: str) -> bool:
    """Whether a download that began at ``start`` (the endpoint's URL) may follow a
    redirect to ``target``: the same host, a subdomain of the endpoint's domain, or the
    Hub's own storage; https only once the endpoint is https."""
    begun, going = urlsplit(start), urlsplit(target)
    host, home = (going.hostname or "").lower(), (begun.hostname or "").lower()
    if going.scheme not in ("http", "https") or not host:
        return False
    if begun.scheme == "https" and going.scheme != "https":
        return False
    if host == home:
        return True
    if going.scheme != "https":
        return False
    return any(_within(host, domain) for domain in (*HUB_STORAGE, _origin_base(home)))


def check_redirect(start: str, target: str, file: str, where: str) -> str:
    if not redirect_allowed(start, target):
        host = urlsplit(target).hostname or target
        raise HubError(f"{where} sent the download of {file} on to {shown(host)}, which is neither it nor "
                       "the Hub's storage: refused before anything was written")
    return target
