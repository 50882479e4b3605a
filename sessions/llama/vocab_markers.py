"""Which texts are single control tokens of a llama.cpp vocabulary.

The chat format a model was trained on shows in its vocabulary: its turn markers are
control tokens there (``sessions.templates.families``). Asking about the few candidate texts is
cheaper than listing a 262,144-token vocabulary, and it asks exactly what matters: whether
the tokenizer, parsing special tokens as the engine does, turns the text into one
control (or user-defined) token, rather than splitting it into plain text.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

_PROBE_CAPACITY = 8  # a marker that needs more tokens than this is not one token anyway


def special_token_texts(L: Any, vocab: Any, candidates: Iterable[str]) -> frozenset[str]:
    """The ``candidates`` that tokenize to one control or user-defined token of ``vocab``.

    ``L`` is the llama.cpp binding (``sessions.llama.native.lib()``) and ``vocab`` a
    ``llama_vocab`` handle, which a vocabulary-only load provides as well.
    """
    special = L.LLAMA_TOKEN_ATTR_CONTROL | L.LLAMA_TOKEN_ATTR_USER_DEFINED
    buffer = (L.llama_token * _PROBE_CAPACITY)()
    found: set[str] = set()
    for text in candidates:
        data = text.encode("utf-8")
        count = L.llama_tokenize(vocab, data, len(data), buffer, _PROBE_CAPACITY, False, True)
        if count == 1 and L.llama_vocab_get_attr(vocab, buffer[0]) & special:
            found.add(text)
    return frozenset(found)
