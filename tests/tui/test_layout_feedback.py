"""Where the screen puts things and what the status bar says, after the gestures that used to
leave them wrong: reopening, search hits, deleting, new chats."""

from __future__ import annotations

from tests.tui.helpers import ready, screen_text, send, settle, shown_texts, type_text, wait_for
from tui.screens.dialogs import ConfirmScreen
from tui.screens.session_picker import SessionPicker
from tui.startup import StartupRequest

LONG_REPLY = " ".join(["words"] * 70)


async def test_a_reopened_chat_opens_at_its_end(make_app, script):
    script.replies = [LONG_REPLY] * 6
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        for n in range(6):
            await send(pilot, f"question {n}")
    again = make_app(startup=StartupRequest())
    async with again.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        view = screen.conversation_view
        await wait_for(pilot, lambda: view.max_scroll_y > 0 and view.scroll_y == view.max_scroll_y, "the end")
        last = view.views[-1]
        assert last.region.bottom <= view.region.bottom


async def test_a_search_hit_opens_the_branch_that_holds_it_with_the_message_selected(make_app, script):
    script.replies = ["the zebra crossed the road", "a plain answer", LONG_REPLY, LONG_REPLY, LONG_REPLY]
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "where did it go")  # answered with the zebra
        await send(pilot, "and then")
        await pilot.press("ctrl+up", "ctrl+up", "ctrl+up", "ctrl+up", "f2")  # edit the first question
        await type_text(pilot, " today")
        await pilot.press("enter")
        await settle(pilot)
        for n in range(3):
            await send(pilot, f"more {n}")
        assert not any("zebra" in text for _, text in shown_texts(screen))  # on another branch now
        await pilot.press("ctrl+n")
        await settle(pilot)
        await pilot.press("ctrl+o")
        await wait_for(pilot, lambda: isinstance(app.screen, SessionPicker), "the picker")
        await type_text(pilot, "zebra")
        await wait_for(pilot, lambda: "zebra" in str(app.screen.query_one("#picker-options").options[0].prompt)
                       if app.screen.query_one("#picker-options").option_count else False, "the hit")
        await pilot.press("enter")
        await settle(pilot)
        view = screen.conversation_view
        zebra = next(v for v in view.views if v.message and "zebra" in v.message.text)
        assert view.selected_id == zebra.message_id
        await wait_for(pilot, lambda: view.region.y <= zebra.region.y < view.region.bottom, "the message in view")


async def test_the_context_meter_follows_deletes_and_new_chats(make_app):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "one")
        await send(pilot, "two")
        full = screen.status.text_of("context")
        await pilot.press("ctrl+up", "ctrl+up", "f8")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the delete question")
        await pilot.press("y")
        await settle(pilot)
        after_delete = screen.status.text_of("context")
        assert after_delete != full
        assert after_delete == f"ctx {screen.controller.context_used():,}/4,096"
        await pilot.press("ctrl+n")
        await settle(pilot)
        assert screen.status.text_of("context") == "ctx 0/4,096"


async def test_a_note_ends_with_the_gesture_it_was_about(make_app):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "one")
        await send(pilot, "two")
        await pilot.press("ctrl+up", "ctrl+up", "ctrl+b")
        await settle(pilot)
        assert screen.status.text_of("note").startswith("rewound")
        await send(pilot, "a new turn")
        assert screen.status.text_of("note") == ""


async def test_at_60_columns_the_tree_keeps_the_head_mark_a_legend_that_does_not_wrap_and_room_to_chat(
        make_app, script):
    from tui.widgets.tree_panel import HEAD_MARK

    script.replies = ["A fairly long reply whose first line goes on and on for a while"] * 2
    app = make_app()
    async with app.run_test(size=(60, 20)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "a question long enough to be cut in a narrow tree panel")
        await pilot.press("ctrl+t")
        await settle(pilot)
        assert screen.tree_panel.region.width <= 26 and screen.conversation_view.region.width >= 30
        lines = [line[screen.tree_panel.region.x:] for line in screen_text(app)]
        assert any(f"{HEAD_MARK} A fairly" in line for line in lines)  # on the head's line, before its text
        assert lines[0].strip("▏ ") == "1 branch · 2 messages"
        assert lines[1].strip("▏ ") == f"●RAM ◐disk ○cold {HEAD_MARK}head"


async def test_the_footer_keeps_help_at_80_columns(make_app):
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        assert "f1 Help" in screen_text(app)[-1]


