"""Make untrusted text (model output, imported chats) safe to put on a terminal.

A model can emit any byte sequence, including ``ESC [ ... m`` colour codes, cursor moves,
OSC 52 clipboard writes or a bell. Written to the terminal unchanged, those would be
*executed* rather than shown. Textual renders through its own segments, but a stray
escape inside a segment still reaches the terminal, so every piece of model text goes
through ``inert`` before any widget sees it. Control characters are replaced by the
visible Unicode "control pictures" (``␛``, ``␇``...) so the user can still see that the
model produced them; newline and tab are kept because they are ordinary text.

This module knows nothing about Textual or the core; it is plain string work.
"""

from __future__ import annotations

import re

_KEPT = {"\n", "\t"}
_CONTROL = re.compile(r"[\x00-\x1f\x7f\x80-\x9f]")
_REPLACEMENT = "\ufffd"
"""Shown for C1 controls (U+0080-U+009F), which have no control picture."""


def _picture(match: re.Match[str]) -> str:
    char = match.group()
    if char in _KEPT:
        return char
    code = ord(char)
    if code < 0x20:
        return chr(0x2400 + code)  # ␀ ... ␟
    if code == 0x7F:
        return "\u2421"  # ␡
    return _REPLACEMENT


def inert(text: str) -> str:
    """``text`` with every terminal control character made visible and harmless.

    ``\\r\\n`` becomes ``\\n`` first (a Windows line ending is not an attack); a lone
    ``\\r``, which could overwrite what is already on the line, is shown as ``␍``.
    """
    if not text:
        return text
    text = text.replace("\r\n", "\n")
    return _CONTROL.sub(_picture, text)


def is_inert(text: str) -> bool:
    """Whether ``text`` holds no control character other than newline and tab."""
    return not any(char not in _KEPT for char in _CONTROL.findall(text))
