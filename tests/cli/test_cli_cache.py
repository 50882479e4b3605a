"""``llamachat cache``, and ``delete`` taking a session's own checkpoint files with it.

Real checkpoint files, written by a ``CheckpointStore`` under the names the engine gives
them: the hash of a branch's exact tokens up to each file's end. The chats' tokens are
stored per message as the engine freezes them, so which files a chat owns is told here
exactly as it is for a chat the engine wrote.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from sessions import paths
from sessions.checkpoints import CheckpointStore, Segment, StateCompat, prefix_hash
from sessions.checkpoints.file_format import HEADER_SIZE
from sessions.checkpoints.keys import model_folder
from sessions.units import human_size
from tests.cli_support import assert_one_line_error, run

MODEL = "sha256:" + "ab" * 32
OTHER_MODEL = "sha256:" + "cd" * 32
COMPAT = StateCompat(MODEL, "type_k=f16;type_v=f16")
OTHER_COMPAT = StateCompat(OTHER_MODEL, "type_k=f16;type_v=f16")
STATE = 1000
SYSTEM = list(range(1, 11))


def tokens(seed: int, count: int = 10) -> list[int]:
    return [seed * 100 + n for n in range(count)]


class Chats:
    """Three sessions and their checkpoint files.

    A: system, user, two versions of the reply, a user message under the first; a file
       inside the first reply (a snapshot at no message boundary); also files of another model.
    B: the same system prompt, another user message: the system prompt's file is shared.
    C: another system prompt. And one file no chat reaches (a reply that was never stored).
    """

    def __init__(self, store) -> None:
        self.store = store
        self.files: dict[str, Path] = {}
        folder = paths.checkpoints_dir()
        with CheckpointStore(folder, ram_bytes=0, disk_bytes=1 << 30) as checkpoints:
            self.checkpoints = checkpoints
            a_user, a_reply, a_other_reply, a_next = tokens(2), tokens(3), tokens(4), tokens(5)
            self.a = self.session({MODEL: [SYSTEM, a_user, a_reply, a_next], OTHER_MODEL: [SYSTEM, a_user]},
                                  other_reply=a_other_reply, model_path="/models/alpha.gguf")
            self.b = self.session({MODEL: [SYSTEM, tokens(6)]})
            self.c = self.session({MODEL: [tokens(7), tokens(8)]})
            a = SYSTEM + a_user
            self.cells("system", SYSTEM, 0, 10)
            self.cells("a.user", a, 10, 20)
            self.cells("a.reply", a + a_reply, 20, 30)
            self.cells("a.other_reply", a + a_other_reply, 20, 30)
            self.snapshot("a.inside_reply", a + a_reply, 25)
            self.cells("a.next", a + a_reply + a_next, 30, 40)
            self.cells("a.other_model", a, 0, 20, compat=OTHER_COMPAT)
            self.cells("b.user", SYSTEM + tokens(6), 10, 20)
            self.cells("c.system", tokens(7), 0, 10)
            self.snapshot("nobody", a + tokens(9), 25)
            assert checkpoints.flush(30)
        assert all(path.exists() for path in self.files.values())

    def session(self, per_model: dict[str, list[list[int]]], other_reply: list[int] | None = None,
                model_path: str | None = None) -> int:
        session = self.store.create_session(model_path=model_path, model_fingerprint=model_path and MODEL)
        roles = ["system", "user", "assistant", "user"]
        ids = []
        parent = None
        for n, role in enumerate(roles[:len(per_model[MODEL])]):
            parent = self.store.add_message(session.id, parent, role, f"message {n}").id
            ids.append(parent)
        for fingerprint, pieces in per_model.items():
            for message_id, piece in zip(ids, pieces, strict=False):
                self.store.set_tokens(message_id, fingerprint, piece)
        if other_reply is not None:  # a second version of the reply, under the user message
            version = self.store.add_message(session.id, ids[1], "assistant", "another reply")
            self.store.set_tokens(version.id, MODEL, other_reply)
        return session.id

    def cells(self, name: str, branch: list[int], start: int, end: int, compat: StateCompat = COMPAT) -> None:
        parent = prefix_hash(branch[:start]) if start else None
        self.put(name, Segment(compat, prefix_hash(branch[:end]), parent, start, end, bytes(STATE), None))

    def snapshot(self, name: str, branch: list[int], at: int) -> None:
        self.put(name, Segment(COMPAT, prefix_hash(branch[:at]), None, at, at, bytes(STATE), None, "snapshot"))

    def put(self, name: str, segment: Segment) -> None:
        self.checkpoints.put(segment)
        suffix = ".snap" if segment.kind == "snapshot" else ".ckpt"
        self.files[name] = (paths.checkpoints_dir() / model_folder(segment.compat.model_fingerprint)
                            / f"{segment.compat.params_digest.hex()}-{segment.prefix}{suffix}")

    def present(self) -> set[str]:
        return {name for name, path in self.files.items() if path.exists()}


A_OWN = {"a.user", "a.reply", "a.other_reply", "a.inside_reply", "a.next", "a.other_model"}
FILE = HEADER_SIZE + STATE


@pytest.fixture
def chats(store) -> Chats:
    return Chats(store)


def test_show_gives_the_folder_the_use_against_the_budget_and_the_files_per_model(capsys, chats) -> None:
    paths.config_file().parent.mkdir(parents=True, exist_ok=True)
    paths.config_file().write_text('[checkpoints]\nmax_disk = "2GiB"\n')
    code, out, err = run(capsys, "cache")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == f"checkpoint folder: {paths.checkpoints_dir()}"
    blocks = {name: os.stat(path).st_blocks * 512 for name, path in chats.files.items()}
    assert all(taken > FILE for taken in blocks.values())  # what a full disk counts: whole blocks
    other = blocks["a.other_model"]
    assert lines[1] == (f"used: {human_size(sum(blocks.values()))} on disk ({10 * FILE / 1000:.1f} KB in the "
                        'files) of 2.1 GB (checkpoints.max_disk = "2GiB"), 10 checkpoint files')
    assert lines[2] == "parked branches: up to 1GiB of a GPU's memory (checkpoints.parked_mb)"
    assert lines[3].split() == ["MODEL", "FILES", "ON", "DISK", "FOLDER"]
    assert lines[4].split() == ["alpha.gguf", "9", *human_size(sum(blocks.values()) - other).split(),
                                model_folder(MODEL)]
    assert lines[5].split() == ["(unknown", "model)", "1", *human_size(other).split(), model_folder(OTHER_MODEL)]
    assert run(capsys, "cache", "show") == (code, out, err)


def test_show_with_a_session_gives_its_own_files_and_those_it_shares(capsys, chats) -> None:
    code, out, _ = run(capsys, "cache", "--session", str(chats.a))
    assert code == 0
    assert out.splitlines()[-1] == (f"session {chats.a}: 6 checkpoint files, {6 * FILE / 1000:.1f} KB, its own; "
                                    f"1 checkpoint file, {FILE / 1000:.1f} KB, shared with other sessions")
    code, out, _ = run(capsys, "cache", "show", "--json", "--session", str(chats.b))
    shown = json.loads(out)
    assert shown["session"] == {"id": chats.b, "own_files": 1, "own_bytes": FILE,
                                "shared_files": 1, "shared_bytes": FILE}
    assert (shown["files"], shown["bytes"], shown["budget"]) == (10, 10 * FILE, 20 << 30)
    assert shown["folder"] == str(paths.checkpoints_dir())
    assert {m["folder"]: (m["model"], m["files"]) for m in shown["models"]} == {
        model_folder(MODEL): ("/models/alpha.gguf", 9), model_folder(OTHER_MODEL): (None, 1)}


def test_clear_a_session_deletes_its_own_files_and_keeps_the_shared_ones(capsys, chats) -> None:
    code, out, err = run(capsys, "cache", "clear", "--session", str(chats.a))
    assert (code, err) == (0, "")
    assert out == (f"freed {6 * FILE / 1000:.1f} KB: 6 checkpoint files of session {chats.a} deleted "
                   "(1 checkpoint file shared with other sessions kept)\n")
    assert chats.present() == set(chats.files) - A_OWN
    code, out, _ = run(capsys, "cache", "clear", "--session", str(chats.c))
    assert out == f"freed {FILE / 1000:.1f} KB: 1 checkpoint file of session {chats.c} deleted\n"
    assert chats.present() == {"system", "b.user", "nobody"}


def test_clear_all_deletes_every_checkpoint_file_and_nothing_else(capsys, chats) -> None:
    other = paths.checkpoints_dir() / "notes.txt"
    other.write_text("mine")
    code, out, err = run(capsys, "cache", "clear", "--all")
    assert (code, err) == (0, "")
    assert out == f"freed {10 * FILE / 1000:.1f} KB: 10 checkpoint files deleted, all there were\n"
    assert chats.present() == set() and other.exists()
    assert run(capsys, "cache", "clear", "--all")[1] == "freed 0 B: 0 checkpoint files deleted, all there were\n"


@pytest.mark.parametrize(("argv", "words"), [
    (("cache", "clear"), "`cache clear` takes --session ID or --all"),
    (("cache", "clear", "--all", "--session", "1"), "`cache clear` takes --session ID or --all"),
    (("cache", "show", "--all"), "--all is for `cache clear`"),
    (("cache", "clear", "--all", "--json"), "--json is for `cache show`"),
    (("cache", "empty"), "invalid choice: 'empty'"),
    (("cache", "--session", "77"), "no session 77"),
    (("cache", "clear", "--session", "77"), "no session 77"),
])
def test_bad_requests_are_one_line_and_delete_nothing(capsys, chats, argv, words) -> None:
    assert_one_line_error(*run(capsys, *argv), words=words)
    assert chats.present() == set(chats.files)


def test_an_empty_or_missing_folder_shows_nothing_used(capsys) -> None:
    code, out, _ = run(capsys, "cache")
    assert code == 0
    assert out.splitlines()[1] == ('used: 0 B on disk (0 B in the files) of 21.5 GB (checkpoints.max_disk = "20GiB"), '
                                   "0 checkpoint files")
    assert not paths.database_file().exists()  # showing the cache makes no database


def test_delete_takes_the_sessions_own_files_and_leaves_the_shared_ones(capsys, chats) -> None:
    code, out, err = run(capsys, "delete", str(chats.a))
    assert code == 0 and out.startswith(f"deleted session {chats.a}")
    assert err == f"llamachat: freed {6 * FILE / 1000:.1f} KB: 6 checkpoint files of the deleted sessions\n"
    assert chats.present() == set(chats.files) - A_OWN
    run(capsys, "delete", str(chats.b))  # the system prompt's file was shared with A only
    assert chats.present() == {"c.system", "nobody"}


def test_files_shared_only_among_the_deleted_sessions_go_with_them(capsys, chats) -> None:
    code, _out, err = run(capsys, "delete", str(chats.a), str(chats.b))
    assert code == 0 and "8 checkpoint files of the deleted sessions" in err
    assert chats.present() == {"c.system", "nobody"}


def test_delete_warns_when_a_file_cannot_be_deleted_and_still_deletes_the_session(capsys, chats,
                                                                                  monkeypatch) -> None:
    real_unlink = Path.unlink
    stuck = chats.files["a.user"]

    def unlink(path: Path, missing_ok: bool = False) -> None:
        if path == stuck:
            raise PermissionError(13, "Permission denied")
        real_unlink(path, missing_ok)

    monkeypatch.setattr(Path, "unlink", unlink)
    code, out, err = run(capsys, "delete", str(chats.a))
    assert code == 0 and out.startswith(f"deleted session {chats.a}")
    assert err.splitlines() == [
        f"llamachat: freed {5 * FILE / 1000:.1f} KB: 5 checkpoint files of the deleted sessions",
        f"llamachat: warning: could not delete the checkpoint file {stuck}: Permission denied",
    ]
    assert chats.present() == set(chats.files) - A_OWN | {"a.user"}
    assert chats.a not in {summary.id for summary in chats.store.list_sessions()}


def test_models_says_how_much_the_checkpoints_take(capsys, chats, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "empty-home"))
    for name in ("HF_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME", "LMSTUDIO_MODELS_DIR", "LLAMA_CACHE"):
        monkeypatch.delenv(name, raising=False)
    code, _out, err = run(capsys, "models")
    assert code == 0
    on_disk = sum(os.stat(path).st_blocks * 512 for path in chats.files.values())
    assert (f"llamachat: checkpoints: {human_size(on_disk)} on disk in 10 files of 21.5 GB "
            '(checkpoints.max_disk = "20GiB"); `llamachat cache` shows them\n') in err
    assert "the demo model is there all the same: `llamachat --demo` makes it" in err  # as the picker lists it


def test_clear_all_on_a_read_only_disk_says_what_it_could_not_delete(capsys, store, small_disk, monkeypatch) -> None:
    """It used to say "0 checkpoint files deleted, all there were", then fail."""
    small_disk.need_mount()
    monkeypatch.setenv("LLAMACHAT_CACHE_DIR", str(small_disk.folder / "cache"))
    chats = Chats(store)
    small_disk.make_read_only()
    code, out, err = run(capsys, "cache", "clear", "--all")
    assert code == 1
    assert out == "freed 0 B: 0 of 10 checkpoint files deleted, 10 could not be\n"
    assert err.startswith("llamachat: error: could not delete ") and err.endswith(
        ": Read-only file system (and 9 more)\n")
    assert len(chats.present()) == 10
