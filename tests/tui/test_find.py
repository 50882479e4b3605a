"""Find in the open chat: the key and the palette open the bar, typing counts the matches,
Enter and the arrows walk them over the branch shown and then offer the other branches',
the matches are drawn reversed, and Esc closes the bar leaving the selection."""

from __future__ import annotations

from contextlib import asynccontextmanager

from textual.command import CommandList, CommandPalette
from textual.widgets import Input

from sessions.store import SessionStore
from sessions.tree import GenerationStats
from tests.tui.helpers import main_screen, ready, screen_text, settle, type_text, wait_for
from tests.tui.test_long_chat import MESSAGES, ZEBRA, open_long_chat
from tests.tui.test_long_chat import write_chat as write_long_chat
from tests.tui.test_main_snapshots import SIZE, quiet
from tui.screens.chat_screen import ChatScreen
from tui.startup import StartupRequest
from tui.widgets import find_bar
from tui.widgets.find_bar import FindBar
from tui.widgets.message_window import MOST_MOUNTED

TEXTS = ("Is an apple a fruit?", "Yes: an **Apple** is a fruit.\n\n```text\napple = 1\n```",
         "And a pear?", "A pear is a fruit too, like an apple.")
OTHER = "Tell me about the pear and the APPLE."
"""A second version of the third message: a match on another branch."""


def write_chat(model_path) -> tuple[int, list[int], int]:
    """The four messages of ``TEXTS`` (shown) and ``OTHER`` beside the third. The chat's id,
    the ids of the branch shown, and the id of ``OTHER``."""
    with SessionStore.open() as store:
        session = store.create_session(model_path=str(model_path), model_fingerprint="fake-" + model_path.name,
                                       created_at=0.0)
        ids: list[int] = []
        for index, text in enumerate(TEXTS):
            role = "user" if index % 2 == 0 else "assistant"
            stats = GenerationStats(tokens_generated=9, stop_reason="eog") if role == "assistant" else None
            ids.append(store.add_message(session.id, ids[-1] if ids else None, role, text,
                                         created_at=1.0 + index, stats=stats).id)
        other = store.add_message(session.id, ids[1], "user", OTHER, created_at=9.0).id
        store.set_active_leaf(session.id, ids[-1])
        return session.id, ids, other


def bar(pilot) -> FindBar:
    return main_screen(pilot).query_one(FindBar)


async def open_and_type(pilot, text: str) -> ChatScreen:
    screen = main_screen(pilot)
    await pilot.press("alt+s")
    await wait_for(pilot, lambda: bar(pilot).has_class("-open") and isinstance(screen.focused, Input), "the bar")
    await type_text(pilot, text)
    # The whole text searched: on a busy machine the pause after a key can run out before
    # the next key, and a count for part of the words is shown while the rest still waits.
    await wait_for(pilot, lambda: not bar(pilot).typing and bar(pilot).count != "", "the count")
    return screen


@asynccontextmanager
async def searched(make_app, fake_model, words: str):
    """The chat of ``write_chat`` opened, and ``words`` typed into the find bar: the app, its
    pilot and screen, the ids of the branch shown and the id of ``OTHER``."""
    session_id, ids, other = write_chat(fake_model)
    app = make_app(startup=StartupRequest(session_id=session_id))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = await open_and_type(pilot, words)
        yield app, pilot, screen, ids, other


def reversed_words(app) -> list[str]:
    """The words drawn reversed on the screen now (not the borders drawn so, nor the cursor)."""
    strips = app.screen._compositor.render_strips()
    return [segment.text for strip in strips for segment in strip
            if segment.style is not None and segment.style.reverse and any(c.isalnum() for c in segment.text)]


async def test_the_key_opens_the_bar_and_typing_counts_and_selects(make_app, fake_model):
    async with searched(make_app, fake_model, "apple") as (app, pilot, screen, ids, other):
        assert bar(pilot).count == "1 of 3 (1 on another branch)"
        assert screen.conversation_view.selected_id == ids[0]
        assert "1 of 3 (1 on another branch)" in "\n".join(screen_text(app))


async def test_next_and_previous_walk_the_branch_shown(make_app, fake_model):
    async with searched(make_app, fake_model, "apple") as (app, pilot, screen, ids, other):
        view = screen.conversation_view
        walk = []
        for key in ("enter", "down", "up", "shift+enter"):
            await pilot.press(key)
            await pilot.pause()
            walk.append((view.selected_id, bar(pilot).count))
        assert walk == [(ids[1], "2 of 3 (1 on another branch)"), (ids[3], "3 of 3 (1 on another branch)"),
                        (ids[1], "2 of 3 (1 on another branch)"), (ids[0], "1 of 3 (1 on another branch)")]
        assert view.view_for(ids[0]).has_class("-selected") and not view.view_for(ids[1]).has_class("-selected")


async def test_the_matches_are_drawn_reversed_in_the_messages_holding_them(make_app, fake_model):
    async with searched(make_app, fake_model, "apple") as (app, pilot, screen, ids, other):
        view = screen.conversation_view
        await wait_for(pilot, lambda: len(reversed_words(app)) >= 4, "the matches drawn")
        # Case ignored; in plain text, bold text and a code block alike.
        assert sorted(reversed_words(app)) == ["Apple", "apple", "apple", "apple"]
        assert [v.message_id for v in view.views if v.has_class("-found")] == [ids[0], ids[1], ids[3]]
        assert [v.message_id for v in view.views if v.has_class("-found-current")] == [ids[0]]
        await pilot.press("enter")  # the reply with the code block selected: it is drawn anew, marks and all
        await wait_for(pilot, lambda: view.view_for(ids[1]).has_class("-selected"), "the next match")
        await pilot.pause()
        await pilot.pause()
        assert sorted(reversed_words(app)) == ["Apple", "apple", "apple", "apple"]


