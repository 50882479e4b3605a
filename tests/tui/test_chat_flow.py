"""Pilot tests of the tree gestures, pressing the real keys on a fake engine."""

from __future__ import annotations

from textual.color import Color

from tests.tui.helpers import headers, ready, send, settle, shown_texts, type_text, wait_for


async def test_three_turns(make_app):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        for question in ("first question", "second question", "third question"):
            await send(pilot, question)
        texts = shown_texts(screen)
        assert [role for role, _ in texts] == ["user", "assistant"] * 3
        assert [text for role, text in texts if role == "user"] == ["first question", "second question",
                                                                    "third question"]
        assert texts[-1][1] == "Reply 3 from the fake model: alpha beta gamma."
        assert len(screen.controller.snapshot().tree) == 6
        assert screen.chat_input.text == ""
        assert screen.status.text_of("model") == "Fake Model 1B · plain"
        assert screen.status.text_of("last").startswith("restored ")


async def test_fork_after_a_reply(make_app):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "one")
        await send(pilot, "two")
        await pilot.press("ctrl+up", "ctrl+up", "ctrl+up")  # reply 1
        first_reply = shown_texts(screen)[1]
        assert screen.conversation_view.selected_id == screen.conversation_view.views[1].message_id
        await pilot.press("ctrl+f")
        assert screen.mode.kind == "fork"
        await send(pilot, "another way")
        texts = shown_texts(screen)
        assert texts[:2] == [("user", "one"), first_reply]
        assert texts[2] == ("user", "another way")
        assert len(texts) == 4 and texts[3][0] == "assistant"
        assert "‹ 2/2 ›" in headers(screen)[2]
        assert len(screen.controller.snapshot().tree) == 6  # "two" and its reply are still there


async def test_edit_makes_a_sibling_and_answers_it(make_app):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "first")
        await send(pilot, "second")
        await pilot.press("ctrl+up", "ctrl+up", "ctrl+up", "ctrl+up")
        await pilot.press("f2")
        assert screen.chat_input.text == "first"
        assert screen.mode.kind == "edit"
        await type_text(pilot, " edited")
        await pilot.press("enter")
        await settle(pilot)
        texts = shown_texts(screen)
        assert texts[0] == ("user", "first edited")
        assert len(texts) == 2 and texts[1][0] == "assistant"
        assert "‹ 2/2 ›" in headers(screen)[0]
        tree = screen.controller.snapshot().tree
        original = tree.roots()[0]
        assert original.text == "first"
        assert tree.subtree_size(original.id) == 4  # the original branch stays whole


async def test_regenerate_and_page_between_versions(make_app):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "hello")
        first = shown_texts(screen)[1][1]
        await pilot.press("ctrl+r")
        await settle(pilot)
        second = shown_texts(screen)[1][1]
        assert first != second
        assert "‹ 2/2 ›" in headers(screen)[1]
        await pilot.press("alt+left")
        await settle(pilot)
        assert shown_texts(screen)[1][1] == first
        assert "‹ 1/2 ›" in headers(screen)[1]
        await pilot.press("alt+right")
        await settle(pilot)
        assert shown_texts(screen)[1][1] == second
        assert "‹ 2/2 ›" in headers(screen)[1]


async def test_rewind_moves_the_head_back_and_keeps_the_rest(make_app):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "one")
        await send(pilot, "two")
        await pilot.press("ctrl+up", "ctrl+up", "ctrl+up")
        await pilot.press("ctrl+b")
        await settle(pilot)
        assert [role for role, _ in shown_texts(screen)] == ["user", "assistant"]
        assert len(screen.controller.snapshot().tree) == 4
        await send(pilot, "three")
        texts = shown_texts(screen)
        assert texts[2] == ("user", "three") and "‹ 2/2 ›" in headers(screen)[2]


async def test_delete_asks_with_the_count_then_removes_the_branch(make_app):
    from textual.widgets import Static

    from tui.screens.dialogs import ConfirmScreen

    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "one")
        await send(pilot, "two")
        await pilot.press("ctrl+up", "ctrl+up")  # "two"
        await pilot.press("f8")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirm dialog")
        question = str(app.screen.query_one("#dialog-question", Static).render())
        assert "2 messages will be deleted" in question
        await pilot.press("n")  # changed my mind: nothing goes
        await wait_for(pilot, lambda: not isinstance(app.screen, ConfirmScreen), "the dialog to close")
        assert len(screen.controller.snapshot().tree) == 4
        await pilot.press("f8")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirm dialog")
        await pilot.press("y")
        await settle(pilot)
        assert len(screen.controller.snapshot().tree) == 2
        assert [role for role, _ in shown_texts(screen)] == ["user", "assistant"]
        assert shown_texts(screen)[0] == ("user", "one")


