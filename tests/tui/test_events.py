"""Core events cross to the UI thread as ``CoreEvent`` messages, streamed text coalesced and inert."""

from __future__ import annotations

from sessions import events as core
from sessions.tree import GenerationStats, Message
from tui import events


class Collector:
    """Stands in for the screen: keeps what is posted."""

    def __init__(self) -> None:
        self.posted: list[events.CoreEvent] = []

    def post_message(self, message) -> bool:
        self.posted.append(message)
        return True


def connected() -> tuple[events.Forwarder, Collector]:
    forwarder, screen = events.Forwarder(), Collector()
    forwarder.target = screen
    return forwarder, screen


def test_nothing_is_posted_before_there_is_a_screen():
    forwarder = events.Forwarder()
    forwarder(core.TextStreamed("lost"))  # must not raise
    screen = Collector()
    forwarder.target = screen
    forwarder(core.TextStreamed("kept"))
    assert [m.event for m in screen.posted] == [core.TextStreamed("kept")]


def test_streamed_pieces_are_coalesced_until_the_screen_takes_them():
    forwarder, screen = connected()
    for piece in ("Hel", "lo ", "\x1b[2J", "world"):
        forwarder(core.TextStreamed(piece))
    assert len(screen.posted) == 1
    assert screen.posted[0].event == core.TextStreamed("Hello ␛[2Jworld")
    forwarder(core.TextStreamed("again"))  # the first message was read: a new one
    assert len(screen.posted) == 2 and screen.posted[1].event == core.TextStreamed("again")


def test_text_never_joins_a_message_posted_before_another_event():
    forwarder, screen = connected()
    reply = Message(1, 1, None, "assistant", "one", 0.0)
    forwarder(core.TextStreamed("one"))
    forwarder(core.ReplyFinished(reply, GenerationStats(tokens_generated=1)))
    forwarder(core.TextStreamed("two"))  # the next reply: it must come after the finish
    kinds = [type(m.event).__name__ for m in screen.posted]
    assert kinds == ["TextStreamed", "ReplyFinished", "TextStreamed"]
    assert screen.posted[0].event.text == "one" and screen.posted[2].event.text == "two"


def test_every_event_travels_whole_with_its_text_made_inert():
    forwarder, screen = connected()
    reply = Message(1, 1, None, "assistant", "hi\x07", 0.0)
    sent = [core.ModelLoadProgressed(0.5), core.ModelLoaded("name\x07", "plain", 512, 0.1),
            core.PromptProgressed(5, 10, 5.0), core.ReplyFinished(reply, GenerationStats(tokens_generated=1)),
            core.NoticeRaised("careful\x1b[31m", "info")]
    for event in sent:
        forwarder(event)
    received = [message.event for message in screen.posted]
    assert received == [sent[0], core.ModelLoaded("name␇", "plain", 512, 0.1), sent[2], sent[3],
                        core.NoticeRaised("careful␛[31m", "info")]
    assert received[3].message.text == "hi\x07"  # a stored message stays exact; its view draws it inert


def test_notice_levels_become_notification_severities():
    assert [events.severity(level) for level in ("info", "warning", "error", "loud")] == \
        ["information", "warning", "error", "warning"]