async def test_a_match_on_another_branch_is_offered_then_gone_to(make_app, fake_model):
    async with searched(make_app, fake_model, "apple") as (app, pilot, screen, ids, other):
        view = screen.conversation_view
        await pilot.press("enter", "enter", "enter")  # past the branch's three matches
        await wait_for(pilot, lambda: bar(pilot).count.startswith("in another branch"), "the offer")
        assert view.selected_id == ids[3]  # offered, not gone to: the branch shown stays
        assert [v.message_id for v in view.views] == ids
        await pilot.press("enter")
        await wait_for(pilot, lambda: view.selected_id == other, "the switch")
        await settle(pilot)
        assert [v.message_id for v in view.views] == [ids[0], ids[1], other]
        assert screen.controller.snapshot().head.id == other
        assert bar(pilot).count == "3 of 3 (1 on another branch)"
        assert view.view_for(other).has_class("-found-current")


async def test_a_reply_written_while_the_bar_is_open_is_searched_too(make_app, fake_model, script):
    script.replies.append("Apple trees flower in spring; an apple follows.")
    session_id, ids, _ = write_chat(fake_model)
    app = make_app(startup=StartupRequest(session_id=session_id, model_path=fake_model))
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_and_type(pilot, "apple")
        await ready(pilot)
        screen.chat_input.focus()
        await type_text(pilot, "and an orange?")
        await pilot.press("enter")
        await settle(pilot)
        view = screen.conversation_view
        reply = view.views[-1]
        assert reply.message is not None and reply.message.text.startswith("Apple trees")
        await wait_for(pilot, lambda: bar(pilot).count == "1 of 4 (1 on another branch)", "the new count")
        assert reply.has_class("-found")


async def test_escape_closes_the_bar_and_leaves_the_selection(make_app, fake_model):
    async with searched(make_app, fake_model, "pear") as (app, pilot, screen, ids, other):
        await wait_for(pilot, lambda: screen.conversation_view.selected_id == ids[2], "the first match")
        await pilot.press("escape")
        await wait_for(pilot, lambda: not bar(pilot).display, "the bar to close")
        view = screen.conversation_view
        assert view.selected_id == ids[2]
        assert not view.query(".-found") and not reversed_words(app)
        assert screen.focused is screen.chat_input


async def test_enter_right_after_typing_finds_at_once(make_app, fake_model, monkeypatch):
    monkeypatch.setattr(find_bar, "PAUSE", 60.0)  # typing never pauses long enough here, however busy the machine
    session_id, ids, _ = write_chat(fake_model)
    app = make_app(startup=StartupRequest(session_id=session_id))
    async with app.run_test(size=SIZE) as pilot:
        screen = await settle(pilot)
        await pilot.press("alt+s")
        await wait_for(pilot, lambda: isinstance(screen.focused, Input), "the bar")
        await type_text(pilot, "fruit")
        await pilot.press("enter", "enter")  # before typing pauses: the first finds, the second goes on
        await wait_for(pilot, lambda: bar(pilot).count != "", "the count")
        assert bar(pilot).count == "2 of 3"
        assert screen.conversation_view.selected_id == ids[1]


async def test_with_no_chat_open_the_bar_says_so(make_app):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = await settle(pilot)
        assert screen.controller.session_id is None
        await pilot.press("alt+s")
        await type_text(pilot, "apple")
        await wait_for(pilot, lambda: bar(pilot).count != "", "the count")
        assert bar(pilot).count == "no chat is open"


async def test_the_palette_opens_the_find(make_app, fake_model):
    session_id, _, _ = write_chat(fake_model)
    app = make_app(startup=StartupRequest(session_id=session_id))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette), "the palette")
        await type_text(pilot, "find in")
        await wait_for(pilot, lambda: app.screen.query_one(CommandList).option_count > 0, "a palette hit")
        hits = app.screen.query_one(CommandList)
        assert "Find in the chat" in str(hits.get_option_at_index(0).prompt)
        await pilot.press("enter")
        await wait_for(pilot, lambda: bar(pilot).has_class("-open"), "the bar")


async def test_a_match_far_up_a_long_chat_is_brought_into_view_marked(make_app, fake_model):
    session_id, ids = write_long_chat(MESSAGES)
    app = make_app(startup=StartupRequest(session_id=session_id, model_path=fake_model))
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await open_long_chat(pilot)
        view = screen.conversation_view
        await open_and_type(pilot, "zebra")
        await wait_for(pilot, lambda: view.selected_id == ids[ZEBRA] and "zebra" in reversed_words(app),
                       "the match in view, marked")
        assert bar(pilot).count == "1 of 1"
        assert view.view_for(ids[ZEBRA]).has_class("-found-current")
        assert len(view.views) <= MOST_MOUNTED


def test_the_bar_with_its_matches(snap_compare, make_app, fake_model):
    session_id, _, _ = write_chat(fake_model)
    app = make_app(startup=StartupRequest(session_id=session_id))

    async def find(pilot):
        await quiet(pilot)
        await open_and_type(pilot, "apple")
        await pilot.press("enter")
        await wait_for(pilot, lambda: bar(pilot).count.startswith("2 of 3") and len(reversed_words(app)) >= 3,
                       "the second match, marked")
        bar(pilot).input.cursor_blink = False
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=find)
