"""Model text must reach the terminal as text, never as control sequences."""

from __future__ import annotations

import pytest

from tui.safe_text import inert, is_inert


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b[31mred\x1b[0m", "\u241b[31mred\u241b[0m"),
        ("bell\x07", "bell\u2407"),
        ("\x1b]52;c;SGVsbG8=\x07", "\u241b]52;c;SGVsbG8=\u2407"),  # OSC 52 clipboard write
        ("over\rwrite", "over\u240dwrite"),
        ("nul\x00byte", "nul\u2400byte"),
        ("del\x7f", "del\u2421"),
        ("c1\x9b31m", "c1\ufffd31m"),  # 8-bit CSI
    ],
)
def test_control_characters_become_visible_pictures(raw, shown):
    assert inert(raw) == shown
    assert is_inert(inert(raw))
    assert not is_inert(raw)


def test_ordinary_text_is_unchanged():
    text = "Line one\n\tindented — ünïcödé, emoji 🦙, [bold]not markup[/bold]"
    assert inert(text) == text
    assert is_inert(text)


def test_windows_line_endings_become_newlines():
    assert inert("a\r\nb\r\n") == "a\nb\n"


def test_empty_text():
    assert inert("") == ""
