"""F2 on a reply, then Ctrl+G: the reply as edited is a version of its own, and the model
goes on from its text in a third one; both earlier versions stay."""

from __future__ import annotations

from tests.tui.helpers import headers, ready, send, settle, type_text, wait_for


async def test_an_edited_reply_goes_on_from_its_text(make_app):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "tell me something")
        reply = screen.controller.snapshot().head
        await pilot.press("ctrl+up", "f2")  # the reply, into the input
        assert screen.mode.kind == "edit" and screen.chat_input.text == reply.text
        await pilot.press("ctrl+a", "ctrl+k")  # the whole line away
        await type_text(pilot, "Once upon a time")
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen.controller.snapshot().head.text == "Once upon a time", "the edit")
        edited = screen.controller.snapshot().head
        assert edited.stats is None  # written by hand
        await pilot.press("ctrl+up", "ctrl+g")
        await wait_for(pilot, lambda: screen.controller.snapshot().head.id != edited.id, "the continuation")
        await settle(pilot)
        snapshot = screen.controller.snapshot()
        longer = snapshot.head
        assert longer.parent_id == reply.parent_id and longer.text.startswith("Once upon a time")
        assert len(longer.text) > len("Once upon a time")
        assert snapshot.tree.get(reply.id).text == reply.text and snapshot.tree.get(edited.id).text == edited.text
        assert "‹ 3/3 ›" in headers(screen)[-1]
