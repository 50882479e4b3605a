"""The selected message's row of clickable actions (issue 34): only on the selected message,
each click doing what its key does, not in the way of the keyboard, at 50 columns too, and
kept when the conversation view unmounts and mounts the message again while scrolling."""

from __future__ import annotations

from textual.errors import NoWidget

from sessions.sampling import SamplingSettings
from sessions.stop_reason import StopReason
from sessions.store import SessionStore
from sessions.tree import GenerationStats
from tests.tui.helpers import headers, ready, screen_text, send, settle, shown_texts, wait_for
from tests.tui.test_long_chat import MESSAGES, long_chat, open_long_chat  # noqa: F401  (a fixture)
from tests.tui.test_main_snapshots import SIZE, quiet
from tui.screens import chat_rules
from tui.screens.dialogs import ConfirmScreen
from tui.startup import StartupRequest
from tui.widgets.message_actions import ActionLink, MessageActions
from tui.widgets.message_view import ROLE_NAMES, MessageView

NARROW = (50, 30)


def actions_of(view: MessageView) -> dict[str, ActionLink]:
    """The actions shown on ``view``, by binding id (none: no row)."""
    return {link.binding_id: link for link in view.query(ActionLink)}


def rows(screen) -> list[int | None]:
    """The message id of every view that has a row of actions."""
    return [view.message_id for view in screen.conversation_view.views if view.query(MessageActions)]


async def select(pilot, view: MessageView) -> None:
    conversation = pilot.app.screen.conversation_view
    await pilot.click(view.header, offset=(0, 0))
    await wait_for(pilot, lambda: conversation.selected_id == view.message_id and actions_of(view),
                   "the clicked message selected, with its actions")


async def click(pilot, view: MessageView, binding_id: str) -> None:
    """Click an action once it is laid out where the pointer goes (a new row of actions
    moves the messages under it as it is laid out)."""
    link = actions_of(view)[binding_id]

    def under_the_pointer() -> bool:
        if not link.region:
            return False
        try:
            return pilot.app.get_widget_at(*link.region.offset)[0] is link
        except NoWidget:  # nothing there yet
            return False

    await wait_for(pilot, under_the_pointer, f"the {binding_id} action laid out")
    assert await pilot.click(link), f"the {binding_id} action could not be clicked"


def write_chat(model_path, *replies: tuple[str, str], question: str = "Roses are red\nviolets are blue") -> int:
    """A question and its replies as ``(text, stop reason)``, the last one shown, at fixed times."""
    with SessionStore.open() as store:
        session = store.create_session(model_path=str(model_path), model_fingerprint="fake-" + model_path.name,
                                       created_at=0.0)
        ask = store.add_message(session.id, None, "user", question, created_at=1.0)
        last = ask
        for index, (text, reason) in enumerate(replies):
            last = store.add_message(session.id, ask.id, "assistant", text, created_at=2.0 + index,
                                     stats=GenerationStats(tokens_generated=9, stop_reason=reason))
        store.set_active_leaf(session.id, last.id)
        return session.id


def test_each_role_is_offered_the_actions_that_mean_something_for_it():
    from sessions.tree import Message

    def message(role: str, reason: str | None = None) -> Message:
        stats = GenerationStats(tokens_generated=3, stop_reason=reason) if reason else None
        return Message(id=1, session_id=1, parent_id=None, role=role, text="x", created_at=0.0, stats=stats)

    assert chat_rules.message_actions(message("user")) == ("copy-message", "edit", "regenerate", "delete-branch")
    assert chat_rules.message_actions(message("assistant", "eog")) == (
        "copy-message", "edit", "regenerate", "delete-branch")
    for reason in (StopReason.LENGTH, StopReason.CANCELLED):
        assert "continue-reply" in chat_rules.message_actions(message("assistant", reason))
    assert "continue-reply" not in chat_rules.message_actions(message("assistant", StopReason.CONTEXT_FULL))
    assert chat_rules.message_actions(message("system")) == ("copy-message", "delete-branch")


async def test_only_the_selected_message_shows_its_actions(make_app):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "one")
        await send(pilot, "two")
        views = screen.conversation_view.views
        assert rows(screen) == []  # nothing selected: a calm chat
        await select(pilot, views[1])
        assert rows(screen) == [views[1].message_id]
        assert list(actions_of(views[1])) == ["copy-message", "edit", "regenerate", "delete-branch"]
        await select(pilot, views[2])
        await wait_for(pilot, lambda: rows(screen) == [views[2].message_id], "the actions moved")
        assert [str(link.content) for link in actions_of(views[2]).values()] == [
            "copy", "edit", "answer again", "delete"]
        await pilot.press("escape")  # no selection: no row
        await wait_for(pilot, lambda: rows(screen) == [], "the actions gone")


