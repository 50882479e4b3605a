"""``export -o`` and ``import`` stopped by a signal at the worst moment, in real processes.

A signal is a user's ordinary gesture (Ctrl+C, closing the terminal, a service manager's
SIGTERM), so it must end as a failure does: one sentence on stderr, 128 + the signal as
the status, nothing lost and nothing left behind. The child (``tests.paused_cli``) pauses
at the moment under test and says so; the test signals it there, so no timing is guessed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from sessions.exchange import export_json
from sessions.store import SessionStore
from tests.paused_cli import PAUSED, RECEIVED
from tests.signal_state import signal_state

REPO = Path(__file__).resolve().parents[2]
SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]


def paused(target: str, when: str, *argv: str) -> subprocess.Popen:
    """``llamachat ARGV`` in a child, once it has paused at ``target`` (``MODULE:NAME``)."""
    child = subprocess.Popen([sys.executable, "-m", "tests.paused_cli", target, when, *argv], cwd=REPO,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    line = child.stderr.readline().decode()
    if line.strip() != PAUSED:
        child.kill()
        pytest.fail(f"the child never paused: {line}{child.stderr.read().decode()}")
    return child


def finish(child: subprocess.Popen) -> tuple[int, str, list[str]]:
    """Let the paused call go on; the status, stdout and the lines on stderr."""
    out, err = child.communicate(b"\n", timeout=120)
    return child.returncode, out.decode(), err.decode().splitlines()


def a_session(store: SessionStore) -> int:
    session = store.create_session(title="kept")
    question = store.add_message(session.id, None, "user", "What is a llama?")
    store.add_message(session.id, question.id, "assistant", "A camelid.")
    return session.id


@pytest.mark.parametrize("signum", SIGNALS)
def test_an_export_stopped_while_it_writes_leaves_the_old_file_and_no_temp_file(store, tmp_path, signum):
    """SIGTERM and SIGHUP used to end the process on the spot, leaving a hidden temp file as
    large as the export in the user's folder, and no word of what happened."""
    session_id = a_session(store)
    SessionStore.open().close()  # the backup is fresh: the child's only fsync is the export's
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "chat.md").write_text("old\n")
    child = paused("sessions.durable:fsync_file", "before", "export", str(session_id), "-o",
                   str(folder / "chat.md"))
    assert any(path.name.endswith(".tmp") for path in folder.iterdir()), "paused mid-write"
    before = signal_state(child.pid)  # told if the signal is never seen (once, under load)
    os.kill(child.pid, signum)
    status, out, err = finish(child)
    assert status == 128 + signum, (err, before)
    assert err == [f"llamachat: stopped by {signal.Signals(signum).name} before `llamachat export` finished"]
    assert out == ""
    assert [path.name for path in folder.iterdir()] == ["chat.md"]
    assert (folder / "chat.md").read_text() == "old\n"


def exported(store: SessionStore, tmp_path: Path) -> Path:
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(export_json(store, a_session(store))))
    return path


def signal_seen(child: subprocess.Popen, signum: int) -> None:
    """Signal the paused child and wait for its handler to have taken the signal."""
    os.kill(child.pid, signum)
    line = child.stderr.readline().decode()
    if line.strip() != f"{RECEIVED} {signum}":
        child.kill()
        pytest.fail(f"the signal was not taken by the command's handler: {line!r}{child.stderr.read().decode()}")


@pytest.mark.parametrize("signum", SIGNALS)
def test_an_import_stopped_before_its_commit_says_nothing_was_imported(store, tmp_path, signum):
    path = exported(store, tmp_path)
    before = [s.id for s in store.list_sessions()]
    child = paused("sessions.exchange.builder:_save_one", "before", "import", str(path))
    signal_seen(child, signum)
    status, out, err = finish(child)
    assert status == 128 + signum, err
    assert err == [f"llamachat: stopped by {signal.Signals(signum).name} before the import was saved: "
                   "nothing was imported"]
    assert out == ""
    assert [s.id for s in store.list_sessions()] == before


def test_an_import_stopped_as_it_commits_still_says_which_sessions_it_made(store, tmp_path):
    """Ctrl+C during the commit used to end with an empty line and status 130, the
    sessions saved but their ids never printed: imported again, the file made copies."""
    path = exported(store, tmp_path)
    before = {s.id for s in store.list_sessions()}
    child = paused("sessions.exchange.json_format:save_sessions", "after", "import", str(path))
    signal_seen(child, signal.SIGINT)
    status, out, err = finish(child)
    [new_id] = {s.id for s in store.list_sessions()} - before
    assert status == 130, err
    assert out == f"Imported session {new_id}: “{store.get_session(new_id).title}”.\n"
    assert err == [f"llamachat: stopped by SIGINT after the import was saved whole (session {new_id})"]
    assert [m.text for m in store.messages(new_id)] == ["What is a llama?", "A camelid."]


def test_a_delete_stopped_as_it_commits_still_says_what_it_deleted(store):
    """Deleting a long chat takes seconds, much of them in the commit: Ctrl+C then used to
    end with no line at all while the session was gone."""
    kept, doomed = a_session(store), a_session(store)
    child = paused("sessions.store.session_store:SessionStore.transaction", "exit", "delete", str(doomed))
    signal_seen(child, signal.SIGINT)
    status, out, err = finish(child)
    assert [s.id for s in store.list_sessions()] == [kept]
    assert status == 130, err
    assert out == f"deleted session {doomed}: kept (2 messages)\n"
    assert err == ["llamachat: stopped by SIGINT after the deletion was saved"]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_delete_stopped_before_its_commit_says_nothing_was_deleted(store, signum):
    ids = [a_session(store), a_session(store)]
    child = paused("sessions.store.session_store:SessionStore.delete_session", "before", "delete", *map(str, ids))
    signal_seen(child, signum)
    status, out, err = finish(child)
    assert status == 128 + signum, err
    assert out == ""
    assert err == [f"llamachat: stopped by {signal.Signals(signum).name} before the deletion was saved: "
                   "nothing was deleted"]
    assert sorted(s.id for s in store.list_sessions()) == ids


@pytest.mark.engine
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_one_signal_ends_ask_even_when_its_work_cannot_stop(tmp_path, monkeypatch, signum):
    """A read that a signal cannot interrupt (a FIFO where a file was expected, a model
    loading from a slow disk) used to keep ask running after Ctrl+C until a second one."""
    from sessions.synth import make_model

    monkeypatch.setenv("PAUSED_CLI_STOP_GRACE", "1")
    model = str(make_model("llama", "tiny"))
    child = paused("sessions.controller.session_controller:SessionController.load_model", "before",
                   "ask", "-m", model, "hello")  # the work waits on its stdin, which never comes
    os.kill(child.pid, signum)
    status = child.wait(timeout=60)
    err = child.stderr.read().decode().splitlines()
    child.stdin.close()
    assert status == 128 + signum, err
    name = signal.Signals(signum).name
    assert err[-1] == (f"llamachat: stopped by {name}: what was running had not stopped 1 s later, so llamachat "
                       "ended there (what was saved before is kept)")