async def test_the_model_picker_shows_rows_at_60_by_20(make_app):
    from tui.screens.model_picker import DEMO_LABEL, ModelPicker

    app = make_app()
    async with app.run_test(size=(60, 20)) as pilot:
        await ready(pilot)
        await pilot.press("f5")
        await wait_for(pilot, lambda: isinstance(app.screen, ModelPicker) and app.screen.discovered, "the picker")
        await pilot.pause()
        assert app.screen.query_one("#model-table").region.height >= 4
        assert any(DEMO_LABEL[:30] in line for line in screen_text(app))


async def open_tree_cost(pilot, screen):
    """Open the tree panel on the head; returns a reader of its cost line, once that shows the head's."""
    await pilot.press("ctrl+t")

    def cost() -> str:
        return str(screen.tree_panel.query_one("#tree-cost").render())

    await wait_for(pilot, lambda: cost() == "here: the branch shown now", "the head's line")
    return cost


async def test_the_cost_of_a_switch_shows_while_the_cursor_moves_over_the_tree(make_app, script):
    from tui.switch_cost import cost_words

    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "one")
        await send(pilot, "two")
        await pilot.press("ctrl+up", "ctrl+up", "ctrl+up", "f2")  # a second version of "one"
        await type_text(pilot, " more")
        await pilot.press("enter")
        await settle(pilot)
        cost = await open_tree_cost(pilot, screen)
        await pilot.press("up", "up", "up")  # "two"'s reply, on the other branch
        target = screen.tree_panel.cursor_message_id
        expected = cost_words(screen.controller.routes.plan_choice(target))
        assert expected.startswith("going here:")
        await wait_for(pilot, lambda: cost() == expected, "the cost of going there")

        script.hold_after = 1  # the next reply waits after its first word until it is stopped
        screen.chat_input.focus()
        await type_text(pilot, "three")
        await pilot.press("enter")  # a reply holds the engine now
        await wait_for(pilot, lambda: screen.jobs.generating, "the reply")
        screen.tree_panel.focus()
        await pilot.press("down")
        await wait_for(pilot, lambda: "once the model is idle" in cost(), "the engine is busy")
        screen.controller.cancel()
        await settle(pilot)
        await wait_for(pilot, lambda: cost().startswith(("going here", "here:")), "the cost once idle")


def test_the_cost_line_says_what_a_switch_restores_and_evaluates():
    from sessions.engine.reports import RoutePlan
    from tui.switch_cost import cost_words

    restore = RoutePlan(keep=0, evaluate_from=5888, target_len=6030, tokens_restored=5888, ram_bytes=12_300_000,
                        estimate_seconds=0.4)
    assert cost_words(restore) == "going here: restore 5,888 tokens (12.3 MB), evaluate 142 (under 1 s)"
    scratch = RoutePlan(keep=0, evaluate_from=0, target_len=3000, estimate_seconds=4.8)
    assert cost_words(scratch) == "going here: evaluate 3,000 (~5 s)"
    assert cost_words(None) == "cost of going here: known once the model is idle"


async def test_a_switch_that_cannot_be_planned_leaves_the_cost_line_empty(make_app, monkeypatch):
    """What the core refuses with, and a template that cannot render the branch (both ``LlamachatError``)."""
    from pathlib import Path

    from sessions.store import DatabaseReplaced
    from sessions.templates.chat_template import TemplateError

    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "one")
        await send(pilot, "two")
        cost = await open_tree_cost(pilot, screen)
        for error in (TemplateError("the chat template rejected the conversation"),
                      DatabaseReplaced(Path("/somewhere/sessions.db"))):
            def refused(_message_id, error=error):
                raise error

            monkeypatch.setattr(screen.controller.routes, "plan_choice", refused)
            await pilot.press("up")  # the question of the head: planned, refused
            await wait_for(pilot, lambda: cost() == "", f"the line left empty after {type(error).__name__}")
            await pilot.press("down")  # back on the head: no plan needed
            await wait_for(pilot, lambda: cost() == "here: the branch shown now", "the head's line again")
        assert app.is_running


