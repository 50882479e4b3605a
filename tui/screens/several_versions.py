"""Several new versions of a reply in one gesture (Alt+R, or "Regenerate ×N" in the palette).

A small dialog asks how many; the versions are then written at once, sampled in one batch
after the question is made live once (``SessionController.generate_versions``). They
stream into one reply view that shows one version at a time (``‹ 2/4 ›``): the paging
keys and the header's arrows move between them while they are written. Once written,
each is a version of the reply of its own, the one being read when they ended is shown,
and each is stored with its seed: with a fixed seed in the chat's settings, version k
uses that seed plus k, so the versions differ. At temperature 0 they would all be the
same reply: the gesture says so instead. Esc stops them all, keeping what each wrote as
stopped.
"""

from __future__ import annotations

from sessions.sampling import MOST_VERSIONS
from tui.screens import job_flow, tree_gestures
from tui.screens.chat_host import ChatHost
from tui.screens.dialogs import TextPrompt

TITLE = f"How many new versions of this reply? (2 to {MOST_VERSIONS})"


def ask_how_many(screen: ChatHost) -> None:
    """Ask for the count, then write that many versions of the selected reply."""
    if tree_gestures.regenerate_target(screen) is None:
        return

    async def chosen(text: str | None) -> None:
        if text is None:
            return
        count = int(text) if text.strip().isdigit() else 0
        if not 2 <= count <= MOST_VERSIONS:
            screen.notify(f"Type a number from 2 to {MOST_VERSIONS}.", severity="warning")
            return
        await write(screen, count)

    screen.app.push_screen(TextPrompt(TITLE, "3"), chosen)


async def write(screen: ChatHost, count: int) -> None:
    """``count`` new versions of the selected reply (or answers of the selected message), at once."""
    message = tree_gestures.regenerate_target(screen)
    if message is None:
        return
    if not screen.jobs.model_ready:
        screen.notify("No model is loaded: press F5 to choose one.", severity="warning")
        return
    if screen.controller.chat_settings().sampling.deterministic:
        screen.notify("At temperature 0 every version would be the same reply: raise the temperature "
                      "(Ctrl+S) to write different ones.", severity="warning", timeout=6)
        return

    async def at_once() -> None:
        screen.controller.regenerate(message.id)
        await screen.show_head()
        await job_flow.start_versions(screen, count)

    await screen.gestures.when_idle(at_once)
