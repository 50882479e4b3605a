"""Alt+G: choose a place inside a reply, and a new version keeps the reply up to there and
goes on; the reply itself stays."""

from __future__ import annotations

from tests.tui.helpers import ready, send, settle, wait_for
from tui.screens.cut_point import CutPoint


async def test_a_new_version_goes_on_from_the_place_chosen(make_app):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "tell me something")
        reply = screen.controller.snapshot().head
        await pilot.press("ctrl+up")  # the reply
        await pilot.press("alt+g")
        await wait_for(pilot, lambda: isinstance(app.screen, CutPoint), "the place to be chosen")
        await pilot.press("home")  # the start of the reply's (last) line
        for _ in range(6):
            await pilot.press("right")
        chars = app.screen.chosen
        assert chars == reply.text.rfind("\n") + 1 + 6
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen.controller.snapshot().head.id != reply.id, "the new version")
        await settle(pilot)
        snapshot = screen.controller.snapshot()
        new = snapshot.head
        assert new.parent_id == reply.parent_id and snapshot.tree.get(reply.id).text == reply.text
        assert new.text.startswith(reply.text[:chars]) and len(new.text) > chars  # its start, then more


async def test_the_end_of_the_reply_is_not_a_place_inside_it(make_app):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await send(pilot, "tell me something")
        await pilot.press("ctrl+up", "alt+g")
        await wait_for(pilot, lambda: isinstance(app.screen, CutPoint), "the place to be chosen")
        await pilot.press("enter")  # the cursor starts at the end
        await settle(pilot)
        assert isinstance(app.screen, CutPoint)
        assert "continue it instead" in str(app.screen.query_one("#dialog-error").render())
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, CutPoint), "the dialog to close")


async def test_with_no_reply_selected_the_dialog_says_which_reply_it_is_about(make_app):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await send(pilot, "tell me something")
        await pilot.press("alt+g")  # nothing selected: the last reply
        await wait_for(pilot, lambda: isinstance(app.screen, CutPoint), "the place to be chosen")
        question = str(app.screen.query_one("#dialog-question").render())
        assert question.startswith("The last reply (select another with ^↑).")


async def test_a_reply_written_by_hand_is_refused_with_a_hint_before_the_dialog(make_app):
    from tests.tui.helpers import type_text

    app = make_app()
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        screen = await ready(pilot)
        await send(pilot, "tell me something")
        await pilot.press("ctrl+up", "f2", "ctrl+a", "ctrl+k")
        await type_text(pilot, "Once upon a time")
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen.controller.snapshot().head.text == "Once upon a time", "the edit")
        await settle(pilot)
        await pilot.press("ctrl+up", "alt+g")
        await wait_for(pilot, lambda: any("written or edited by hand" in n.message for n in app._notifications),
                       "the hint")
        assert not isinstance(app.screen, CutPoint)
        assert any("^g goes on from its end" in n.message for n in app._notifications)
