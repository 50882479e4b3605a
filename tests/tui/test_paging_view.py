"""Paging a message's versions keeps that message's header on screen, however long the
versions are: the view does not jump to the end of the branch shown."""

from __future__ import annotations

from tests.tui.helpers import ready, screen_text, send, settle, wait_for


def long_reply(name: str) -> str:
    return "\n".join(f"{name} line {i}" for i in range(40))


async def test_paging_a_long_reply_keeps_its_header_in_view(make_app, script):
    script.replies = [long_reply("first"), long_reply("second")]
    app = make_app()
    async with app.run_test(size=(80, 20)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "tell me")
        await pilot.press("ctrl+r")  # a second version of the reply
        await settle(pilot)
        assert "‹ 2/2 ›" in screen.conversation_view.views[-1].header_plain
        await pilot.press("alt+left")
        await settle(pilot)
        assert "‹ 1/2 ›" in screen.conversation_view.views[-1].header_plain
        await wait_for(pilot, lambda: any("first line 0" in line for line in screen_text(app)), "the version's start")
        assert any("‹ 1/2 ›" in line for line in screen_text(app))
        await pilot.press("alt+right")
        await settle(pilot)
        await wait_for(pilot, lambda: any("second line 0" in line for line in screen_text(app)), "the version's start")
        assert any("‹ 2/2 ›" in line for line in screen_text(app))
