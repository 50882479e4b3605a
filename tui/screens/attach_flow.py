"""Attaching a text file to the message being written, from a key or the command palette.

A dialog asks for the file (``AttachPicker``: a typed path with Tab completion, beside
the files of its folder); a thread worker reads it and counts its tokens
(``SessionController.attach_file``: a file on a slow disk must not freeze the screen),
then the file's fenced block is added at the end of the draft, where it can still be
read, edited or removed before sending, and the status bar says how many tokens it adds.
The cursor lands on a new paragraph after the block, so what is typed next is not inside
it (the blank lines left at the end are not sent: ``chat_rules.sent_text``).
A file that cannot be attached (not text, too large, a pipe, longer than the context)
is a notification of one sentence, and the draft is left as it was.
"""

from __future__ import annotations

from pathlib import Path

from sessions.attachments import Attachment, appended
from sessions.errors import LlamachatError
from tui.screens.attach_picker import AttachPicker
from tui.screens.chat_host import ChatHost

AFTER_BLOCK = "\n\n"
"""What follows the block in the draft: the cursor starts a paragraph of its own there."""


def attach_file(screen: ChatHost) -> None:
    def chosen(path: Path | None) -> None:
        if path is not None:
            screen.run_worker(lambda: _read(screen, path), thread=True, group="attach", exit_on_error=False,
                              description="reading a file to attach")

    screen.app.push_screen(AttachPicker("~/"), chosen)


def _read(screen: ChatHost, path: Path) -> None:
    try:
        attachment = screen.controller.attach_file(path)
    except LlamachatError as error:
        words = str(error)
        screen.app.call_from_thread(screen.notify, f"{words[:1].upper()}{words[1:]}.", severity="error",
                                    markup=False)
        return
    screen.app.call_from_thread(_attached, screen, attachment)


def _attached(screen: ChatHost, attachment: Attachment) -> None:
    screen.chat_input.set_draft(appended(screen.chat_input.text, attachment) + AFTER_BLOCK)
    screen.status.set_note(note(attachment, screen.controller.n_ctx))


def note(attachment: Attachment, n_ctx: int | None) -> str:
    """What the status bar says of a file just attached: the tokens it adds to the message."""
    if attachment.tokens is None:
        return f"Attached {attachment.name} (its tokens are counted once a model is loaded)"
    room = f" of a {n_ctx:,}-token context" if n_ctx else ""
    return f"Attached {attachment.name}: {attachment.tokens:,} tokens{room}"
