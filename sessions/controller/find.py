"""Find text in the open chat: the messages of the branch shown first, in order, then the
other branches' (what a switch would show).

Matching ignores case (``str.casefold``, so ``Straße`` finds ``STRASSE``) and looks at the
text the user sees: a message's text as stored, reasoning included. Each hit says where
in the message the match is, for the view to mark it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from sessions.tree import ConversationTree

LIMIT = 1000
"""Messages with a match reported at most (a query like "e" in a long chat matches all)."""


@dataclass(frozen=True)
class FindHit:
    """A message that holds the text, and where."""

    message_id: int
    spans: tuple[tuple[int, int], ...]
    """(start, end) of each match in the message's text."""
    on_branch: bool
    """On the branch shown (else going there is a switch)."""


def _spans(text: str, query: str) -> tuple[tuple[int, int], ...]:
    folded, needle = text.casefold(), query.casefold()
    if len(folded) != len(text):  # folding changed lengths (ß -> ss): offsets of the original are lost
        return tuple(_spans_slow(text, needle))
    found, at = [], folded.find(needle)
    while at >= 0:
        found.append((at, at + len(needle)))
        at = folded.find(needle, at + max(1, len(needle)))
    return tuple(found)


def _spans_slow(text: str, needle: str) -> Iterator[tuple[int, int]]:
    """Matches found character by character where case folding changes lengths."""
    prefix_lengths = [0]
    for ch in text:
        prefix_lengths.append(prefix_lengths[-1] + len(ch.casefold()))
    folded = text.casefold()
    at = folded.find(needle)
    while at >= 0:
        start = max(i for i, n in enumerate(prefix_lengths) if n <= at)
        end = min(i for i, n in enumerate(prefix_lengths) if n >= at + len(needle))
        yield (start, end)
        at = folded.find(needle, at + max(1, len(needle)))


def find_in(tree: ConversationTree, shown: Sequence[int], query: str) -> list[FindHit]:
    """Messages of ``tree`` holding ``query``: those of the branch ``shown`` (ids, root
    first) in its order, then the others by age."""
    if not query.strip():
        return []
    on_branch = set(shown)
    hits = []
    for message_id in shown:
        spans = _spans(tree.get(message_id).text, query)
        if spans:
            hits.append(FindHit(message_id, spans, True))
    for message in tree.messages():
        if len(hits) >= LIMIT:
            break
        if message.id not in on_branch:
            spans = _spans(message.text, query)
            if spans:
                hits.append(FindHit(message.id, spans, False))
    return hits[:LIMIT]
