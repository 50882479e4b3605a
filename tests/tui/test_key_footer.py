"""The footer composes its keys again when they change, and only then.

Textual's footer makes every key anew at each change of the screen's bindings, which every
move of the focus is; ``KeyFooter`` keeps its keys when the change leaves the same ones."""

from __future__ import annotations

from textual.widgets._footer import FooterKey

from tests.tui.helpers import ready, settle
from tui.widgets.key_footer import KeyFooter


async def test_the_keys_are_made_again_only_when_they_change(make_app):
    app = make_app()
    async with app.run_test(size=(140, 30)) as pilot:
        screen = await ready(pilot)
        footer = screen.query_one(KeyFooter)
        before = list(footer.query(FooterKey))
        shown = footer.keys_shown
        assert before and shown

        screen.refresh_bindings()  # the same keys: kept
        await settle(pilot)
        await pilot.pause()
        assert list(footer.query(FooterKey)) == before
        assert footer.keys_shown == shown

        screen.tree_panel.focus()  # the tree's own keys
        await settle(pilot)
        await pilot.pause()
        assert footer.keys_shown != shown
        assert all(key not in before for key in footer.query(FooterKey))

        screen.chat_input.focus()  # back: the input's keys again, drawn anew
        await settle(pilot)
        await pilot.pause()
        assert footer.keys_shown == shown
