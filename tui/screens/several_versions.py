"""Several new versions of a reply in one gesture (Alt+R, or "Regenerate ×N" in the palette).

A small dialog asks how many; the versions are then written one after another, each a
regenerate of the same question streamed into a version of its own (``‹ 3/5 ›``), which
can be read and paged as soon as it is stored. The prompt is evaluated once: each next
version restores the question's state from its checkpoint and decodes nothing before its
first token. With a fixed seed in the chat's settings, version k uses that seed plus k,
so the versions differ; at temperature 0 they are all the same reply.

The chain stops at Esc (the reply being written is kept as stopped), when a reply fails,
and when another gesture waits for the engine: that gesture goes first.
"""

from __future__ import annotations

from dataclasses import replace

from sessions.controller import Message, StopReason
from tui.screens import job_flow, tree_gestures
from tui.screens.chat_host import ChatHost
from tui.screens.dialogs import TextPrompt

MOST = 8
"""Most versions one gesture asks for."""
TITLE = f"How many new versions of this reply? (2 to {MOST})"


def ask_how_many(screen: ChatHost) -> None:
    """Ask for the count, then write that many versions of the selected reply."""
    if tree_gestures.regenerate_target(screen) is None:
        return

    async def chosen(text: str | None) -> None:
        if text is None:
            return
        count = int(text) if text.strip().isdigit() else 0
        if not 2 <= count <= MOST:
            screen.notify(f"Type a number from 2 to {MOST}.", severity="warning")
            return
        await tree_gestures.regenerate(screen, more=count - 1)

    screen.app.push_screen(TextPrompt(TITLE, "3"), chosen)


async def next_version(screen: ChatHost, reply: Message | None) -> None:
    """After a reply job succeeded (``ChatScreen.reply_written``): the next version, if
    several were asked for and the chain may go on."""
    left, screen.versions_left = screen.versions_left, 0
    if left <= 0 or reply is None or reply.role != "assistant":
        return
    stopped = reply.stats is not None and reply.stats.stop_reason == StopReason.CANCELLED
    if stopped or screen.jobs.gestures_waiting:
        screen.notify(f"{left} more version{'s' if left != 1 else ''} not written.", timeout=4)
        return
    screen.versions_left = left - 1
    screen.versions_written += 1
    sampling = screen.controller.chat_settings().sampling
    if sampling.seed >= 0:  # the same seed again would write the same reply
        sampling = replace(sampling, seed=sampling.seed + screen.versions_written)
    screen.controller.regenerate(reply.id)
    await screen.show_head()
    await job_flow.start_reply(screen, sampling=sampling)
