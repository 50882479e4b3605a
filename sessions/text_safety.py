"""Make untrusted text (model output, imported chats, GGUF metadata) safe for a terminal.

A model can emit any byte sequence, including ``ESC [ ... m`` colour codes, cursor moves,
``ESC ] 0 ; title BEL`` or OSC 52 clipboard writes, and a bell. Written to a terminal
unchanged, those would be *executed* rather than shown. The Textual app and the command
line both print such text, so both go through this one module: control characters are
replaced by the visible Unicode "control pictures" (``␛``, ``␇``...), so the user can still
see that the model produced them; newline and tab are kept because they are ordinary text.

Bidirectional embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069) are
executed too, by the terminal's text layout: U+202E makes what follows read backwards, so
a message can show one thing while holding another ("Trojan Source"). They are shown as
U+FFFD. The left-to-right and right-to-left marks stay: they only place neutral characters
such as punctuation in right-to-left text, and cannot reorder a span. Lone surrogates
(bytes that were not UTF-8) cannot be written to a terminal at all and become U+FFFD.

Files are not terminals: exports keep the text exactly, and JSON output only needs the
C1 controls and DEL escaped (``json.dumps`` already escapes the rest), which changes no
value a JSON reader gets back.
"""

from __future__ import annotations

import re

_KEPT = {"\n", "\t"}
_CONTROL = re.compile(r"[\x00-\x1f\x7f\x80-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_JSON_RAW_CONTROL = re.compile(r"[\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_REPLACEMENT = "\ufffd"
"""Shown for C1 controls (U+0080-U+009F), bidirectional controls and lone surrogates,
which have no control picture."""


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


def one_line(text: str) -> str:
    """``text`` as one line, for a field printed in a row (a title in a list or a header).

    ``inert`` keeps newlines and tabs, which is right for a message body but lets a title
    print a line of its own: imported from a stranger's file, ``"hi\\n12  2024-05-01 ...
    9 messages forged"`` would read as a real row to anyone, or any script, reading the list.
    Every whitespace run (line breaks, tabs, the Unicode line separators) becomes one space,
    as the app's session list draws titles, and the rest is made inert.
    """
    return inert(" ".join(text.split()))


def is_inert(text: str) -> bool:
    """Whether ``text`` holds no control character other than newline and tab."""
    return not any(char not in _KEPT for char in _CONTROL.findall(text))


def json_for_terminal(json_text: str) -> str:
    """JSON text (from ``json.dumps(..., ensure_ascii=False)``) with C1 controls, DEL,
    bidirectional controls and lone surrogates written as ``\\u`` escapes: the same JSON
    value, nothing a terminal would act on.

    Safe to apply to the whole document: outside strings JSON holds no such character.
    """
    return _JSON_RAW_CONTROL.sub(lambda m: f"\\u{ord(m.group()):04x}", json_text)


class InertStream:
    """``inert`` for text that arrives in pieces (a reply streamed to the terminal).

    A ``\\r`` at the end of a piece is held back until the next piece says whether it
    starts a Windows line ending (kept as a newline) or stands alone (shown as ``␍``).
    """

    def __init__(self) -> None:
        self._held = ""

    def push(self, piece: str) -> str:
        text = self._held + piece
        self._held = ""
        if text.endswith("\r"):
            text, self._held = text[:-1], "\r"
        return inert(text)

    def finish(self) -> str:
        held, self._held = self._held, ""
        return inert(held)
