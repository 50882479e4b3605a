"""Snapshots of what a user looks at after the gestures of issue 34: line breaks kept in
messages, the delete question naming the tree node under the cursor, and a paged long
reply with its header on screen; and of issue 37's several versions written at once,
paged while they are written.

The chats are written straight into the store (fixed texts and times), as in
``test_main_snapshots``.
"""

from __future__ import annotations

import pytest

from sessions.store import SessionStore
from sessions.tree import GenerationStats
from tests.tui.helpers import wait_for
from tests.tui.test_main_snapshots import SIZE, quiet
from tui.startup import StartupRequest


def write_chat(model_path, *replies: str, question: str = "Roses are red\nviolets are blue") -> int:
    """A question and its replies (versions of one answer), the last one shown."""
    with SessionStore.open() as store:
        session = store.create_session(model_path=str(model_path), model_fingerprint="fake-" + model_path.name,
                                       created_at=0.0)
        ask = store.add_message(session.id, None, "user", question, created_at=1.0)
        last = ask
        for index, text in enumerate(replies):
            last = store.add_message(session.id, ask.id, "assistant", text, created_at=2.0 + index,
                                     stats=GenerationStats(tokens_generated=9, stop_reason="eog"))
        store.set_active_leaf(session.id, last.id)
        return session.id


def test_single_line_breaks_are_drawn(snap_compare, make_app, fake_model):
    reply = "Sugar is sweet,\nand so are you.\n\n```text\nkept\nas it was\n```"
    app = make_app(startup=StartupRequest(session_id=write_chat(fake_model, reply)))
    assert snap_compare(app, terminal_size=SIZE, run_before=quiet)


@pytest.mark.usefixtures("every_streamed_figure_drawn")  # the meter of the last piece, whatever the load
def test_versions_written_at_once_page_while_written(snap_compare, make_app, fake_model, script):
    app = make_app(startup=StartupRequest(session_id=write_chat(fake_model, "First answer.")))

    async def second_of_three(pilot):
        from sessions.sampling import SamplingSettings
        from tests.tui.helpers import reply_text
        from tui.screens.dialogs import TextPrompt

        await quiet(pilot)
        screen = pilot.app.screen
        screen.controller.set_sampling(SamplingSettings(temperature=0.8, seed=1))
        script.replies = ["Alpha writes first and", "Beta goes on from here", "Gamma says the third"]
        script.hold_after = 3  # three words of each, then held until the app closes
        await pilot.press("ctrl+up", "alt+r")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, TextPrompt), "the count asked for")
        await pilot.press("ctrl+a", "ctrl+k", "3", "enter")
        await wait_for(pilot, lambda: reply_text(screen).strip() == "Alpha writes first", "the first version")
        await pilot.press("alt+right")
        await wait_for(pilot, lambda: reply_text(screen).strip() == "Beta goes on", "the second version")
        screen.status.set_speed(None)  # a speed measured on the fake's clock
        pilot.app.clear_notifications()
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=second_of_three)


def test_delete_in_the_tree_names_the_node(snap_compare, make_app, fake_model):
    app = make_app(startup=StartupRequest(session_id=write_chat(fake_model, "First answer.", "Second answer.")))

    async def delete_from_the_tree(pilot):
        from tui.screens.dialogs import ConfirmScreen

        await quiet(pilot)
        await pilot.press("ctrl+up", "ctrl+up", "ctrl+t", "f8")  # the question selected; the tree on the reply
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, ConfirmScreen), "the question")
        await pilot.app.workers.wait_for_complete()  # the saved-state marks, read in a worker
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=delete_from_the_tree)


async def test_a_paged_long_reply_shows_its_header(make_app, fake_model):
    """Paging a reply longer than the screen keeps its ``‹ 1/2 ›`` header and first line in
    view. (Checked on the text, not as a picture: the view may settle a few rows higher or
    lower depending on when the long version's height is measured, both right.)"""
    from tests.tui.helpers import screen_text, settle

    first = "\n".join(f"first version, line {i}" for i in range(40))
    second = "\n".join(f"second version, line {i}" for i in range(40))
    app = make_app(startup=StartupRequest(session_id=write_chat(fake_model, first, second, question="Count")))
    async with app.run_test(size=SIZE) as pilot:
        await quiet(pilot)
        await pilot.press("alt+left")
        await wait_for(pilot, lambda: any("‹ 1/2 ›" in line for line in screen_text(pilot.app)), "the header")
        await pilot.app.workers.wait_for_complete()
        await wait_for(pilot, lambda: pilot.app.screen.conversation_view.window_settled, "the view placed")
        await settle(pilot)
        lines = screen_text(pilot.app)
        header = next(i for i, line in enumerate(lines) if "‹ 1/2 ›" in line)
        assert any("first version, line 0" in line for line in lines[header + 1:header + 4]), lines


THOUGHT = ("<think>The user asks for a rhyme. Two short lines, the same metre as theirs.</think>"
           "Sugar is sweet,\nand so are you.")


def test_a_reply_with_its_reasoning_folded(snap_compare, make_app, fake_model):
    app = make_app(startup=StartupRequest(session_id=write_chat(fake_model, THOUGHT)))
    assert snap_compare(app, terminal_size=SIZE, run_before=quiet)


def test_a_reply_with_its_reasoning_unfolded(snap_compare, make_app, fake_model):
    app = make_app(startup=StartupRequest(session_id=write_chat(fake_model, THOUGHT)))

    async def unfold(pilot):
        from tests.tui.helpers import settle

        await quiet(pilot)
        await pilot.press("f12")
        await wait_for(pilot, lambda: pilot.app.screen.conversation_view.reasoning_shown, "the reasoning shown")
        await settle(pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=unfold)


def test_the_model_picker(snap_compare, make_app, fake_model, tmp_path, monkeypatch):
    for variable in ("HOME", "HF_HOME", "XDG_CACHE_HOME", "HF_HUB_CACHE", "LLAMA_CACHE"):
        monkeypatch.setenv(variable, str(tmp_path / "elsewhere"))  # no model this machine happens to hold
    app = make_app(startup=StartupRequest(session_id=write_chat(fake_model, "An answer.")))

    async def pick(pilot):
        from tests.tui.helpers import settle
        from tui.screens.model_picker import ModelPicker

        await quiet(pilot)
        await pilot.press("f5")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, ModelPicker), "the model picker")
        await pilot.app.workers.wait_for_complete()  # the models found on disk, listed in a worker
        await settle(pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=pick)