async def test_a_notification_leaves_the_status_bar_and_the_footer_visible(make_app):
    from textual.widgets import Footer
    from textual.widgets._toast import Toast

    from tests.tui.helpers import ready, wait_for

    app = make_app()
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        screen = await ready(pilot)
        app.notify("Something worth saying, for a few seconds.")
        await wait_for(pilot, lambda: bool(screen.query(Toast)), "the notification")
        await pilot.pause()
        toasts = list(screen.query(Toast))
        status_top = screen.status.region.y
        assert status_top < screen.query_one(Footer).region.y
        assert all(toast.region.bottom <= status_top for toast in toasts), [t.region for t in toasts]


async def test_at_80_columns_the_cost_of_the_last_switch_is_shown_whole(make_app):
    from tests.tui.helpers import ready

    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await ready(pilot)
        screen.status.set_model("gemma-3-270m-it-qat-Q4_0 instruct", "sliding window", "CPU")
        screen.status.set_context(2_466, 32_768)
        screen.status.set_speed(41.5)
        screen.status.set_cost(12_456, 235, 0.8, 8.5)
        await pilot.pause()
        line = next(line for line in screen_text(app) if "ctx" in line)
        assert line.rstrip().endswith("restored 12,456, evaluated 235 (0.8 s, est. 8.5 s)"), line
        assert "gemma-3" in line and "ctx 2,466/32,768" in line  # the model still named, shortened if it must be


async def test_at_50_columns_the_footer_ends_with_the_palette_key(make_app):
    from tests.tui.helpers import ready

    app = make_app()
    async with app.run_test(size=(50, 16)) as pilot:
        await ready(pilot)
        footer = screen_text(app)[-1]
        assert footer.rstrip().endswith("^p palette"), footer  # not a letter of a key hidden under it


async def test_the_cost_line_leaves_a_message_deleted_from_the_tree(make_app):
    """F8 in the tree on the message under its cursor: the cost line spoke of it after."""
    from tui.screens.dialogs import ConfirmScreen
    from tui.switch_cost import cost_words

    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "one")
        await send(pilot, "two")
        await pilot.press("ctrl+up", "ctrl+up", "ctrl+up", "f2")  # a second version of "one"
        await type_text(pilot, " more")
        await pilot.press("enter")
        await settle(pilot)
        cost = await open_tree_cost(pilot, screen)
        await pilot.press("up", "up", "up")  # "two"'s reply, on the other branch
        gone = screen.tree_panel.cursor_message_id
        await wait_for(pilot, lambda: cost().startswith("going here:"), "the cost of going there")
        await pilot.press("f8")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
        await pilot.press("enter")
        await wait_for(pilot, lambda: gone not in screen.controller.snapshot().tree, "the deletion")
        await settle(pilot)
        now_on = screen.tree_panel.cursor_message_id
        assert now_on != gone
        head = screen.controller.snapshot().head
        expected = (cost_words(None, live=True) if now_on == head.id
                    else cost_words(screen.controller.routes.plan_choice(now_on)))
        await wait_for(pilot, lambda: cost() == expected, "the cost of the message under the cursor now")


def message_rows(screen) -> list[int]:
    return [view.region.y for view in screen.conversation_view.views]


async def test_paging_the_versions_of_a_short_chat_leaves_it_where_it_is(make_app, script):
    """A chat shorter than the screen is drawn against its end; paging a reply's versions must
    not move it to the top and back."""
    script.replies = ["Hello there.", "Hi, how can I help?"]
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        screen = await send(pilot, "Say hi.")
        await pilot.press("alt+up")  # the reply selected
        await pilot.press("ctrl+r")
        await settle(pilot)
        await pilot.press("alt+left")  # the first version, selected as it is paged to
        await settle(pilot)
        drawn = message_rows(screen)
        assert drawn[0] > 10  # near the input, not at the top
        for key in ("alt+right", "alt+left", "alt+right"):
            await pilot.press(key)
            await settle(pilot)
            assert message_rows(screen) == drawn, key


async def test_paging_to_a_version_taller_than_the_screen_shows_its_header(make_app, script):
    script.replies = ["Hello there.", "\n\n".join(f"Line {n} of a long version." for n in range(40))]
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        screen = await send(pilot, "Say hi.")
        await pilot.press("alt+up")
        await pilot.press("ctrl+r")
        await settle(pilot)
        await pilot.press("alt+left", "alt+right")  # the short one, then the long one again
        await settle(pilot)
        view = screen.conversation_view
        reply = view.views[-1]
        await wait_for(pilot, lambda: view.region.y <= reply.header.region.y < view.region.bottom,
                       "the long version's header in view")
        assert "Line 0 of a long version." in "\n".join(screen_text(pilot.app))
