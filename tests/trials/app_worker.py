"""The app in the concurrency trial: the real Textual app, driven through Pilot like a user.

    python -m tests.trials.app_worker SESSION NAME ROUNDS MODEL

It opens the session (the database and folders come from the ``LLAMACHAT_*`` variables
the coordinator sets), and each round types a question and presses Enter, as a user
would, over the fake engine (its replies are instant; the other processes run the real
model). A refusal is read as a user reads it: "another llamachat is writing a reply"
means waiting until that reply is done (the user waits on the session's turn, a lock,
never a timer), "the chat changed in another window" means the chat on screen was read
again, so Enter sends the same text again. After its rounds the app stays open (a
window left on the screen) until a line ``quit`` on stdin closes it (the user quits).

Each event is one JSON line on stdout: ``sent`` (a question or a reply shown as saved,
with its id, parent, role and text), ``queued``, ``conflict``, ``recovered``, ``idle``
(its rounds are done), ``closed``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from sessions import paths
from sessions.api.chat import SessionController
from sessions.config import Config
from sessions.controller.reply_turn import ReplyTurns
from sessions.sampling import SamplingSettings
from sessions.store import SessionStore
from tests.tui.fake_engine import FakeEngineFactory, FakeScript
from tests.tui.helpers import ready, settle, type_text
from tui.app import LlamaChatApp
from tui.startup import StartupRequest

TRIES = 50
"""Refusals in a row one round may meet before the worker reports it stuck."""


def tell(**event) -> None:
    print(json.dumps(event), flush=True)


async def drive(session_id: int, name: str, rounds: int, model: Path) -> int:
    store = SessionStore.open()
    if store.recovery_notice:
        tell(event="recovered", notice=store.recovery_notice)
    controller = SessionController(store, engine_factory=FakeEngineFactory(FakeScript(n_ctx=1 << 20)),
                                   sampling=SamplingSettings(temperature=0.0))
    app = LlamaChatApp(controller, config=Config(), startup=StartupRequest(session_id=session_id, model_path=model))
    status = 0
    try:
        async with app.run_test(headless=True, size=(100, 30)) as pilot:
            screen = await ready(pilot)
            for round_ in range(rounds):
                if not await one_round(pilot, screen, session_id, f"{name} round {round_} question"):
                    status = 1
                    break
            tell(event="idle")
            while await asyncio.to_thread(sys.stdin.readline) not in ("quit\n", ""):
                pass  # the app stays open, as a window left on the screen, until it is closed
    finally:
        store.close()
    tell(event="closed")
    return status


async def one_round(pilot, screen, session_id: int, text: str) -> bool:
    screen.chat_input.focus()
    await type_text(pilot, text)
    seen = {n.identity for n in pilot.app._notifications}  # by identity: old ones expire
    for _ in range(TRIES):
        await pilot.press("enter")
        await settle(pilot)
        snapshot = screen.controller.snapshot()
        head = snapshot.head if snapshot is not None else None
        question = snapshot.tree.get(head.parent_id) if head is not None and head.parent_id is not None else None
        if head is not None and head.role == "assistant" and question is not None and \
                question.role == "user" and question.text.endswith(text) and not screen.chat_input.text:
            tell(event="sent", id=question.id, parent=question.parent_id, role="user", text=question.text)
            tell(event="sent", id=head.id, parent=question.id, role="assistant", text=head.text)
            return True
        fresh = [n for n in pilot.app._notifications if n.identity not in seen]
        seen.update(n.identity for n in fresh)
        notices = [n.message for n in fresh]
        if any("writing a reply in this chat" in n for n in notices):
            tell(event="queued")
            turns = ReplyTurns(paths.database_file())  # wait as a user would: until that reply is done
            await asyncio.to_thread(turns.take, session_id, wait=True)
            turns.release()
        elif any("changed in another window" in n for n in notices):
            tell(event="conflict")
        else:
            tell(event="stuck", text=text, notices=notices, box=screen.chat_input.text,
                 head=None if head is None else [head.id, head.role, head.text[:60]],
                 question=None if question is None else [question.id, question.role, question.text[:60]])
            return False
    tell(event="stuck", text=text, notices=["too many refusals in a row"])
    return False


def main(argv: list[str]) -> int:
    session_id, name, rounds, model = int(argv[0]), argv[1], int(argv[2]), Path(argv[3])
    return asyncio.run(drive(session_id, name, rounds, model))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
