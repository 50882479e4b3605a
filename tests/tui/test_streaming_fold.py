"""A long reply being written keeps only its last screens in the layout while the view
follows its end (``ChatMarkdown.fold_settled``), and the user sees exactly what the whole
reply would show: the same cells, scroll bar included; scrolling away or a new width brings
every block back first."""

from __future__ import annotations

from contextlib import asynccontextmanager

import pytest
from textual.widgets.markdown import MarkdownBlock

from sessions.api.chat import SessionController
from sessions.config import Config
from sessions.sampling import SamplingSettings
from sessions.store import SessionStore
from tests.tui.fake_engine import FakeEngineFactory, chunks
from tests.tui.helpers import main_screen, ready, screen_text, settle, type_text, wait_for
from tui.app import LlamaChatApp
from tui.startup import StartupRequest


def long_reply() -> str:
    """Paragraphs, code blocks and a table, each word numbered (``p07w03``)."""
    parts = []
    for p in range(36):
        words = " ".join(f"p{p:02d}w{w:02d}" for w in range(14))
        if p % 9 == 4:
            parts.append("```python\n" + "\n".join(f"x_{p}_{k} = [{words[:40]}]" for k in range(4)) + "\n```")
        elif p == 11:
            parts.append("| a | b |\n|---|---|\n" + "\n".join(f"| p{p:02d}r{r} | cell {r} |" for r in range(5)))
        else:
            parts.append(f"Paragraph {p}: {words}.")
    return "\n\n".join(parts)


@pytest.fixture
def long_app(fake_model, script):
    """An app whose replies may be as long as ``long_reply`` (the default limit and context
    are shorter)."""
    script.n_ctx = 1 << 16
    store = SessionStore.open()
    controller = SessionController(store, engine_factory=FakeEngineFactory(script),
                                   sampling=SamplingSettings(temperature=0.0, max_tokens=1 << 16))
    yield LlamaChatApp(controller, config=Config(), startup=StartupRequest(model_path=fake_model))
    store.close()


def painted(pilot) -> list[list[tuple[str, object]]]:
    """Every cell run of the conversation (its border and scroll bar too) as drawn now: text
    and style. Not the input below it, whose cursor blinks."""
    region = main_screen(pilot).conversation_view.region
    strips = pilot.app.screen._compositor.render_strips()[region.y:region.bottom]
    return [[(segment.text, segment.style) for segment in strip.crop(region.x, region.right)] for strip in strips]


@asynccontextmanager
async def long_reply_held(app, script, held_at: str):
    """The app at 100×30, the long reply written up to ``held_at``, where the fake engine
    holds it until the reply is stopped (on the way out, whatever the test found)."""
    async with app.run_test(size=(100, 30)) as pilot:
        try:
            yield pilot, *(await start_long_reply(pilot, script, held_at))
        finally:
            await pilot.press("escape")
            await settle(pilot)


async def start_long_reply(pilot, script, held_at: str):
    """Send a message and wait until the long reply is drawn up to ``held_at``, where the
    fake engine holds it."""
    reply = long_reply()
    script.replies = [reply]
    script.hold_after = next(i for i, part in enumerate(chunks(reply)) if part.startswith(held_at)) + 1
    screen = await ready(pilot)
    screen.chat_input.focus()
    await type_text(pilot, "go")
    await pilot.press("enter")
    view = screen.conversation_view
    await wait_for(pilot, lambda: any(held_at in line for line in screen_text(pilot.app)), f"{held_at} drawn")
    return screen, view, view.reply_view


async def test_a_long_reply_being_written_folds_what_is_above_its_last_screens_and_looks_the_same(long_app, script):
    async with long_reply_held(long_app, script, "p33w05") as (pilot, screen, view, reply):
        body = reply.body
        await wait_for(pilot, lambda: body.folded > 0, "blocks folded")
        blocks = [child for child in body.children if isinstance(child, MarkdownBlock)]
        assert not any(block.display for block in blocks[:body.folded])
        assert all(block.display for block in blocks[body.folded:])
        assert blocks[0] not in pilot.app.screen._compositor.widgets  # out of the layout, not only out of view
        await pilot.pause()
        folded = painted(pilot)
        height = body.outer_size.height
        body.unfold()
        await wait_for(pilot, lambda: blocks[0] in pilot.app.screen._compositor.widgets, "the blocks laid out")
        await pilot.pause()
        assert body.folded == 0 and body.outer_size.height == height
        assert painted(pilot) == folded


async def test_scrolling_away_from_the_end_brings_the_folded_blocks_back(long_app, script):
    async with long_reply_held(long_app, script, "p33w05") as (pilot, screen, view, reply):
        await wait_for(pilot, lambda: reply.body.folded > 0, "blocks folded")
        view.scroll_to_widget(reply, animate=False, top=True, immediate=True)
        assert reply.body.folded == 0  # at once: the frame drawn after the scroll has every block
        await wait_for(pilot, lambda: any("p00w00" in line for line in screen_text(pilot.app)), "the reply's start")
        text = "\n".join(screen_text(pilot.app))
        assert "Paragraph 0: p00w00 p00w01" in text and "Paragraph 1: p01w00" in text
        await pilot.pause()
        assert reply.body.folded == 0  # scrolled away, more text does not fold again


async def test_a_new_width_brings_the_folded_blocks_back_and_they_fold_again_at_it(long_app, script):
    async with long_reply_held(long_app, script, "p30w05") as (pilot, screen, view, reply):
        body = reply.body
        await wait_for(pilot, lambda: body.folded > 0, "blocks folded")
        await pilot.resize_terminal(80, 30)
        await wait_for(pilot, lambda: body.folded == 0, "the blocks back at the new width")
        await pilot.pause()
        view.append_text("more ")  # the next piece of text: the blocks fold again, measured at the new width
        await wait_for(pilot, lambda: body.folded > 0, "blocks folded again")
        await pilot.pause()
        folded = painted(pilot)
        first = next(child for child in body.children if not child.display)
        body.unfold()
        await wait_for(pilot, lambda: first in pilot.app.screen._compositor.widgets, "the blocks laid out")
        await pilot.pause()
        assert painted(pilot) == folded
