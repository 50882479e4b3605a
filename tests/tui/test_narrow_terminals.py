"""Narrow terminals and a panel the user sizes: nothing is cut without "…", the tree panel
widens and narrows with its keys and a drag of its edge, and keeps the width chosen."""

from __future__ import annotations

import pytest
from rich.style import Style

from sessions.config import load_config
from sessions.paths import config_file
from sessions.store import SessionStore
from sessions.store.records import NewMessage
from sessions.tree import GenerationStats
from tests.tui.helpers import ready, screen_text, send, settle, wait_for
from tui.startup import StartupRequest
from tui.widgets.key_footer import KeyFooter
from tui.widgets.message_tree import CUT_MARK
from tui.widgets.panel_handle import PanelHandle

LONG = "A question whose first line is long enough to be cut in any tree panel there is"


def deep_chat(model_path) -> int:
    """A chat that forks three times, one inside the other: its lines nest three levels."""
    stats = GenerationStats(tokens_generated=3, stop_reason="eog")
    news = [NewMessage(None, "user", LONG)]
    for depth in range(3):
        parent = len(news) - 1
        news.append(NewMessage(parent, "assistant", f"first answer at depth {depth}", stats=stats))
        news.append(NewMessage(parent, "assistant", f"second answer at depth {depth}", stats=stats))
        news.append(NewMessage(len(news) - 1, "user", f"and a question at depth {depth}"))
    with SessionStore.open() as store:
        session = store.create_session(title="deep", model_path=str(model_path),
                                       model_fingerprint="fake-" + model_path.name)
        ids = store.add_messages(session.id, news)
        store.set_active_leaf(session.id, ids[-1])
        return session.id


def tree_lines(app, screen) -> list[str]:
    region = screen.tree_panel.message_tree.region
    return [line[region.x:region.right] for line in screen_text(app)[region.y:region.bottom]]


async def open_tree(pilot):
    screen = await ready(pilot)
    await pilot.press("ctrl+t")
    await wait_for(pilot, lambda: screen.tree_has_focus(), "the tree focused")
    await settle(pilot)
    await pilot.pause()
    return screen


@pytest.mark.parametrize("size", [(140, 42), (80, 24), (50, 16)], ids=["140x42", "80x24", "50x16"])
async def test_tree_lines_cut_end_in_an_ellipsis_and_show_text_even_at_50_columns(make_app, fake_model, size):
    app = make_app(startup=StartupRequest(session_id=deep_chat(fake_model), model_path=fake_model))
    async with app.run_test(size=size) as pilot:
        screen = await open_tree(pilot)
        tree = screen.tree_panel.message_tree
        await pilot.press("home")
        await pilot.pause()
        for row, line in enumerate(tree_lines(app, screen)):
            node = tree.get_node_at_line(row + round(tree.scroll_y))
            if node is None or "❯" not in line and "✦" not in line:
                continue
            label = tree.render_label(node, Style(), Style()).plain.rstrip()
            shown = line.rstrip().rstrip("▊▐▌▍▎▏▕▅▄▃▂▁ ")
            assert shown.endswith(label) or shown.endswith(CUT_MARK), f"cut without {CUT_MARK}: {line!r}"
            text = shown.split("❯" if "❯" in shown else "✦", 1)[1]  # some of its text, even the deepest
            assert sum(char.isalpha() for char in text) >= 3, f"no text on {line!r}"


async def test_the_tree_widens_and_narrows_with_its_keys_and_keeps_the_width(make_app):
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await ready(pilot)
        await send(pilot, "Say hi.")
        screen = await open_tree(pilot)
        before = screen.tree_panel.outer_size.width
        await pilot.press("greater_than_sign", "greater_than_sign")
        await wait_for(pilot, lambda: screen.tree_panel.outer_size.width == before + 8, "a wider panel")
        await pilot.press("less_than_sign")
        await wait_for(pilot, lambda: screen.tree_panel.outer_size.width == before + 4, "a narrower one")
        assert screen.chat_input.text == ""  # the keys are the tree's, not typing
        await settle(pilot)
        assert load_config(config_file()).config.tree_width == before + 4
    app = make_app(config=load_config(config_file()).config)
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await open_tree(pilot)
        assert screen.tree_panel.outer_size.width == before + 4



async def test_widening_keys_that_come_faster_than_the_layout_all_count(make_app):
    """A held ``>`` repeats faster than the screen is laid out: each press adds to the last
    width set, not to the width still drawn."""
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await ready(pilot)
        await send(pilot, "Say hi.")
        screen = await open_tree(pilot)
        before = screen.tree_panel.outer_size.width
        for _ in range(3):
            screen.tree_panel.action_width(4)  # no layout between them
        await wait_for(pilot, lambda: screen.tree_panel.outer_size.width == before + 12, "three steps wider")
        await settle(pilot)
        assert load_config(config_file()).config.tree_width == before + 12

async def test_dragging_the_trees_edge_sizes_it_and_a_small_terminal_keeps_room_to_chat(make_app):
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await ready(pilot)
        await send(pilot, "Say hi.")
        screen = await open_tree(pilot)
        handle = screen.tree_panel.query_one(PanelHandle)
        assert handle.region.x == screen.tree_panel.region.x  # the panel's left edge
        await pilot.mouse_down(handle)
        await pilot.hover(screen, offset=(70, 10))
        await pilot.mouse_up(screen, offset=(70, 10))
        await wait_for(pilot, lambda: screen.tree_panel.region.x == 70, "the edge where it was let go")
        await settle(pilot)
        assert load_config(config_file()).config.tree_width == 50
        await pilot.resize_terminal(60, 20)
        await wait_for(pilot, lambda: screen.conversation_view.region.width >= 20, "room to chat")


@pytest.mark.parametrize("size", [(50, 16), (80, 24)], ids=["50x16", "80x24"])
async def test_the_status_bar_and_the_footer_cut_nothing_mid_word(make_app, size):
    app = make_app()
    async with app.run_test(size=size) as pilot:
        screen = await ready(pilot)
        await send(pilot, "Say hi.")
        await pilot.press("ctrl+up", "ctrl+r")  # a cost with "kept": the longest the bar says
        await settle(pilot)
        await pilot.pause()
        status, footer = screen_text(app)[-2:]
        cost = screen.status.text_of("last")
        assert cost in status or status.rstrip().endswith(CUT_MARK), status
        shown = screen.query_one(KeyFooter).keys_shown
        keys_part = footer.split("▏")[0].rstrip()
        assert keys_part.endswith(shown[-2]), f"a key cut at the footer's end: {footer!r}"
        assert footer.rstrip().endswith("palette")


@pytest.mark.parametrize("width", [100, 120])
async def test_a_note_beside_the_cost_ends_in_an_ellipsis_within_the_bar(make_app, width):
    """The bar gives the cost the columns its other parts leave, counting the parts as
    first drawn (the speed's "– tok/s" before any reply): a note beside a cost used to run
    past the terminal's edge, cut mid-word."""
    app = make_app()
    async with app.run_test(size=(width, 24)) as pilot:
        screen = await ready(pilot)
        screen.status.set_cost(12_456, 235, 0.8, 8.5)  # no reply yet: the speed as first drawn
        screen.status.set_note("rewound: the next message continues from here, and Esc takes the rewind back")
        await pilot.pause()
        status = screen_text(app)[-2]
        assert status.rstrip().endswith(CUT_MARK), status
        assert sum(label.region.width for label in screen.status.children if label.display) <= width
