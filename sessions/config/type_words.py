"""A value's type in the user's words, for the messages about hand-edited files.

Both kinds of file a user edits by hand name wrong values this way: the config file
(TOML, where a mapping is a table) and imported chats (JSON, where it is an object and
``null`` exists). One table of words keeps a mistake reading the same in either; a
Python name such as ``str`` or ``NoneType`` means nothing to the person fixing the file.
"""

from __future__ import annotations

from datetime import date, datetime, time
from typing import Any

_WORDS: dict[type, str] = {
    bool: "a boolean",
    int: "a whole number",
    float: "a number",
    str: "a string",
    list: "a list",
    dict: "a table",
    type(None): "null",
    datetime: "a date and time",  # TOML's own date and time values
    date: "a date",
    time: "a time of day",
}


def type_word(kind: type, *, json: bool = False) -> str:
    """``kind`` in words; ``json`` calls a mapping what JSON calls it, an object."""
    if json and kind is dict:
        return "an object"
    return _WORDS.get(kind, kind.__name__)


def kind_of(value: Any, *, json: bool = False) -> str:
    """The type of ``value`` in words (see ``type_word``)."""
    return type_word(type(value), json=json)
