"""After every gesture the chat shows the branch's messages in the branch's order.

The chat is long enough for only part of it to have views (``message_window``): each
gesture mounts, removes or adopts views at one end of that part, and a view mounted in the
wrong place draws a message above the one it answers (a reply adopted after a regenerate
stayed below the messages sent after it). Each test makes one gesture, then compares the
views as they are drawn, top to bottom, with the branch the core holds; most make a second
one after it, since a view left out of place shows only once more messages follow it.
"""

from __future__ import annotations

import pytest

from sessions.store import SessionStore
from sessions.store.records import NewMessage
from sessions.tree import GenerationStats, StopReason
from tests.tui.helpers import main_screen, settle, type_text, wait_for
from tests.tui.test_find import open_and_type
from tests.tui.test_long_chat import open_long_chat
from tui.screens.chat_screen import ChatScreen
from tui.screens.cut_point import CutPoint
from tui.screens.dialogs import ConfirmScreen, TextPrompt
from tui.startup import StartupRequest
from tui.widgets.message_view import MessageView
from tui.widgets.message_window import WHOLE_UP_TO

SIZE = WHOLE_UP_TO + 12
"""Messages on the branch shown: more than a branch mounted whole."""
FORK_AT = SIZE - 4
"""The user message that has a second version (with its own reply): another branch."""
OTHER = "question asked another way, about a walrus"


def text_of(index: int) -> str:
    if index % 2 == 0:
        return f"question {index}"
    return f"answer {index}, which goes on\n\n- a point\n- another point"


def write_chat() -> tuple[int, list[int], int]:
    """The chat: its id, the ids of the branch shown, and the id of ``OTHER``. Its last reply
    was written by hand (Ctrl+G goes on from its text)."""
    store = SessionStore.open()
    try:
        session = store.create_session(title="ordered")
        news = []
        for i in range(SIZE):
            role = "user" if i % 2 == 0 else "assistant"
            stats = GenerationStats(tokens_generated=9, stop_reason=StopReason.EOG) \
                if role == "assistant" and i < SIZE - 1 else None
            news.append(NewMessage(parent=None if i == 0 else i - 1, role=role, text=text_of(i), stats=stats))
        news.append(NewMessage(parent=FORK_AT - 1, role="user", text=OTHER))
        news.append(NewMessage(parent=SIZE, role="assistant", text="the walrus answer",
                               stats=GenerationStats(tokens_generated=3, stop_reason=StopReason.EOG)))
        ids = store.add_messages(session.id, news)
        store.set_active_leaf(session.id, ids[SIZE - 1])
        return session.id, ids[:SIZE], ids[SIZE]
    finally:
        store.close()


def drawn(screen: ChatScreen) -> list[MessageView]:
    """The message views as they are drawn, top to bottom (the DOM's order is the layout's)."""
    return list(screen.conversation_view.query_children(MessageView))


def assert_in_order(screen: ChatScreen, *, at_end: bool = True) -> None:
    """The views drawn are a stretch of the branch, in its order, between the two spacers
    that stand for the rest; with ``at_end``, the stretch ends with the branch."""
    snapshot = screen.controller.snapshot()
    path = [m.id for m in snapshot.path]
    views = drawn(screen)
    ids = [view.message_id for view in views]
    assert None not in ids, "a reply view is left over"
    assert ids, "nothing is drawn"
    first = path.index(ids[0])
    assert ids == path[first:first + len(ids)], (
        f"drawn {[snapshot.tree.get(i).text[:12] for i in ids]}, the branch {[m.text[:12] for m in snapshot.path]}")
    view = screen.conversation_view
    children = list(view.children)
    above, below = children[0], children[-1]
    assert not isinstance(above, MessageView) and not isinstance(below, MessageView)
    assert sum(isinstance(child, MessageView) for child in children) == len(children) - 2
    assert view.window == (first, first + len(ids))
    if at_end:
        assert ids[-1] == path[-1]
    assert [v.message.text for v in views if v.message] == [snapshot.tree.get(i).text for i in ids]


@pytest.fixture
def chat(script):
    script.n_ctx = 1 << 20  # the whole chat fits: one token per byte
    return write_chat()


