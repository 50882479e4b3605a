"""One process of the concurrency trial: asks and answers in a shared session, like ``ask``.

    python -m tests.trials.concurrency_worker DB SESSION WORKER ROUNDS

Each round opens the database (as each ``llamachat ask`` does), reads the session and
its head in one snapshot, adds a question under the head it saw and then the answer
under its question, both with ``append_message``'s check of the head, and closes the
database. It follows the rule a front end must follow to never nest questions: a new
question goes only under a head that is not someone's unanswered question; while one
is waiting for its answer, the worker waits its turn (it queues). A stale head
(``HeadMoved``) means reading again and retrying; a refused or busy open means opening
again. Every event is one JSON line on stdout, so the coordinator knows at once what was
sent and can damage the database in the middle of the traffic.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from sessions.store import (
    DatabaseBusy,
    DatabaseInUse,
    HeadMoved,
    SessionStore,
    StoreError,
)


def tell(**event) -> None:
    print(json.dumps(event), flush=True)


def main(argv: list[str]) -> int:
    db, session_id, worker, rounds = Path(argv[0]), int(argv[1]), int(argv[2]), int(argv[3])
    done = 0
    pending: int | None = None  # a question of ours still waiting for its answer
    while done < rounds:
        try:
            store = SessionStore.open(db, busy_timeout=20)
        except (DatabaseInUse, DatabaseBusy) as error:
            tell(event="refused", message=str(error))
            continue
        if store.recovery_notice:
            tell(event="recovered", notice=store.recovery_notice)
        try:
            if pending is None:
                session, tree = store.load_session_tree(session_id)
                head = session.active_leaf_id
                if head is not None and tree.get(head).role == "user" and not tree.children(head):
                    tell(event="queued")
                    continue
                text = f"worker {worker} round {done} question"
                pending = store.append_message(session_id, head, "user", text, expected_head=head).id
                tell(event="sent", id=pending, parent=head, role="user", text=text)
            text = f"worker {worker} round {done} answer"
            answer = store.append_message(session_id, pending, "assistant", text, expected_head=pending)
            tell(event="sent", id=answer.id, parent=pending, role="assistant", text=text)
            pending = None
            done += 1
        except HeadMoved:
            if pending is not None:  # someone wrote under our unanswered question: never expected
                tell(event="stuck", question=pending)
                return 1
            tell(event="conflict")
        except StoreError as error:
            tell(event="error", message=str(error))
        finally:
            store.close()
    tell(event="done")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