async def test_the_tooltips_name_the_keys_and_the_actions_take_no_focus(make_app):
    from sessions.config import Config

    app = make_app(config=Config(keys={"regenerate": "f11"}))
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "one")
        await send(pilot, "two")
        chain = list(screen.focus_chain)
        reply = screen.conversation_view.views[-1]
        await select(pilot, reply)
        links = actions_of(reply)
        tips = {binding_id: str(link.tooltip) for binding_id, link in links.items()}
        assert tips["copy-message"].endswith("(f9)") and tips["edit"].endswith("(f2)")
        assert tips["regenerate"].endswith("(f11)")  # the key the user chose, not the default
        assert tips["delete-branch"].endswith("(f8)")
        assert not any(link.focusable for link in links.values())
        assert list(screen.focus_chain) == chain  # Tab goes where it went


async def test_copy_puts_the_message_in_the_clipboard(make_app):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "first question")
        await send(pilot, "second question")
        question = screen.conversation_view.views[0]
        await select(pilot, question)
        await click(pilot, question, "copy-message")
        await wait_for(pilot, lambda: app.clipboard == "first question", "the message copied")


async def test_edit_puts_the_message_in_the_input_to_edit(make_app):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "first question")
        await send(pilot, "second question")
        for view in screen.conversation_view.views[:2]:  # a message of the user, then a reply
            await select(pilot, view)
            await click(pilot, view, "edit")
            await wait_for(pilot, lambda v=view: screen.mode.kind == "edit" and screen.mode.target_id == v.message_id,
                           "edit mode on the message clicked")
            assert screen.chat_input.text == view.message.text
            await pilot.press("escape")
            await wait_for(pilot, lambda: screen.mode.kind == "send", "the edit left")


async def test_regenerate_writes_a_new_version_and_answer_again_too(make_app):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "one")
        reply = screen.conversation_view.views[-1]
        await select(pilot, reply)
        await click(pilot, reply, "regenerate")
        await settle(pilot)
        await wait_for(pilot, lambda: "‹ 2/2 ›" in headers(screen)[-1], "a second version of the reply")
        assert shown_texts(screen)[-1][1].startswith("Reply 2 from the fake model")
        question = screen.conversation_view.views[0]
        await select(pilot, question)
        await click(pilot, question, "regenerate")  # "answer again"
        await settle(pilot)
        await wait_for(pilot, lambda: "‹ 3/3 ›" in headers(screen)[-1], "a third answer")
        assert shown_texts(screen)[-1][1].startswith("Reply 3 from the fake model")


async def test_continue_goes_on_with_a_reply_cut_at_its_limit(make_app, script):
    script.replies = ["One two three four five six seven eight nine ten.", "eleven twelve."]
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        screen.controller.set_sampling(SamplingSettings(temperature=0.0, max_tokens=20))
        await send(pilot, "count")
        cut = screen.controller.snapshot().head
        assert cut.stats.stop_reason == StopReason.LENGTH
        reply = screen.conversation_view.views[-1]
        await select(pilot, reply)
        assert "continue-reply" in actions_of(reply)
        await click(pilot, reply, "continue-reply")
        await settle(pilot)
        await wait_for(pilot, lambda: "‹ 2/2 ›" in headers(screen)[-1], "the continued version")
        longer = screen.controller.snapshot().head
        assert longer.id != cut.id and longer.text.startswith(cut.text) and len(longer.text) > len(cut.text)


async def test_delete_asks_the_same_question_as_its_key(make_app):
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "one")
        await send(pilot, "two")
        second = screen.conversation_view.views[2]
        question = chat_rules.delete_question(second.message, 2)
        await pilot.press("ctrl+t")  # the tree has the focus, its cursor elsewhere: the click still names the message
        await wait_for(pilot, lambda: screen.tree_has_focus(), "the tree focused")
        await select(pilot, second)
        await click(pilot, second, "delete-branch")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
        assert str(app.screen.query_one("#dialog-question").content) == f"{question} ^z brings it back."
        await pilot.press("escape")  # no: nothing goes
        await wait_for(pilot, lambda: not isinstance(app.screen, ConfirmScreen), "the question closed")
        assert len(screen.controller.snapshot().path) == 4
        await click(pilot, second, "delete-branch")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question again")
        await pilot.press("y")
        await settle(pilot)
        await wait_for(pilot, lambda: [m.text for m in screen.controller.snapshot().path] == [
            "one", shown_texts(screen)[1][1]], "the message and its reply deleted")


