"""A small fuzzy matcher for the pickers: type a few letters, get the likely title first.

People remember titles by fragments ("kv cach", "rust lt" for "Rust lifetimes"), so a
query matches when its letters appear in order anywhere in the candidate. Among the
matches, the ones a person most likely meant come first: letters that sit together
(a contiguous run) and letters that start words beat letters scattered through the
middle of words. The best placement of the letters is found with a small dynamic
programme rather than greedily, because the first occurrence of a letter is often the
wrong one ("ca" in "a cat": the ``c`` of "cat" and then its ``a``, not the leading "a").

Pure Python with no UI imports, so it is unit tested on its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")

MATCH = 1.0
"""Every matched letter is worth this much."""
WORD_START = 8.0
"""Extra for a letter that starts a word (after a space, punctuation or a case change)."""
CONTIGUOUS = 5.0
"""Extra for a letter right after the previous matched one. A run that began at a word
start carries that word-start bonus along, so a whole word beats letters that hop from
word start to word start."""
GAP_START = 3.0
"""Cost of leaving a run: one gap of any length between two matched letters."""
GAP = 0.1
"""Further cost of each candidate character skipped inside that gap."""
LEAD = 0.02
"""Cost of each character before the first match: earlier matches rank a little higher."""

_NEG = float("-inf")


@dataclass(frozen=True)
class FuzzyMatch:
    """How well a query matched one candidate, and which characters it used."""

    score: float
    positions: tuple[int, ...]
    """Indexes into the candidate of the matched characters, for highlighting."""


def _word_starts(text: str) -> list[bool]:
    starts = []
    for index, char in enumerate(text):
        if index == 0:
            starts.append(True)
            continue
        before = text[index - 1]
        starts.append(
            (char.isalnum() and not before.isalnum())
            or (char.isupper() and before.islower())
            or (char.isdigit() and before.isalpha())
        )
    return starts


def _is_subsequence(query: str, text: str) -> bool:
    position = 0
    for char in query:
        position = text.find(char, position)
        if position < 0:
            return False
        position += 1
    return True


def fuzzy_match(query: str, candidate: str) -> FuzzyMatch | None:
    """Match ``query`` against ``candidate``, ignoring case and the query's spaces.

    Returns None when the query's letters do not all appear in order. An empty query
    matches everything with a score of 0.
    """
    needle = "".join(query.split()).casefold()
    if not needle:
        return FuzzyMatch(0.0, ())
    haystack = candidate.casefold()
    if len(haystack) != len(candidate) or not _is_subsequence(needle, haystack):
        # casefold can change the length ("ß" -> "ss"); fall back to lower() then.
        haystack = candidate.lower()
        if len(haystack) != len(candidate) or not _is_subsequence(needle, haystack):
            return None
    starts = _word_starts(candidate)
    width = len(haystack)
    # score[i][j]: best total with needle[i] placed at haystack[j]; back[i][j]: where
    # needle[i - 1] was placed for that total; run[i][j]: the bonus its run carries on.
    score = [[_NEG] * width for _ in needle]
    back = [[-1] * width for _ in needle]
    run = [[0.0] * width for _ in needle]
    bonus_at = [WORD_START if start else 0.0 for start in starts]
    for j, char in enumerate(haystack):
        if char == needle[0]:
            score[0][j] = MATCH + bonus_at[j] - LEAD * j
            run[0][j] = bonus_at[j]
    for i in range(1, len(needle)):
        previous, current = score[i - 1], score[i]
        best_far, best_far_at = _NEG, -1  # max over k < j - 1 of previous[k] + GAP * k
        for j in range(1, width):
            if j >= 2 and previous[j - 2] + GAP * (j - 2) > best_far:
                best_far, best_far_at = previous[j - 2] + GAP * (j - 2), j - 2
            if haystack[j] != needle[i]:
                continue
            carried = max(run[i - 1][j - 1], bonus_at[j])
            adjacent = previous[j - 1] + MATCH + max(carried, CONTIGUOUS)
            far = best_far - GAP * (j - 1) - GAP_START + MATCH + bonus_at[j]
            if adjacent >= far and adjacent > _NEG:
                current[j], back[i][j], run[i][j] = adjacent, j - 1, carried
            elif far > _NEG:
                current[j], back[i][j], run[i][j] = far, best_far_at, bonus_at[j]
    last = score[-1]
    end = max(range(width), key=lambda j: last[j])
    if last[end] == _NEG:
        return None
    positions = [end]
    for i in range(len(needle) - 1, 0, -1):
        positions.append(back[i][positions[-1]])
    positions.reverse()
    return FuzzyMatch(last[end], tuple(positions))


def fuzzy_rank(query: str, items: Sequence[T], key: Callable[[T], str]) -> list[tuple[T, FuzzyMatch]]:
    """The items that match, best first; equal scores keep the items' original order."""
    found: list[tuple[float, int, T, FuzzyMatch]] = []
    for index, item in enumerate(items):
        match = fuzzy_match(query, key(item))
        if match is not None:
            found.append((-match.score, index, item, match))
    found.sort(key=lambda entry: (entry[0], entry[1]))
    return [(item, match) for _, _, item, match in found]

