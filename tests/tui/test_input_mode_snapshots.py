"""Snapshots of the message box when the next send does something else than answer: editing
a message (what was being written kept aside), forking after a reply, and rewound to a
message of the branch.

The chat is ``test_main_snapshots``' (fixed texts and times), at its size.
"""

from __future__ import annotations

from tests.tui.helpers import type_text, wait_for
from tests.tui.test_main_snapshots import SIZE, quiet, write_chat
from tui.startup import StartupRequest


def test_editing_a_question_with_a_draft_kept_aside(snap_compare, make_app, fake_model):
    app = make_app(startup=StartupRequest(session_id=write_chat(fake_model)))

    async def editing(pilot):
        await quiet(pilot)
        screen = pilot.app.screen
        await type_text(pilot, "And a set?")  # a draft, kept while the question is edited
        await pilot.press("ctrl+up", "ctrl+up", "f2")  # the question "And a tuple?"
        await wait_for(pilot, lambda: screen.mode.kind == "edit" and screen.chat_input.text == "And a tuple?",
                       "the question in the box")

    assert snap_compare(app, terminal_size=SIZE, run_before=editing)


def test_forking_after_a_reply(snap_compare, make_app, fake_model):
    app = make_app(startup=StartupRequest(session_id=write_chat(fake_model)))

    async def forking(pilot):
        await quiet(pilot)
        screen = pilot.app.screen
        await pilot.press("ctrl+up", "ctrl+up", "ctrl+up", "ctrl+f")  # after the first reply
        await wait_for(pilot, lambda: screen.mode.kind == "fork", "the fork")

    assert snap_compare(app, terminal_size=SIZE, run_before=forking)


def test_rewound_to_a_reply(snap_compare, make_app, fake_model):
    app = make_app(startup=StartupRequest(session_id=write_chat(fake_model)))

    async def rewound(pilot):
        await quiet(pilot)
        screen = pilot.app.screen
        await pilot.press("ctrl+up", "ctrl+up", "ctrl+up", "ctrl+b")  # back to the first reply
        await wait_for(pilot, lambda: screen.mode.kind == "rewind", "the rewind")
        await pilot.app.workers.wait_for_complete()

    assert snap_compare(app, terminal_size=SIZE, run_before=rewound)
