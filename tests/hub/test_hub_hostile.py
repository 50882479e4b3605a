"""A Hub that lies: every trick fails in one sentence, and nothing is made outside the cache.

The server at ``HF_ENDPOINT`` may be anything (a mirror a user set, or whatever answers
for it). The stand-in Hub lies as such a server would (``FakeHub.lie``). Each test lists
the whole temporary tree (the home folder, the Hugging Face cache, llamachat's folders)
before and after, and looks at the named targets outside it: whatever the trick, the only
changes are inside the cache, and no link in the cache leads out of it.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

import pytest

from sessions.hub import HubError, fetch_model, recent_downloads, transfer
from sessions.synth import make_model
from tests.cli_support import assert_one_line_error, run

REPO = "org/tiny-GGUF"
NAME = "tiny-Q4_K_M.gguf"


@pytest.fixture
def tiny():
    return make_model("llama", "tiny")


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A home folder with a file of the user's in it."""
    folder = tmp_path / "home"
    folder.mkdir()
    (folder / ".bashrc").write_text("# the user's own\n")
    monkeypatch.setenv("HOME", str(folder))
    return folder


@pytest.fixture
def served(fake_hub, tiny, home, monkeypatch):
    monkeypatch.setattr(transfer, "RETRY_WAIT", 0.0)  # the tries of a broken body follow each other at once
    fake_hub.add(REPO, {NAME: tiny, "tiny-Q8_0.gguf": b"GGUF not this one"})
    return fake_hub


@pytest.fixture
def outside(tmp_path):
    """A path outside the temporary tree, where a lying Hub would like a file made."""
    target = tmp_path.parent / f"escaped-{tmp_path.name}"
    yield target
    assert not os.path.lexists(target), "a file was made outside the test's tree"


def cache(tmp_path: Path) -> Path:
    return tmp_path / "hf-home" / "hub"


def listing(root: Path) -> dict[str, str]:
    """Every entry under ``root`` (links not followed): its kind, size and date, or its target."""
    found = {}
    for folder, folders, files in os.walk(root):
        for name in folders + files:
            path = Path(folder) / name
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                kind = "link to " + os.readlink(path)
            elif stat.S_ISDIR(info.st_mode):
                kind = "folder"
            else:
                kind = f"{stat.filemode(info.st_mode)} {info.st_size} {info.st_mtime_ns}"
            found[str(path.relative_to(root))] = kind
    return found


def changes_outside_the_cache(before: dict[str, str], after: dict[str, str], tmp_path: Path) -> list[str]:
    """What changed in the tree outside the cache, and every link in the cache that leads out."""
    changed = {name for name in before.keys() | after.keys() if before.get(name) != after.get(name)}
    the_cache = ("hf-home", "hf-home/hub")  # made as huggingface_hub makes them
    wrong = sorted(name for name in changed if not name.startswith("hf-home/hub/") and name not in the_cache)
    root = os.path.realpath(cache(tmp_path))
    for name in sorted(changed & after.keys()):
        if after[name].startswith("link to ") and name.startswith("hf-home/hub/"):
            real = os.path.realpath(tmp_path / name)
            if not real.startswith(root + os.sep):
                wrong.append(f"{name} leads to {real}")
    return wrong


def refused(tmp_path: Path, words: str) -> str:
    """Fetch the model, which must fail with one sentence holding ``words``; nothing
    outside the cache may change, and nothing is remembered as downloaded."""
    before = listing(tmp_path)
    with pytest.raises(HubError) as error:
        fetch_model(REPO)
    message = str(error.value)
    assert words in message and "\n" not in message and "Traceback" not in message, message
    assert changes_outside_the_cache(before, listing(tmp_path), tmp_path) == []
    assert recent_downloads() == []
    return message


def relative_to_blobs(tmp_path: Path, target: Path) -> str:
    blobs = cache(tmp_path) / "models--org--tiny-GGUF" / "blobs"
    return os.path.relpath(target, blobs)


def test_an_absolute_etag_writes_nothing_there(served, tmp_path, outside):
    served.lie(NAME, etag=str(outside))
    message = refused(tmp_path, "which is not a content hash: refused before anything was written")
    assert message.startswith(f"{served.url} named the content of {NAME} '{outside}'")


def test_a_dot_dot_etag_writes_nothing_there(served, tmp_path, outside):
    served.lie(NAME, etag=relative_to_blobs(tmp_path, outside))
    refused(tmp_path, "which is not a content hash")


