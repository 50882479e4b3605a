"""The mouse on the chat: a click selects a message (so F2 edits the one clicked), and a
click on ``‹`` or ``›`` in a header pages that message's versions."""

from __future__ import annotations

from tests.tui.helpers import click_tree_line, ready, send, settle, shown_texts, wait_for
from tui.widgets.message_view import ROLE_NAMES, header_arrow


def test_the_arrows_of_a_header_are_found_by_column():
    left = len(ROLE_NAMES["assistant"]) + 2  # "Assistant  ‹ 1/2 ›"
    assert [header_arrow("assistant", (1, 2), x) for x in range(left - 1, left + 8)] == [0, -1, -1, 0, 0, 0, 1, 1, 0]
    assert header_arrow("assistant", (1, 1), left) == 0  # no versions: no arrows


async def test_a_click_selects_the_message_and_the_header_arrows_page(make_app):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "one")
        await send(pilot, "two")
        view = screen.conversation_view
        first_reply = view.views[1]
        await pilot.click(first_reply.body)
        await wait_for(pilot, lambda: view.selected_id == first_reply.message_id, "the clicked message selected")
        assert first_reply.has_class("-selected")
        await pilot.press("f2")  # edits the message clicked, not the last one
        assert screen.mode.kind == "edit" and screen.mode.target_id == first_reply.message_id
        await pilot.press("escape")

        await pilot.click(view.views[-1].body)
        await pilot.press("ctrl+r")  # a second version of the last reply
        await settle(pilot)
        last = view.views[-1]
        assert "‹ 2/2 ›" in last.header_plain
        second_text = shown_texts(screen)[-1]
        left = len(ROLE_NAMES["assistant"]) + 2
        await pilot.click(last.header, offset=(left, 0))
        await settle(pilot)
        assert "‹ 1/2 ›" in view.views[-1].header_plain and shown_texts(screen)[-1] != second_text
        await pilot.click(view.views[-1].header, offset=(left + 6, 0))
        await settle(pilot)
        assert "‹ 2/2 ›" in view.views[-1].header_plain and shown_texts(screen)[-1] == second_text


def node_line(tree, message_id: int) -> int:
    """The line of the tree that shows ``message_id``."""
    nodes = [tree.root]
    while nodes:
        node = nodes.pop()
        if node.data is not None and node.data.message_id == message_id:
            return node.line
        nodes.extend(node.children)
    raise AssertionError(f"message {message_id} is not in the tree")


async def test_a_click_in_the_tree_moves_its_cursor_and_a_second_click_goes_there(make_app):
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "one")
        await send(pilot, "two")
        first_reply = screen.controller.snapshot().path[1]
        await pilot.press("ctrl+t")
        tree = screen.tree_panel.message_tree
        await wait_for(pilot, lambda: tree.cursor_node is not None, "the tree drawn")
        line = node_line(tree, first_reply.id)
        await click_tree_line(pilot, screen.tree_panel, line)
        await wait_for(pilot, lambda: screen.tree_panel.cursor_message_id == first_reply.id, "the cursor moved")
        await settle(pilot)
        assert screen.conversation_view.selected_id is None and screen.tree_has_focus()  # nothing chosen yet
        await click_tree_line(pilot, screen.tree_panel, line)
        await wait_for(pilot, lambda: screen.conversation_view.selected_id == first_reply.id, "the message chosen")
        await settle(pilot)
