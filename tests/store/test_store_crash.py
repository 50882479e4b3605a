"""Durability: a message reported as saved survives the process being killed outright.

A child process appends messages in a loop and prints each id as soon as ``add_message``
returns; the parent kills it with SIGKILL mid-loop and checks that every printed id is in
the reopened database with its text. Repeated a few rounds on the same file, so recovery
from one crash is itself crashed into.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from sessions.store import SessionStore

REPO = Path(__file__).resolve().parents[2]
ROUNDS = 3
REPORTED = 50

CHILD = """
import sys
from pathlib import Path
from sessions.store import SessionStore

store = SessionStore.open(Path(sys.argv[1]))
session_id, label = int(sys.argv[2]), sys.argv[3]
parent = None
index = 0
while True:
    role = "user" if index % 2 == 0 else "assistant"
    message = store.add_message(session_id, parent, role, f"{label} message {index}",
                                tokens={"fp": list(range(index % 7))})
    print(message.id, index, flush=True)
    parent = message.id
    index += 1
"""


def run_and_kill(db: Path, session_id: int, label: str) -> dict[int, int]:
    """Start a writer, read ``REPORTED`` acknowledged ids, SIGKILL it; returns id -> index."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(db), str(session_id), label],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, env=env,
    )
    seen: dict[int, int] = {}
    try:
        while len(seen) < REPORTED:
            line = child.stdout.readline()
            if not line:
                raise AssertionError(f"the writer stopped early: {child.stderr.read()}")
            message_id, index = map(int, line.split())
            seen[message_id] = index
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stdout.close()
        child.stderr.close()
    assert child.returncode == -signal.SIGKILL
    return seen


def test_acknowledged_messages_survive_sigkill(tmp_path):
    db = tmp_path / "crash.sqlite3"
    with SessionStore.open(db) as store:
        sessions = [store.create_session(title=f"round {r}").id for r in range(ROUNDS)]
    for round_number, session_id in enumerate(sessions):
        label = f"round {round_number}"
        acknowledged = run_and_kill(db, session_id, label)
        with SessionStore.open(db) as store:
            for message_id, index in acknowledged.items():
                message = store.get_message(message_id)
                assert message.session_id == session_id
                assert message.text == f"{label} message {index}"
                assert store.get_tokens(message_id, "fp") == list(range(index % 7))
            tree = store.load_tree(session_id)
            # The chain is unbroken: every stored message hangs off the one before it.
            assert len(tree.leaves()) == 1
            assert len(tree.path_to(tree.leaves()[0].id)) == len(tree) >= REPORTED
            for earlier in range(round_number):
                assert len(store.messages(sessions[earlier])) >= REPORTED