def test_an_etag_naming_an_existing_file_leaves_it_and_links_nothing_to_it(served, tmp_path, home):
    served.lie(NAME, etag=relative_to_blobs(tmp_path, home / ".bashrc"))
    refused(tmp_path, "which is not a content hash")
    served.lie(NAME, etag=str(home / ".bashrc"))
    refused(tmp_path, "which is not a content hash")
    assert (home / ".bashrc").read_text() == "# the user's own\n"


def test_an_etag_naming_a_device_is_refused(served, tmp_path):
    served.lie(NAME, etag="/dev/zero")
    refused(tmp_path, "'/dev/zero', which is not a content hash")


@pytest.mark.parametrize("commit", ["../../../../escaped", "/tmp/escaped", "0123456789ABCDEF" * 2 + "01234567", ""])
def test_a_commit_that_is_not_a_hash_is_refused(served, tmp_path, commit):
    served.lie(NAME, commit=commit)
    refused(tmp_path, "which is not a commit hash: refused before anything was written")


@pytest.mark.parametrize("folder", ["models--org--tiny-GGUF", "models--org--tiny-GGUF/blobs",
                                    "models--org--tiny-GGUF/snapshots", ".locks"])
def test_a_cache_folder_linked_outside_the_cache_is_refused(served, tmp_path, folder):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    link = cache(tmp_path) / folder
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(elsewhere)
    message = refused(tmp_path, "leads outside the Hugging Face cache")
    assert message.startswith(str(link))
    assert list(elsewhere.iterdir()) == []


def test_a_planted_snapshot_link_or_blob_is_replaced_not_followed(served, tmp_path, tiny, home):
    """Links already in the cache (to the user's file, to a device) are not written through:
    the fetched file takes their place."""
    folder = cache(tmp_path) / "models--org--tiny-GGUF"
    etag = hashlib.sha256(tiny.read_bytes()).hexdigest()
    (folder / "blobs").mkdir(parents=True)
    (folder / "blobs" / etag).symlink_to("/dev/zero")
    (folder / "blobs" / f"{etag}.incomplete").symlink_to(home / ".bashrc")
    pointer = folder / "snapshots" / "0123456789abcdef0123456789abcdef01234567" / NAME
    pointer.parent.mkdir(parents=True)
    pointer.symlink_to(home / ".bashrc")
    before = listing(tmp_path)
    path = fetch_model(REPO)
    assert path == pointer and path.read_bytes() == tiny.read_bytes()
    assert (folder / "blobs" / etag).is_file() and not (folder / "blobs" / etag).is_symlink()
    assert (home / ".bashrc").read_text() == "# the user's own\n"
    remembered = {"data", "data/recent_downloads.json"}  # the download, listed for the model picker
    assert set(changes_outside_the_cache(before, listing(tmp_path), tmp_path)) == remembered
    assert os.path.samefile(pointer, folder / "blobs" / etag)


def test_a_redirect_to_another_host_is_not_followed(served, tmp_path):
    served.lie(NAME, redirect="https://files.example.net/x.gguf")
    message = refused(tmp_path, "on to 'files.example.net', which is neither it nor the Hub's storage: refused")
    assert message.startswith(f"{served.url} sent the download of {NAME}")


def test_a_redirect_down_to_http_from_the_hub_is_refused():
    from sessions.hub.names import redirect_allowed

    assert redirect_allowed("https://huggingface.co/a/b/resolve/main/f", "https://cdn-lfs.hf.co/x")
    assert redirect_allowed("https://huggingface.co/a/b/resolve/main/f", "https://cas-bridge.xethub.hf.co/x")
    assert redirect_allowed("https://hf-mirror.com/a/b/resolve/main/f", "https://cdn.hf-mirror.com/x")
    assert redirect_allowed("https://hf.example.com/a", "https://files.example.com/x")
    assert not redirect_allowed("https://huggingface.co/a/b/resolve/main/f", "http://cdn-lfs.hf.co/x")
    assert not redirect_allowed("https://huggingface.co/a", "https://huggingface.co.evil.net/x")
    assert not redirect_allowed("https://hf-mirror.com/a", "https://evil.net/x")
    assert not redirect_allowed("https://hf-mirror.com/a", "file:///etc/passwd")


@pytest.mark.parametrize("head_too", [False, True], ids=["download", "metadata"])
def test_a_redirect_loop_ends_in_a_sentence(served, tmp_path, head_too):
    served.lie(NAME, redirect=f"/{REPO}/resolve/main/{NAME}", head_too=head_too)
    message = refused(tmp_path, "round a loop of redirects: refused; check HF_ENDPOINT or try again later")
    assert "could not reach" not in message


