"""Single line breaks are drawn as line breaks: the user's, the model's, while a reply
streams and once it is stored; code blocks keep their lines as before. A link shows
where it goes."""

from __future__ import annotations

from tests.tui.helpers import ready, reply_text, screen_text, send, type_text, wait_for


def line_of(app, words: str) -> str:
    """The screen line that shows ``words``."""
    lines = [line for line in screen_text(app) if words in line]
    assert lines, f"{words!r} is not on screen"
    return lines[0]


async def test_the_users_and_the_models_single_line_breaks_are_kept(make_app, script):
    script.replies = ["First sentence.\nSecond sentence.\n\n```\ncode one\ncode two\n```"]
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await send(pilot, "Roses are red\nviolets are blue")
        assert "violets" not in line_of(app, "Roses are red")
        assert "violets are blue" in line_of(app, "violets")
        assert "Second" not in line_of(app, "First sentence.")
        assert "Second sentence." in line_of(app, "Second")
        assert "code two" not in line_of(app, "code one")
        assert "code two" in line_of(app, "code two")


async def test_a_streaming_reply_keeps_its_line_breaks(make_app, script):
    script.replies = ["one line\nanother line\nand the rest"]
    script.hold_after = 3
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await type_text(pilot, "go")
        await pilot.press("enter")
        await wait_for(pilot, lambda: "another" in reply_text(screen), "the reply to start")
        await wait_for(pilot, lambda: any("another" in line for line in screen_text(app)), "the text drawn")
        assert "another" not in line_of(app, "one line")
        await pilot.press("escape")


async def test_a_link_shows_where_it_goes(make_app, script):
    script.replies = ["Read [the docs](https://example.org/a) or https://example.org/b or example.org/c."]
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await ready(pilot)
        await send(pilot, "where?")
        line = line_of(app, "Read the docs")
        assert "Read the docs (https://example.org/a) or https://example.org/b or example.org/c." in line


async def test_a_code_line_wider_than_the_panel_shows_a_scrollbar_and_a_short_one_does_not(make_app, script):
    from textual.widgets._markdown import MarkdownFence

    script.replies = ["```\n" + "x = 1  # " + "long " * 40 + "\n```\n\n```\nshort\n```"]
    app = make_app()
    async with app.run_test(size=(80, 40)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "code")
        wide, short = screen.conversation_view.views[-1].query(MarkdownFence)
        await wait_for(pilot, lambda: wide.show_horizontal_scrollbar, "the scrollbar of the wide block")
        assert not short.show_horizontal_scrollbar
