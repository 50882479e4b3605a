"""Telling a reply's reasoning from its answer, for display only.

Reasoning models write their thinking into the reply itself: Qwen3, QwQ, DeepSeek-R1 and
SmolLM3 between ``<think>`` and ``</think>`` (R1's template opens the block in the prompt,
so the reply starts inside it), Gemma 4 between ``<|channel>thought`` and ``<channel|>``,
and gpt-oss in Harmony channels (``<|channel|>analysis<|message|>...`` then
``<|start|>assistant<|channel|>final<|message|>...``; llama.cpp drops the ``<|end|>``
between them from the text, as it is a control token). The stored reply stays exactly as
generated, since its tokens are what the model's cache holds; this module only says which
spans of it are reasoning, so a view can fold or dim them.

It works on streamed text: ``ReasoningSplitter.push`` takes each new piece and returns the
view so far, scanning only what is new. A marker cut in two by the stream (``<thi`` then
``nk>``) is held back until it is complete, so no half-marker ever flashes on screen.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

Kind = Literal["reasoning", "answer"]

THINK_BLOCKS = {"<think>": "</think>", "<|channel>thought": "<channel|>"}
"""Openings of a reasoning block and the closing each one waits for."""
HARMONY_ENDS = ("<|end|>", "<|return|>", "<|call|>")
HARMONY_REASONING = ("analysis", "commentary")
"""gpt-oss channels that are thinking rather than the answer."""
_MARKERS = (*THINK_BLOCKS, *THINK_BLOCKS.values(), "<|channel|>", "<|message|>", "<|start|>", *HARMONY_ENDS)
_LONGEST_MARKER = max(map(len, _MARKERS))
_FIND = re.compile("|".join(re.escape(marker) for marker in sorted(_MARKERS, key=len, reverse=True)))


@dataclass(frozen=True)
class ReplyPart:
    """One span of a reply's text, markers left out."""

    kind: Kind
    text: str
    start: int
    """Where ``text`` starts in the reply's text (a part is one unbroken slice of it)."""
    closed: bool
    """For reasoning: its block has ended. An open block at the end is still being written
    (or the reply was cut off inside it)."""
    channel: str = ""
    """The gpt-oss channel (``analysis``, ``commentary``, ``final``); empty otherwise."""


@dataclass(frozen=True)
class ReplyView:
    """A reply split into reasoning and answer parts, in order."""

    parts: tuple[ReplyPart, ...]

    @property
    def reasoning(self) -> str:
        """All the reasoning, blocks separated by a blank line, edges trimmed."""
        blocks = (p.text.strip() for p in self.parts if p.kind == "reasoning")
        return "\n\n".join(block for block in blocks if block)

    @property
    def answer(self) -> str:
        """The answer: every part that is not reasoning, joined, edges trimmed."""
        return "".join(p.text for p in self.parts if p.kind == "answer").strip()

    @property
    def thinking(self) -> bool:
        """True while the text ends inside a reasoning block."""
        return bool(self.parts) and self.parts[-1].kind == "reasoning" and not self.parts[-1].closed


@dataclass
class _Part:
    """A part being built: its text grows as the stream goes on."""

    kind: Kind
    start: int
    channel: str = ""
    text: str = ""
    closed: bool = False
    _frozen: ReplyPart | None = field(default=None, init=False, repr=False)

    @property
    def end(self) -> int:
        return self.start + len(self.text)

    def extend(self, piece: str) -> None:
        self.text += piece
        self._frozen = None

    def close(self) -> None:
        self.closed = True
        self._frozen = None

    def frozen(self) -> ReplyPart:
        """The part as it stands (made again only after it changed)."""
        if self._frozen is None:
            self._frozen = ReplyPart(self.kind, self.text, self.start, self.closed, self.channel)
        return self._frozen