async def opened(pilot) -> ChatScreen:
    screen = await open_long_chat(pilot, f"answer {SIZE - 1}")
    await settle(pilot)
    assert_in_order(screen)
    return screen


async def send(pilot, text: str) -> None:
    screen = main_screen(pilot)
    screen.chat_input.focus()
    await type_text(pilot, text)
    await pilot.press("enter")
    await wait_for(pilot, lambda: screen.controller.snapshot().head.role == "assistant"
                   and screen.controller.snapshot().head.parent_id is not None
                   and screen.controller.snapshot().tree.get(screen.controller.snapshot().head.parent_id).text == text,
                   "the reply")
    await settle(pilot)


async def select(pilot, message_id: int) -> None:
    """Select ``message_id`` with the keys (Ctrl+Up from the end, as a user would)."""
    screen = main_screen(pilot)
    path = [m.id for m in screen.controller.snapshot().path]
    screen.conversation_view.select(None)
    await pilot.press(*["ctrl+up"] * (len(path) - path.index(message_id)))
    assert screen.conversation_view.selected_id == message_id


def start(make_app, fake_model, chat):
    session_id, _ids, _other = chat
    return make_app(startup=StartupRequest(session_id=session_id, model_path=fake_model))


async def test_send_then_send_again(make_app, fake_model, chat):
    app = start(make_app, fake_model, chat)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await opened(pilot)
        await send(pilot, "Say hi.")
        assert_in_order(screen)
        await send(pilot, "Say bye.")
        assert_in_order(screen)


async def test_regenerate_then_send(make_app, fake_model, chat):
    """The walk-through's steps: send, Ctrl+R, send."""
    app = start(make_app, fake_model, chat)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await opened(pilot)
        await send(pilot, "Say hi.")
        reply = screen.controller.snapshot().head
        await pilot.press("ctrl+up", "ctrl+r")
        await wait_for(pilot, lambda: screen.controller.snapshot().head.id != reply.id, "the new version")
        await settle(pilot)
        assert_in_order(screen)
        await send(pilot, "Say bye.")
        assert_in_order(screen)


async def test_several_versions_then_send(make_app, fake_model, chat):
    app = start(make_app, fake_model, chat)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await opened(pilot)
        screen.controller.set_sampling(screen.controller.sampling.with_(temperature=0.8))
        await send(pilot, "Say hi.")
        question = screen.controller.snapshot().head.parent_id
        await pilot.press("ctrl+up", "alt+r")
        await wait_for(pilot, lambda: isinstance(app.screen, TextPrompt), "the count asked for")
        await pilot.press("ctrl+a", "ctrl+k", "2", "enter")
        await wait_for(pilot, lambda: len(screen.controller.snapshot().tree.children(question)) == 3, "two versions")
        await settle(pilot)
        assert_in_order(screen)
        await send(pilot, "Say bye.")
        assert_in_order(screen)


async def test_edit_a_user_message_then_send(make_app, fake_model, chat):
    _session, ids, _other = chat
    app = start(make_app, fake_model, chat)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await opened(pilot)
        await select(pilot, ids[-6])
        await pilot.press("f2", "ctrl+a", "ctrl+k")
        await send(pilot, "question asked again")
        assert_in_order(screen)
        await send(pilot, "and then")
        assert_in_order(screen)


async def test_continue_from_a_place_then_send(make_app, fake_model, chat):
    _session, ids, _other = chat
    app = start(make_app, fake_model, chat)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await opened(pilot)
        await send(pilot, "Say hi.")  # a reply the model wrote: one it can go on from inside
        reply = screen.controller.snapshot().head
        await select(pilot, reply.id)
        await pilot.press("alt+g")
        await wait_for(pilot, lambda: isinstance(app.screen, CutPoint), "the place to be chosen")
        await pilot.press("home", "right", "right", "enter")
        await wait_for(pilot, lambda: screen.controller.snapshot().head.id != reply.id, "the new version")
        await settle(pilot)
        assert_in_order(screen)
        await send(pilot, "Say bye.")
        assert_in_order(screen)