def test_a_body_cut_at_the_same_byte_every_time_is_given_up_and_kept(served, tmp_path, tiny):
    size = tiny.stat().st_size
    served.lie(NAME, cut_at=size // 2)
    message = refused(tmp_path, f"the download of {NAME} from {served.url} broke off 6 times in a row at ")
    assert "could not reach" not in message and "the next try goes on from them" in message
    served.lies.clear()
    assert fetch_model(REPO).read_bytes() == tiny.read_bytes()
    assert served.gets(NAME)[-1].header("Range") == f"bytes={size // 2}-"


def test_a_size_announced_larger_than_the_body_is_refused_and_deleted(served, tmp_path, tiny):
    served.lie(NAME, size=tiny.stat().st_size + 10)
    refused(tmp_path, "where it announced")
    assert not list((cache(tmp_path) / "models--org--tiny-GGUF" / "blobs").iterdir())


def test_a_size_announced_smaller_than_the_body_is_refused_and_deleted(served, tmp_path, tiny):
    served.lie(NAME, size=tiny.stat().st_size - 10)
    refused(tmp_path, "sent more than the")
    assert not list((cache(tmp_path) / "models--org--tiny-GGUF" / "blobs").iterdir())


def test_other_bytes_than_the_hash_names_are_deleted(served, tmp_path, tiny):
    data = tiny.read_bytes()
    served.lie(NAME, body=data[:-1] + bytes([data[-1] ^ 1]))
    refused(tmp_path, "do not match the content hash it gave: the download was deleted")
    assert not list((cache(tmp_path) / "models--org--tiny-GGUF" / "blobs").iterdir())


def test_a_huge_size_is_refused_before_a_byte_is_written(served, tmp_path):
    served.lie(NAME, size=10**15)
    message = refused(tmp_path, f"{NAME} is 1000.0 TB, more than the ")
    assert "free in the Hugging Face cache" in message and "hf_xet" not in message
    assert served.gets(NAME) == []


def test_a_trickle_is_given_up_and_the_progress_moves_meanwhile(served, tmp_path, monkeypatch):
    monkeypatch.setattr(transfer, "STALL_SECONDS", 0.5)
    monkeypatch.setattr(transfer, "STALL_BYTES", 10_000)
    served.lie(NAME, trickle=0.01)
    steps = []
    before = listing(tmp_path)
    with pytest.raises(HubError, match=rf"^the download of {NAME} from {served.url} stalled: \d+ B came in "):
        fetch_model(REPO, steps.append)
    assert changes_outside_the_cache(before, listing(tmp_path), tmp_path) == []
    moving = sorted({step.done for step in steps})
    assert moving[0] == 0 and len(moving) >= 3, moving  # the line showed the bytes as they came


def test_a_server_that_sends_nothing_is_timed_out(served, tmp_path, monkeypatch, tiny):
    monkeypatch.setenv("HF_HUB_DOWNLOAD_TIMEOUT", "0.3")
    monkeypatch.setattr(transfer, "TRIES", 2)
    served.lie(NAME, hang_at=100)
    message = refused(tmp_path, "sent nothing for 0.3 s, 2 times in a row, during the download of")
    assert "the next try goes on from them" in message


@pytest.mark.parametrize(("lie", "words"), [
    ({"etag": "/dev/zero"}, "which is not a content hash"),
    ({"size": 10**15}, "free in the Hugging Face cache"),
])
def test_pull_tells_each_trick_in_one_line(served, capsys, lie, words):
    served.lie(NAME, **lie)
    code, out, err = run(capsys, "pull", REPO)
    assert_one_line_error(code, out, err, words)


def test_a_file_named_by_its_git_blob_hash_is_checked_against_it(served, tiny):
    """Files kept in git rather than LFS are named by git's SHA-1 of their content."""
    data = tiny.read_bytes()
    served.lie(NAME, etag=hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest())
    assert fetch_model(REPO).read_bytes() == data
    served.lie(NAME, etag=hashlib.sha1(b"blob %d\0" % len(data) + data[:-1]).hexdigest())
    served.repos[REPO]["tiny-Q4_K_M.gguf"] = data  # the same bytes under a new content hash
    with pytest.raises(HubError, match="do not match the content hash it gave"):
        fetch_model(REPO)
