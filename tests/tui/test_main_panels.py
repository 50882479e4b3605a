"""The main screen with the tree panel and the session list: choosing switches the chat."""

from __future__ import annotations

from tests.tui.helpers import headers, ready, send, settle, shown_texts, wait_for


async def test_choosing_a_message_in_the_tree_switches_to_its_branch(make_app):
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "hello")
        first = shown_texts(screen)[1]
        await pilot.press("ctrl+r")
        await settle(pilot)
        assert shown_texts(screen)[1] != first
        await pilot.press("ctrl+t")
        tree = screen.tree_panel
        assert tree.has_class("-open") and tree.branch_count == 2
        assert app.focused is tree.message_tree
        await pilot.press("up", "enter")  # from the head (reply 2) up to reply 1
        await settle(pilot)
        assert shown_texts(screen)[1] == first
        assert "‹ 1/2 ›" in headers(screen)[1]
        assert screen.controller.snapshot().head.text == first[1]
        await pilot.press("ctrl+t")
        assert not tree.has_class("-open") and app.focused is screen.chat_input


async def test_choosing_a_session_in_the_list_opens_it(make_app):
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "the first chat")
        await pilot.press("ctrl+n")
        await settle(pilot)
        await send(pilot, "the second chat")
        await pilot.press("ctrl+l")
        sessions = screen.session_list
        assert sessions.has_class("-open") and len(sessions.session_ids) == 2
        await pilot.press("down", "enter")  # the older session
        await settle(pilot)
        await wait_for(pilot, lambda: shown_texts(screen)[:1] == [("user", "the first chat")], "the first chat")


async def test_copy_message_and_code_block(make_app, script):
    script.replies = ["Here:\n\n```python\nprint('hi')\n```\n\nDone."]
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await send(pilot, "show code")
        await pilot.press("f10")
        assert app.clipboard == "print('hi')\n"
        await pilot.press("ctrl+up", "ctrl+up", "f9")  # the question
        assert app.clipboard == "show code"


async def test_a_reply_that_cannot_fit_says_so_in_plain_words(make_app, script):
    script.n_ctx = 40
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "this question is far too long for a forty token context window")
        assert [role for role, _ in shown_texts(screen)] == ["user"]
        assert screen.conversation_view.reply_view is None
        messages = [n.message for n in app._notifications]
        assert any("context holds 40" in m for m in messages), messages