async def test_delete_in_the_tree_acts_on_the_tree_node_and_names_it(make_app):
    """F8 with the tree focused deletes the node under its cursor, not the chat's selection."""
    from textual.widgets import Static

    from tui.screens.dialogs import ConfirmScreen

    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "one")
        await send(pilot, "two")
        await pilot.press("ctrl+up", "ctrl+up", "ctrl+up")  # the first reply, in the chat
        await pilot.press("ctrl+t")
        await wait_for(pilot, lambda: screen.tree_has_focus(), "the tree to take the focus")
        last = screen.controller.snapshot().path[-1]
        assert screen.tree_panel.cursor_message_id == last.id  # the leaf: the second reply
        await pilot.press("f8")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirm dialog")
        question = str(app.screen.query_one("#dialog-question", Static).render())
        assert question == ("Delete the reply “Reply 2 from the fake model: alpha beta…”? 1 message will be deleted. "
                            "^z brings it back.")
        await pilot.press("y")
        await settle(pilot)
        assert last.id not in screen.controller.snapshot().tree
        assert len(screen.controller.snapshot().tree) == 3


async def test_the_selected_message_is_highlighted_and_the_cursor_walks_the_branch(make_app):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "one")
        views = screen.conversation_view.views
        await pilot.press("ctrl+up")
        assert [v.has_class("-selected") for v in views] == [False, True]
        assert views[1].styles.border_left[1] == Color.parse(app.get_css_variables()["accent"])
        assert views[0].styles.border_left[1] != views[1].styles.border_left[1]
        await pilot.press("alt+up", "ctrl+up")  # stays on the first message
        assert [v.has_class("-selected") for v in views] == [True, False]
        await pilot.press("ctrl+down", "ctrl+down")  # past the last one: no selection
        assert screen.conversation_view.selected_id is None
        assert not any(v.has_class("-selected") for v in views)


async def test_a_gesture_the_core_refuses_is_reported_and_the_app_goes_on(make_app, monkeypatch):
    from sessions.errors import ControllerError

    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "hello")

        def refuse(message_id):
            raise ControllerError("the reply cannot be regenerated right now")

        monkeypatch.setattr(screen.controller, "regenerate", refuse)
        await pilot.press("ctrl+r")
        await settle(pilot)
        assert any("cannot be regenerated" in n.message for n in app._notifications)
        assert app.is_running and len(shown_texts(screen)) == 2
        await send(pilot, "still working")
        assert shown_texts(screen)[2] == ("user", "still working")


async def test_after_a_fork_the_status_bar_counts_the_tokens_kept_live(make_app):
    import re

    app = make_app()
    async with app.run_test(size=(140, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "one")
        await send(pilot, "two")
        await pilot.press("ctrl+up", "ctrl+up", "ctrl+up", "ctrl+f")  # fork after the first reply
        await send(pilot, "another way")
        found = re.match(r"restored [\d,]+ tokens, evaluated [\d,]+, kept ([\d,]+)", screen.status.text_of("last"))
        assert found, screen.status.text_of("last")
        assert int(found.group(1).replace(",", "")) > 0  # the first turn was used as it was, live


async def test_a_rewind_to_your_message_says_the_next_send_joins_it_and_esc_takes_it_back(make_app):
    """The walk-through's steps: Ctrl+B on a user message, then text: it was joined to that
    message without a word, and Esc did not bring the branch back."""
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "one")
        await send(pilot, "two")
        before = shown_texts(screen)
        await pilot.press("ctrl+up", "ctrl+up")  # "two"
        await pilot.press("ctrl+b")
        await settle(pilot)
        assert shown_texts(screen) == before[:3]
        assert "joins it as a new version" in screen.chat_input.border_title
        assert "Esc goes back" in screen.chat_input.border_title
        await pilot.press("escape")
        await wait_for(pilot, lambda: shown_texts(screen) == before, "the branch as it was")
        await settle(pilot)
        assert screen.mode.kind == "send" and screen.chat_input.border_title is None
