"""The quiet note after a message's header: when it was written, and for a reply its
length and why it ended early."""

from __future__ import annotations

import time
from datetime import datetime

from sessions.api.chat import CAN_CONTINUE
from sessions.stop_reason import StopReason
from sessions.tree import Message

STOP_NOTES = {StopReason.CANCELLED: "stopped", StopReason.LENGTH: "cut at the length limit",
              StopReason.CONTEXT_FULL: "context full"}


def message_time(created_at: float, now: float | None = None) -> str:
    """When a message was written, as short as is clear: ``14:02``, ``Mar 3 14:02``, ``2024-03-03``."""
    then = datetime.fromtimestamp(created_at)
    today = datetime.fromtimestamp(now if now is not None else time.time())
    if then.date() == today.date():
        return then.strftime("%H:%M")
    if then.year == today.year:
        return f"{then.strftime('%b')} {then.day} {then.strftime('%H:%M')}"
    return then.strftime("%Y-%m-%d")


def message_note(message: Message, continue_key: str = "", now: float | None = None) -> str:
    """The note: when, and for a reply its length and why it ended early (with
    ``continue_key`` for a reply that can be continued)."""
    parts = [message_time(message.created_at, now)]
    if message.stats is not None and message.role == "assistant":
        parts.append(f"{message.stats.tokens_generated} tokens")
        reason = StopReason.parse(message.stats.stop_reason)
        if reason in STOP_NOTES:
            hint = f" ({continue_key} continues)" if continue_key and reason in CAN_CONTINUE else ""
            parts.append(STOP_NOTES[reason] + hint)
    return " · ".join(parts)
