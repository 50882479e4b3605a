"""A text file attached to a message: read safely, refused in one sentence, put in a fence.

The app's attach key and ``llamachat ask --file`` both end here, as llama-cli's ``/read``
and the web UIs' attachments do: the file's text goes into the message itself, in a
fenced block named after the file, so the model reads it as the user's words and the
saved chat shows what was sent. Nothing else of the file is kept.

A file that is not text is refused: a NUL byte or bytes that are not UTF-8 (a model
cannot read a binary, and the database stores text). So are a pipe, a device or a folder
(``read_regular_file``: a FIFO would wait for a writer, ``/dev/zero`` never ends), a file
of more than ``MAX_ATTACHMENT_BYTES``, and, once a model is loaded, a file of more tokens
than its context holds (``SessionController.count_attachment``).

The fence is one backtick longer than the longest run of backticks in the file (three at
least), so a Markdown file with its own code blocks stays one block.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sessions.bounded_read import FileTooLarge, NotRegularFile, read_regular_file
from sessions.errors import ControllerError
from sessions.units import human_size, sizes_apart

MAX_ATTACHMENT_BYTES = 2_000_000
"""The largest file attached: about half a million tokens of text, more than any context
llamachat runs; a bigger file is a log or a data dump that needs cutting first."""

_BACKTICKS = re.compile(r"`+")
_UNSAFE_IN_NAME = re.compile(r"[\x00-\x1f\x7f-\x9f`\s]")
"""What a fence's info string cannot hold (a backtick ends a backtick fence's opening line)."""


class AttachmentError(ControllerError):
    """A file that cannot be attached; the message names it and says why."""


@dataclass(frozen=True)
class Attachment:
    """A text file read to go into a message."""

    name: str
    """The file's name as the fence shows it (no folder, nothing a fence could not hold)."""
    text: str
    """The file's content."""
    tokens: int | None = None
    """The fenced block's tokens for the loaded model; None before one is counted."""

    @property
    def block(self) -> str:
        """The fenced block that goes into the message."""
        return fenced(self.name, self.text)


def fenced(name: str, text: str) -> str:
    """``text`` in a backtick fence whose info string is ``name``, longer than any run inside."""
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    fence = "`" * max(3, longest + 1)
    body = text if text.endswith("\n") or not text else text + "\n"
    return f"{fence}{name}\n{body}{fence}"


def safe_name(path: Path) -> str:
    """The file's name, with what a fence's opening line cannot hold replaced by ``_``."""
    return _UNSAFE_IN_NAME.sub("_", path.name) or "file"


def read_attachment(path: Path | str, limit: int = MAX_ATTACHMENT_BYTES) -> Attachment:
    """The text of ``path`` to attach; ``AttachmentError`` saying why it cannot be."""
    path = Path(path).expanduser()
    try:
        data = read_regular_file(path, limit)
    except NotRegularFile:
        raise AttachmentError(f"cannot attach {path.name}: it is not a regular file (a pipe or a device)") from None
    except IsADirectoryError:
        raise AttachmentError(f"cannot attach {path.name}: it is a folder") from None
    except FileTooLarge as error:
        if error.size is None:  # it grew while it was read
            raise AttachmentError(f"cannot attach {path.name}: it is larger than the {human_size(limit)} "
                                  "an attachment may be") from None
        size, most = sizes_apart(error.size, limit)
        raise AttachmentError(f"cannot attach {path.name}: it is {size}, more than the {most} an attachment "
                              "may be") from None
    except FileNotFoundError:
        raise AttachmentError(f"cannot attach {path}: there is no such file") from None
    except OSError as error:
        raise AttachmentError(f"cannot attach {path}: {error.strerror or error}") from None
    if b"\0" in data:
        raise AttachmentError(f"cannot attach {path.name}: it holds NUL bytes, so it is not text")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise AttachmentError(f"cannot attach {path.name}: it is not UTF-8 text (byte 0x{data[error.start]:02x} "
                              f"at offset {error.start:,})") from None
    # Windows line endings become newlines, as the app's input makes them: the same text
    # whichever front end sends it, and the tokens counted are the tokens sent.
    return Attachment(safe_name(path), text.replace("\r\n", "\n"))


def within_context(attachment: Attachment, tokens: int, n_ctx: int | None) -> Attachment:
    """``attachment`` with its token count; ``AttachmentError`` when it alone overflows the context."""
    if n_ctx is not None and tokens > n_ctx:
        raise AttachmentError(f"cannot attach {attachment.name}: its {tokens:,} tokens are more than the "
                              f"model's context of {n_ctx:,}")
    return Attachment(attachment.name, attachment.text, tokens)


def compose_message(text: str, attachments: Sequence[Attachment]) -> str:
    """The message: ``text``, then each attached file's block, a blank line between them."""
    parts = [text.strip()] if text.strip() else []
    parts.extend(attachment.block for attachment in attachments)
    return "\n\n".join(parts)


def appended(draft: str, attachment: Attachment) -> str:
    """A draft being written with ``attachment``'s block added at its end."""
    return compose_message(draft.rstrip(), [attachment])
