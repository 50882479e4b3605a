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