class ReasoningSplitter:
    """Splits a reply as it streams; ``push`` new text, read the ``ReplyView`` it returns.

    ``starts_in_reasoning``: the generation prompt opened a ``<think>`` block, so the reply
    begins inside it (``prompt_opens_reasoning`` tells). Without it, a first ``</think>``
    with no ``<think>`` before it still turns what came before it into reasoning.
    """

    def __init__(self, *, starts_in_reasoning: bool = False) -> None:
        self._text = ""
        self._pos = 0  # everything before this is in a part, consumed as a marker, or hidden
        self._parts: list[_Part] = []
        self._state = "answer"  # or "think", or for gpt-oss "header", "channel", "message"
        self._kind: Kind = "answer"  # where text read in the current state goes
        self._close = ""  # the marker that ends the open think block
        self._channel = ""  # gpt-oss: the channel of the message being read
        self._harmony = False  # gpt-oss markers have been seen
        if starts_in_reasoning:
            self._open_block("", 0)

    @property
    def view(self) -> ReplyView:
        return ReplyView(tuple(part.frozen() for part in self._parts))

    def push(self, text: str) -> ReplyView:
        """Add newly streamed text; the view of everything so far."""
        self._text += text
        self._scan(final=False)
        return self.view

    def finish(self) -> ReplyView:
        """The stream has ended: a held-back partial marker is plain text after all."""
        self._scan(final=True)
        return self.view

    def _scan(self, *, final: bool) -> None:
        text = self._text
        while True:
            found = _FIND.search(text, self._pos)
            if found is None:
                end = len(text) if final else len(text) - _partial_marker_length(text, self._pos)
                self._place(self._pos, end)
                self._pos = end
                return
            self._place(self._pos, found.start())
            if self._is_marker(found.group()):
                self._pos = found.end()
                self._take(found.group(), found.start())
            else:  # text that only looks like a marker here: it stays text
                self._place(found.start(), found.end())
                self._pos = found.end()

    def _is_marker(self, marker: str) -> bool:
        if self._state == "think":  # an opening the prompt wrote may close either way
            return marker == self._close if self._close else marker in THINK_BLOCKS.values()
        if self._state in ("header", "channel"):
            return marker in ("<|channel|>", "<|message|>")
        if self._state == "message":
            return marker in ("<|start|>", "<|channel|>", *HARMONY_ENDS)
        # In the answer, a block opens only where nothing has been answered since the last one.
        fresh = not self._answer_since_last_block().strip()
        if marker in THINK_BLOCKS:
            return fresh
        if marker in ("<|channel|>", "<|start|>"):
            return self._harmony or fresh
        if marker == "</think>":  # closing a block the prompt opened, if nothing else opened one
            return not self._harmony and not any(part.kind == "reasoning" for part in self._parts) \
                and "<think>" not in self._text[:self._pos]
        return self._harmony and marker != "<channel|>"  # <|message|> and Harmony's ends

    def _take(self, marker: str, at: int) -> None:
        """Change state on ``marker``, found at offset ``at`` and known to be a marker here."""
        if self._state == "think":  # its closing marker
            self._parts[-1].close()
            self._state = self._kind = "answer"
        elif marker in THINK_BLOCKS:
            self._open_block(marker, self._pos)
        elif marker == "</think>":  # the prompt opened the block: all so far was reasoning
            self._parts = [_Part("reasoning", 0, text=self._text[:at], closed=True)]
        elif marker in ("<|channel|>", "<|start|>"):
            self._end_message()
            self._harmony, self._channel = True, ""
            self._state = "channel" if marker == "<|channel|>" else "header"
        elif marker == "<|message|>":
            words = self._channel.split()
            self._channel = words[0] if words else ""
            self._kind = "reasoning" if self._channel in HARMONY_REASONING else "answer"
            self._state = "message"
            self._parts.append(_Part(self._kind, self._pos, self._channel))
        else:  # the end of a Harmony message
            self._end_message()
            self._state, self._kind, self._channel = "answer", "answer", ""

    def _open_block(self, marker: str, start: int) -> None:
        self._state, self._kind, self._close = "think", "reasoning", THINK_BLOCKS.get(marker, "")
        self._parts.append(_Part("reasoning", start))

    def _end_message(self) -> None:
        if self._state == "message" and self._parts:
            self._parts[-1].close()

    def _place(self, start: int, end: int) -> None:
        """Put ``text[start:end]`` where the current state says: a part, or a header."""
        if end <= start:
            return
        piece = self._text[start:end]
        if self._state == "channel":
            self._channel += piece
            return
        if self._state == "header":
            return  # the role after <|start|>: not part of what was said
        last = self._parts[-1] if self._parts else None
        if last is not None and last.kind == self._kind and not last.closed and last.end == start:
            last.extend(piece)
        else:
            self._parts.append(_Part(self._kind, start, self._channel, piece))

    def _answer_since_last_block(self) -> str:
        texts: list[str] = []
        for part in reversed(self._parts):
            if part.kind != "answer":
                break
            texts.insert(0, part.text)
        return "".join(texts)


def _partial_marker_length(text: str, start: int) -> int:
    """How many characters at the end of ``text`` (from ``start``) could begin a marker.

    Every marker has its only ``<`` first, so such an end starts at the last ``<``.
    """
    at = text.rfind("<", max(start, len(text) - _LONGEST_MARKER + 1))
    if at < 0:
        return 0
    tail = text[at:]
    return len(tail) if any(marker.startswith(tail) for marker in _MARKERS) else 0


def split_reply(text: str, *, starts_in_reasoning: bool = False) -> ReplyView:
    """The view of a whole reply (see ``ReasoningSplitter``)."""
    splitter = ReasoningSplitter(starts_in_reasoning=starts_in_reasoning)
    splitter.push(text)
    return splitter.finish()


def prompt_opens_reasoning(prompt_tail: str) -> bool:
    """Whether a reply written after ``prompt_tail`` begins inside a reasoning block.

    ``prompt_tail`` is the text the reply follows: the generation prompt, such as
    ``message_tokens.generation_suffix`` gives (DeepSeek-R1's and Qwen3.5's end in
    ``<think>\\n``; Qwen3's with thinking turned off hold an empty, closed block).
    """
    for opening, closing in THINK_BLOCKS.items():
        at = prompt_tail.rfind(opening)
        if at >= 0 and closing not in prompt_tail[at:]:
            return True
    return False