async def test_continue_a_reply_then_send(make_app, fake_model, chat):
    _session, ids, _other = chat
    app = start(make_app, fake_model, chat)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await opened(pilot)
        await select(pilot, ids[-1])
        await pilot.press("ctrl+g")
        await wait_for(pilot, lambda: screen.controller.snapshot().head.id != ids[-1], "the continuation")
        await settle(pilot)
        assert_in_order(screen)
        await send(pilot, "Say bye.")
        assert_in_order(screen)


async def test_fork_then_send(make_app, fake_model, chat):
    _session, ids, _other = chat
    app = start(make_app, fake_model, chat)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await opened(pilot)
        await select(pilot, ids[-5])
        await pilot.press("ctrl+f")
        await send(pilot, "a fork")
        assert_in_order(screen)
        await send(pilot, "Say bye.")
        assert_in_order(screen)


async def test_rewind_then_send(make_app, fake_model, chat):
    _session, ids, _other = chat
    app = start(make_app, fake_model, chat)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await opened(pilot)
        await select(pilot, ids[-5])
        await pilot.press("ctrl+b")
        await wait_for(pilot, lambda: screen.controller.snapshot().head.id == ids[-5], "the rewind")
        await settle(pilot)
        assert_in_order(screen)
        await send(pilot, "Say bye.")
        assert_in_order(screen)


async def test_a_switch_in_the_tree_then_back(make_app, fake_model, chat):
    _session, ids, other = chat
    app = start(make_app, fake_model, chat)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await opened(pilot)
        await send(pilot, "Say hi.")  # a reply adopted at the end, then the branch changes under it
        await pilot.press("ctrl+t")
        panel = screen.tree_panel
        await wait_for(pilot, lambda: panel.cursor_message_id is not None, "the tree's cursor")
        while panel.cursor_message_id != other:
            await pilot.press("down")
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen.controller.snapshot().message(other) in screen.controller.snapshot().path,
                       "the switch")
        await settle(pilot)
        assert_in_order(screen, at_end=False)  # the branch's end is shown, or the message chosen
        await pilot.press("ctrl+t", "ctrl+t")
        while panel.cursor_message_id != ids[FORK_AT]:
            await pilot.press("up")
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen.controller.snapshot().message(ids[FORK_AT])
                       in screen.controller.snapshot().path, "the switch back")
        await settle(pilot)
        assert_in_order(screen, at_end=False)
        await send(pilot, "Say bye.")
        assert_in_order(screen)


async def test_paging_versions_then_send(make_app, fake_model, chat):
    _session, ids, other = chat
    app = start(make_app, fake_model, chat)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await opened(pilot)
        await select(pilot, ids[FORK_AT])
        await pilot.press("alt+right")
        await wait_for(pilot, lambda: screen.controller.snapshot().head.parent_id == other, "the other version")
        await settle(pilot)
        assert_in_order(screen, at_end=False)
        await send(pilot, "Say bye.")
        assert_in_order(screen)


async def test_delete_then_undo_then_send(make_app, fake_model, chat):
    _session, ids, _other = chat
    app = start(make_app, fake_model, chat)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await opened(pilot)
        await send(pilot, "Say hi.")
        await select(pilot, ids[-3])
        await pilot.press("f8")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
        await pilot.press("y")
        await wait_for(pilot, lambda: ids[-3] not in screen.controller.snapshot().tree, "the deletion")
        await settle(pilot)
        assert_in_order(screen)
        screen.chat_input.focus()
        await pilot.press("ctrl+z")
        await wait_for(pilot, lambda: ids[-3] in screen.controller.snapshot().tree, "the undo")
        await settle(pilot)
        assert_in_order(screen)
        await send(pilot, "Say bye.")
        assert_in_order(screen)


async def test_a_find_that_jumps_to_another_branch_then_send(make_app, fake_model, chat):
    _session, _ids, other = chat
    app = start(make_app, fake_model, chat)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await opened(pilot)
        await send(pilot, "Say hi.")
        await open_and_type(pilot, "walrus")
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen.controller.snapshot().head.id in (other, other + 1), "the jump")
        await settle(pilot)
        assert_in_order(screen, at_end=False)
        await pilot.press("escape")
        await send(pilot, "Say bye.")
        assert_in_order(screen)
