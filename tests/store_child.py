"""A second process on the session database, driven line by line through its stdin.

Tests of several processes on one database start ``python -m tests.store_child DB``,
write one JSON command per line and read one JSON answer per line, so every step is
synchronised by the pipe (never by sleeping): when the answer arrives, the child has
done exactly that much. Commands:

- ``{"op": "open", "busy_timeout": 30}``: open the store (held until ``close``).
- ``{"op": "add", ...}`` / ``{"op": "append", ...}``: ``add_message`` / ``append_message``.
- ``{"op": "append_many", "session": S, "count": N, ...}``: N appends in a chain.
- ``{"op": "delete_subtree", "message": M, "expected_ids": [...]}``.
- ``{"op": "set_head", "session": S, "message": M}``: move the head (a window paging).
- ``{"op": "snapshot", "session": S}``: the head and message ids, read in one snapshot.
- ``{"op": "close"}``, ``{"op": "exit"}``.
- ``{"op": "hold", "how": "exclusive" | "immediate" | "locking-mode"}``: a plain SQLite
  connection (another program, not llamachat) takes that lock and holds it until
  ``{"op": "release"}``.

Each answer is ``{"ok": true, ...}`` or ``{"ok": false, "error": CLASS, "message": TEXT}``.
"""

from __future__ import annotations

import json
import select
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

from sessions.store import SessionStore, StoreError

REPO = Path(__file__).resolve().parent.parent


class Child:
    def __init__(self, db: Path) -> None:
        self.db = db
        self.store: SessionStore | None = None
        self.raw: sqlite3.Connection | None = None

    def do(self, command: dict[str, Any]) -> dict[str, Any]:
        op = command["op"]
        if op == "open":
            self.store = SessionStore.open(self.db, busy_timeout=command.get("busy_timeout", 30))
            return {"notice": self.store.recovery_notice, "read_only": self.store.read_only}
        if op == "close":
            self.store.close()
            self.store = None
            return {}
        if op == "add":
            message = self.store.add_message(command["session"], command.get("parent"), command["role"],
                                             command["text"])
            return {"id": message.id}
        if op == "append":
            message = self.store.append_message(command["session"], command.get("parent"), command["role"],
                                                command["text"], expected_head=command.get("expected_head"))
            return {"id": message.id}
        if op == "append_many":  # a chain of ``count`` messages, each on the head it saw
            head = command.get("expected_head")
            for i in range(command["count"]):
                head = self.store.append_message(command["session"], head, "user", f"{command['text']} {i}",
                                                 expected_head=head).id
            return {"head": head}
        if op == "delete_subtree":
            count = self.store.delete_subtree(command["message"], expected_ids=command.get("expected_ids"))
            return {"count": count}
        if op == "set_head":
            self.store.set_active_leaf(command["session"], command["message"])
            return {}
        if op == "snapshot":
            session, tree = self.store.load_session_tree(command["session"])
            return {"head": session.active_leaf_id,
                    "ids": sorted(m.id for root in tree.roots() for m in [root, *tree.descendants(root.id)])}
        if op == "hold":
            return self._hold(command["how"])
        if op == "release":
            self.raw.rollback()
            self.raw.close()
            self.raw = None
            return {}
        raise ValueError(f"unknown op {op!r}")

    def _hold(self, how: str) -> dict[str, Any]:
        self.raw = sqlite3.connect(self.db, isolation_level=None)
        if how == "locking-mode":  # what a backup or sync tool may do: no reader gets in
            self.raw.execute("PRAGMA locking_mode = EXCLUSIVE")
            self.raw.execute("BEGIN EXCLUSIVE")
            self.raw.execute("UPDATE sessions SET title = title")
        else:
            self.raw.execute("BEGIN EXCLUSIVE" if how == "exclusive" else "BEGIN IMMEDIATE")
            self.raw.execute("UPDATE sessions SET title = title")
        return {}


class StoreProcess:
    """The test's side: start the child, send it commands, read its answers."""

    def __init__(self, db: Path) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.store_child", str(db)], cwd=REPO,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def __call__(self, op: str, **fields: Any) -> dict[str, Any]:
        self.send(op, **fields)
        return self.receive()

    def send(self, op: str, **fields: Any) -> None:
        """Start a command without waiting for its answer (see ``answered`` and ``receive``)."""
        self.proc.stdin.write(json.dumps({"op": op, **fields}) + "\n")
        self.proc.stdin.flush()

    def answered(self) -> bool:
        """Whether the answer to the last command sent is there to be read."""
        return bool(select.select([self.proc.stdout], [], [], 0)[0])

    def receive(self) -> dict[str, Any]:
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the child process died (exit status {self.proc.wait()})")
        return json.loads(line)

    def __enter__(self) -> StoreProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.write(json.dumps({"op": "exit"}) + "\n")
            self.proc.stdin.close()
            self.proc.wait(timeout=60)
        self.proc.stdout.close()


def main() -> int:
    child = Child(Path(sys.argv[1]))
    for line in sys.stdin:
        command = json.loads(line)
        if command["op"] == "exit":
            break
        try:
            answer = {"ok": True, **child.do(command)}
        except StoreError as error:
            answer = {"ok": False, "error": type(error).__name__, "message": str(error)}
        print(json.dumps(answer), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
