"""Core events cross to the UI thread as messages, streamed text coalesced and inert."""

from __future__ import annotations

from sessions import events as core
from sessions.tree import GenerationStats, Message
from tui import events


class Collector:
    """Stands in for the screen: keeps what is posted."""

    def __init__(self) -> None:
        self.posted: list = []

    def post_message(self, message) -> bool:
        self.posted.append(message)
        return True


def test_nothing_is_posted_before_there_is_a_screen():
    forwarder = events.Forwarder()
    forwarder(core.TextStreamed("lost"))  # must not raise
    assert forwarder.text.take() == ""


def test_streamed_pieces_are_coalesced_until_the_screen_takes_them():
    forwarder, screen = events.Forwarder(), Collector()
    forwarder.target = screen
    for piece in ("Hel", "lo ", "\x1b[2J", "world"):
        forwarder(core.TextStreamed(piece))
    assert len(screen.posted) == 1
    assert screen.posted[0].take() == "Hello ␛[2Jworld"
    forwarder(core.TextStreamed("again"))
    assert len(screen.posted) == 2 and screen.posted[1].take() == "again"


def test_other_events_become_their_own_messages():
    forwarder, screen = events.Forwarder(), Collector()
    forwarder.target = screen
    reply = Message(1, 1, None, "assistant", "hi", 0.0)
    forwarder(core.ModelLoaded("name\x07", "plain", 512, 0.1))
    forwarder(core.PromptProgressed(5, 10, 5.0))
    forwarder(core.ReplyFinished(reply, GenerationStats(tokens_generated=1)))
    forwarder(core.NoticeRaised("careful", "info"))
    loaded, progress, finished, notice = screen.posted
    assert isinstance(loaded, events.ModelLoaded) and loaded.name == "name␇" and loaded.n_ctx == 512
    assert isinstance(progress, events.PromptProgressed) and progress.eta_seconds == 1.0
    assert isinstance(finished, events.ReplyFinished) and finished.message is reply
    assert isinstance(notice, events.NoticeRaised) and notice.level == "information"


def test_an_unknown_notice_level_is_shown_as_a_warning():
    assert events.NoticeRaised("x", "loud").level == "warning"