async def test_the_arrows_page_the_selected_message_and_its_actions_follow(make_app):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "one")
        await pilot.press("ctrl+r")
        await settle(pilot)
        view = screen.conversation_view
        await select(pilot, view.views[-1])
        assert "alt+←" in str(view.views[-1].header.tooltip)
        left = len(ROLE_NAMES["assistant"]) + 2
        await pilot.click(view.views[-1].header, offset=(left, 0))
        await settle(pilot)
        await wait_for(pilot, lambda: "‹ 1/2 ›" in view.views[-1].header_plain, "the first version")
        first = view.views[-1]
        assert view.selected_id == first.message_id
        await wait_for(pilot, lambda: rows(screen) == [first.message_id], "the actions on the version shown")
        await pilot.click(first.header, offset=(left + 6, 0))
        await settle(pilot)
        await wait_for(pilot, lambda: "‹ 2/2 ›" in view.views[-1].header_plain, "the second version")
        await wait_for(pilot, lambda: rows(screen) == [view.views[-1].message_id], "the actions followed")


async def test_narrow_chats_show_every_action_whole_and_narrower_ones_a_compact_form(make_app):
    app = make_app()
    async with app.run_test(size=NARROW) as pilot:
        screen = await ready(pilot)
        screen.controller.set_sampling(SamplingSettings(temperature=0.0, max_tokens=20))
        await send(pilot, "count")  # cut at its limit: the longest row, with continue
        reply = screen.conversation_view.views[-1]
        await select(pilot, reply)
        row = reply.query_one(MessageActions)
        links = actions_of(reply)
        assert len(links) == 5 and not row.has_class("-compact")
        assert all(row.region.contains_region(link.region) for link in links.values())  # every one shown whole
        await pilot.resize_terminal(40, 30)
        await wait_for(pilot, lambda: row.has_class("-compact"), "the compact words")
        await pilot.pause()
        assert [str(link.content) for link in links.values()] == ["copy", "edit", "again", "more", "del"]
        assert all(row.region.contains_region(link.region) for link in links.values())
        await click(pilot, reply, "copy-message")
        await wait_for(pilot, lambda: app.clipboard == reply.message.text, "copied from the compact row")
        await pilot.resize_terminal(*NARROW)
        await wait_for(pilot, lambda: not row.has_class("-compact"), "the full words again")
        assert str(links["regenerate"].content) == "regenerate"


async def test_the_actions_survive_scrolling_the_selected_message_away_and_back(make_app, fake_model, long_chat):  # noqa: F811
    session_id, ids = long_chat
    app = make_app(startup=StartupRequest(session_id=session_id, model_path=fake_model))
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await open_long_chat(pilot)
        view = screen.conversation_view
        reply = view.views[-1]
        await select(pilot, reply)
        view.scroll_home(animate=False)
        await wait_for(pilot, lambda: view.view_for(ids[-1]) is None and view.window_settled,
                       "the selected message unmounted")
        view.scroll_end(animate=False)
        await wait_for(pilot, lambda: view.view_for(ids[-1]) is not None and view.window_settled,
                       "the selected message mounted again")
        again = view.view_for(ids[-1])
        assert again is not reply and again.has_class("-selected")
        await wait_for(pilot, lambda: rows(screen) == [ids[-1]], "its actions back")
        await wait_for(pilot, lambda: any("copy  edit  regenerate  delete" in line for line in screen_text(app)),
                       "the actions drawn")
        await click(pilot, again, "copy-message")
        await wait_for(pilot, lambda: app.clipboard == again.message.text, "copied after the scroll")
        assert len(ids) == MESSAGES


def selected_reply_chat(model_path) -> int:
    return write_chat(model_path, ("First answer.", "eog"),
                      ("Sugar is sweet,\nand so are you, said the reply before it was cut", "length"))


async def select_the_reply(pilot) -> None:
    await quiet(pilot)
    await pilot.press("ctrl+up")
    screen = pilot.app.screen
    await wait_for(pilot, lambda: rows(screen) == [screen.conversation_view.views[-1].message_id], "the actions")
    await pilot.pause()


def test_a_selected_reply_with_its_actions(snap_compare, make_app, fake_model):
    app = make_app(startup=StartupRequest(session_id=selected_reply_chat(fake_model)))
    assert snap_compare(app, terminal_size=SIZE, run_before=select_the_reply)


def test_a_selected_reply_with_its_actions_at_50_columns(snap_compare, make_app, fake_model):
    app = make_app(startup=StartupRequest(session_id=selected_reply_chat(fake_model)))
    assert snap_compare(app, terminal_size=NARROW, run_before=select_the_reply)


async def test_a_message_selected_at_the_end_of_the_chat_shows_its_header_and_actions(make_app):
    app = make_app()
    async with app.run_test(size=(100, 16)) as pilot:
        screen = await ready(pilot)
        for words in ("one", "two", "three"):
            await send(pilot, words)
        view = screen.conversation_view
        await pilot.press("ctrl+up", "ctrl+up")  # the last question, just above the last reply
        question = view.views[-2]
        await wait_for(pilot, lambda: question.query(MessageActions), "its actions")
        await wait_for(pilot, lambda: view.region.contains_region(question.header.region)
                       and view.region.contains_region(question.query_one(MessageActions).region),
                       "its header and its actions on screen")
