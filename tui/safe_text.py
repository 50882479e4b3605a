"""Untrusted text for widgets: the core's ``sessions.text_safety``, under the UI's name.

Textual renders through its own segments, but a stray escape inside a segment still
reaches the terminal, so every piece of model or user text goes through ``inert`` before
any widget sees it. The implementation lives in the core so that the command line
(``llamachat show``, ``ask``...) and the app neutralise exactly the same characters.

Input boxes draw their text raw too, so text the app puts into one (a paste, the app's
own clipboard, a message to edit) goes through ``for_input`` first.
"""

from __future__ import annotations

from sessions.text_safety import inert, is_inert

__all__ = ["for_input", "inert", "is_inert"]


def for_input(text: str) -> str:
    """Text for an input box: any line break becomes a newline (terminals paste lines
    ending in ``\\r``), every other control character its visible picture."""
    return inert(text.replace("\r\n", "\n").replace("\r", "\n"))
