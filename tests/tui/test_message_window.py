"""The arithmetic of the conversation's window: rows estimated and measured, and which
messages to mount for a part of the branch."""

from __future__ import annotations

from tui.widgets.message_window import (
    GAP,
    WHOLE_UP_TO,
    Heights,
    estimated_rows,
    needs_moving,
    window_at_end,
    window_for,
)


def heights_of(*rows: int) -> Heights:
    heights = Heights()
    heights.replace_from(0, ["x"] * len(rows), 80)
    heights.measure(dict(enumerate(rows)))
    return heights


def test_rows_are_estimated_from_the_lines_wrapped():
    one_line = estimated_rows("hello", 80)
    assert estimated_rows("a" * 81, 80) == one_line + 1
    assert estimated_rows("one\ntwo\n\nfour", 80) == one_line + 3
    assert one_line == 1 + 1 + 1 + GAP  # header, the line, the margin under it, the gap


def test_measured_rows_replace_the_estimates_and_move_the_tops():
    heights = Heights()
    heights.replace_from(0, ["a", "b", "c"], 80)
    estimate = heights.rows[0]
    assert heights.measure({1: estimate + 5}) and heights.tops == [0, estimate, 2 * estimate + 5, 3 * estimate + 5]
    assert not heights.measure({1: estimate + 5})  # unchanged
    heights.replace_from(2, ["d", "e"], 80)  # a new branch after the second message keeps what was measured
    assert heights.rows[:2] == [estimate, estimate + 5] and len(heights) == 4


def test_the_window_covers_the_screen_and_a_screen_either_side():
    heights = heights_of(*[10] * 100)  # message i on rows 10i to 10i+9
    assert window_for(heights, 500, 30) == (47, 57)  # shown: rows 500 to 529; mounted: 470 to 569
    assert window_for(heights, 0, 30) == (0, 7)
    assert window_at_end(heights, 30) == (94, 100)


def test_the_window_holds_at_most_so_many_messages_those_on_screen_first():
    heights = heights_of(*[1] * 1000)
    lo, hi = window_for(heights, 500, 30, most=40)
    assert hi - lo == 40 and lo <= 500 and 530 <= hi


def test_the_window_moves_near_an_end_with_messages_beyond_it():
    heights = heights_of(*[10] * 100)
    assert not needs_moving(heights, (47, 57), 500, 30)
    assert needs_moving(heights, (47, 57), 470, 30)  # under half a screen from the top of the window
    assert needs_moving(heights, (47, 57), 540, 30)
    assert not needs_moving(heights, (0, 7), 0, 30)  # the top of the chat: nothing above
    assert needs_moving(heights, (0, 0), 0, 30)  # nothing mounted


def test_a_short_branch_is_mounted_whole():
    heights = heights_of(*[100] * WHOLE_UP_TO)
    assert window_for(heights, 2000, 30) == (0, WHOLE_UP_TO) == window_at_end(heights, 30)
    assert not needs_moving(heights, (0, WHOLE_UP_TO), 2000, 30)
    assert window_for(heights_of(*[100] * (WHOLE_UP_TO + 1)), 2000, 30) == (19, 21)
