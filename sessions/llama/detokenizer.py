"""Turn a stream of token ids into text without ever splitting a UTF-8 character.

A byte-level tokenizer can end a token in the middle of a multi-byte character (an emoji
is often three tokens); decoding each piece on its own would print replacement
characters. An incremental UTF-8 decoder holds the incomplete tail until it completes.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable


class Detokenizer:
    def __init__(self, piece: Callable[[int], bytes]):
        self._piece = piece
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.text = ""

    def prime(self, tokens: list[int]) -> None:
        """Carry over a character that ``tokens`` (the end of a reply being continued) left
        unfinished, so that the bytes completing it are shown as that character."""
        tail = incomplete_tail(b"".join(self._piece(t) for t in tokens))
        if tail:
            self._decoder.decode(tail)  # held: it completes with the next token's bytes

    def push(self, token: int) -> str:
        """Add one token; return the newly completed text (possibly empty)."""
        chunk = self._decoder.decode(self._piece(token))
        self.text += chunk
        return chunk

    def finish(self) -> str:
        """Flush whatever incomplete bytes remain (shown as a replacement character)."""
        chunk = self._decoder.decode(b"", final=True)
        self.text += chunk
        return chunk


def incomplete_tail(data: bytes) -> bytes:
    """The bytes of an unfinished UTF-8 character at the end of ``data`` (empty if none)."""
    for back in range(1, min(4, len(data)) + 1):
        lead = data[-back]
        if lead & 0xC0 == 0x80:
            continue  # a continuation byte: the character began further back
        need = 2 if lead >> 5 == 0b110 else 3 if lead >> 4 == 0b1110 else 4 if lead >> 3 == 0b11110 else 1
        return data[-back:] if need > back else b""
    return b""
