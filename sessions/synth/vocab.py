"""A small, real byte-level BPE tokenizer for the made models.

The made models have random weights, but their tokenizer has to be a working one: the
engine tokenizes chat templates, counts tokens per message and parses ChatML control
tokens, and all of that should behave as it does with a downloaded model. So the vocabulary
is a GPT-2 style byte-level BPE (the 256 byte tokens in GPT-2's byte-to-unicode mapping)
whose merges are learned at make time from ``corpus.CORPUS``, followed by the control
tokens of a chat style and then reserved tokens up to the requested size. Learning is
deterministic (ties go to the lexicographically smallest pair), so every machine builds the
same vocabulary.

The default style is ChatML with its template, as most small instruct models have. The
other styles (Gemma's and Llama 3's turn markers, or none at all as in a base model) come
without a template: they stand for the GGUF files people download that carry none, whose
fallback template has to be chosen from the markers in the vocabulary.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from functools import cache
from itertools import pairwise

from .corpus import CORPUS
from .errors import SynthError

MAX_MERGES = 480
"""How many merges to learn (fewer if the corpus runs out of pairs seen twice)."""

END_OF_TEXT = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
SPECIAL_TOKENS = (END_OF_TEXT, IM_START, IM_END)

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)



@dataclass(frozen=True)
class MarkerStyle:
    """The control tokens of one chat style and which of them play which part."""

    tokens: tuple[str, ...]
    """Control tokens, in vocabulary order, right after the learned merges."""
    bos: str
    eos: str
    eot: str
    """Written as the end-of-turn token (llama.cpp ends a reply on it, as on ``eos``)."""
    template: str | None
    """The chat template written into the file, None for none."""


MARKER_STYLES: dict[str, MarkerStyle] = {
    "chatml": MarkerStyle(SPECIAL_TOKENS, END_OF_TEXT, IM_END, END_OF_TEXT, CHATML_TEMPLATE),
    "gemma": MarkerStyle(("<bos>", "<eos>", "<start_of_turn>", "<end_of_turn>"),
                         "<bos>", "<eos>", "<end_of_turn>", None),
    "llama3": MarkerStyle(("<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                           "<|end_header_id|>", "<|eot_id|>"),
                          "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", None),
    "none": MarkerStyle((END_OF_TEXT,), END_OF_TEXT, END_OF_TEXT, END_OF_TEXT, None),
}
"""Chat styles a made model's vocabulary can have; ``chatml`` is the default."""

# GGUF token types (gguf.TokenType), repeated here so this module needs no third-party import.
TOKEN_NORMAL = 1
TOKEN_CONTROL = 3
TOKEN_UNUSED = 5

# GPT-2's pre-tokenizer, restricted to ASCII classes (the corpus is ASCII). llama.cpp applies
# its own copy of the same split ("gpt-2" pre-tokenizer) before using our merges.
_PRE_SPLIT = re.compile(r"'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+")


@dataclass(frozen=True)
class Vocab:
    """Everything the GGUF tokenizer metadata needs."""

    tokens: tuple[str, ...]
    token_types: tuple[int, ...]
    merges: tuple[str, ...]
    bos_id: int
    eos_id: int
    eot_id: int
    pad_id: int
    n_real: int
    """Tokens before the reserved padding: bytes, merges and the control tokens."""
    chat_template: str | None = CHATML_TEMPLATE
    """The style's template; None when the style comes without one."""

    def never_predicted(self) -> list[int]:
        """Ids a made model should (almost) never produce.

        The reserved padding, and the byte tokens outside printable ASCII and newline:
        random weights would otherwise write control characters and broken UTF-8, which
        no trained model does and which make the demo unreadable. They stay in the
        vocabulary, so any text still tokenizes.
        """
        odd_bytes = [b for b in range(256) if not (32 <= b < 127 or b == 10)]
        return odd_bytes + list(range(self.n_real, len(self.tokens)))

    def chat_markers(self) -> list[int]:
        """Ids of the style's control tokens (turn markers, begin and end of text)."""
        return [i for i, kind in enumerate(self.token_types) if kind == TOKEN_CONTROL]


@cache
def byte_to_unicode() -> dict[int, str]:
    """GPT-2's reversible map from bytes to printable characters (space becomes 'Ġ')."""
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    mapping = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in mapping:
            mapping[b] = chr(256 + extra)
            extra += 1
    return mapping


def _words(text: str) -> Counter[tuple[str, ...]]:
    """Pre-split ``text`` and spell every piece in byte-to-unicode symbols."""
    table = byte_to_unicode()
    counts: Counter[tuple[str, ...]] = Counter()
    for piece in _PRE_SPLIT.findall(text):
        counts[tuple(table[b] for b in piece.encode("utf-8"))] += 1
    return counts


def _merge_word(word: tuple[str, ...], pair: tuple[str, str]) -> tuple[str, ...]:
    merged: list[str] = []
    i = 0
    while i < len(word):
        if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
            merged.append(word[i] + word[i + 1])
            i += 2
        else:
            merged.append(word[i])
            i += 1
    return tuple(merged)


@cache
def learn_merges(max_merges: int = MAX_MERGES) -> tuple[tuple[str, str], ...]:
    """Learn BPE merges from the corpus, most frequent pair first, ties broken by name.

    Learning stops early when no pair occurs twice: a merge seen once says nothing
    about English.
    """
    words = list(_words(CORPUS).items())
    pairs: Counter[tuple[str, str]] = Counter()
    where: dict[tuple[str, str], set[int]] = {}
    for index, (word, count) in enumerate(words):
        for pair in pairwise(word):
            pairs[pair] += count
            where.setdefault(pair, set()).add(index)
    merges: list[tuple[str, str]] = []
    while len(merges) < max_merges and pairs:
        best = min(pairs, key=lambda pair: (-pairs[pair], pair))
        if pairs[best] < 2:
            break
        merges.append(best)
        for index in sorted(where.pop(best, ())):
            word, count = words[index]
            for pair in pairwise(word):
                pairs[pair] -= count
                if pairs[pair] <= 0:
                    del pairs[pair]
            word = _merge_word(word, best)
            words[index] = (word, count)
            for pair in pairwise(word):
                pairs[pair] += count
                where.setdefault(pair, set()).add(index)
    return tuple(merges)


def marker_style(markers: str) -> MarkerStyle:
    """The style named ``markers``; ``SynthError`` naming the known ones otherwise."""
    try:
        return MARKER_STYLES[markers]
    except (KeyError, TypeError):
        known = ", ".join(MARKER_STYLES)
        raise SynthError(f"unknown marker style {markers!r} (known: {known})") from None


@cache
def _base_vocab(markers: str = "chatml") -> tuple[tuple[str, ...], tuple[str, ...], int]:
    table = byte_to_unicode()
    tokens = [table[b] for b in range(256)]
    seen = set(tokens)
    merges = learn_merges()
    for first, second in merges:
        # Two merge paths can spell the same string; llama.cpp needs unique token texts.
        if first + second not in seen:
            seen.add(first + second)
            tokens.append(first + second)
    tokens.extend(marker_style(markers).tokens)
    return tuple(tokens), tuple(f"{a} {b}" for a, b in merges), len(tokens)


@cache
def build_vocab(vocab_size: int, markers: str = "chatml") -> Vocab:
    """The shared tokenizer with the control tokens of ``markers``, padded with reserved
    tokens up to ``vocab_size`` entries."""
    style = marker_style(markers)
    tokens, merges, n_real = _base_vocab(markers)
    if vocab_size < n_real:
        raise SynthError(
            f"a vocabulary of {vocab_size} tokens is too small: the made tokenizer needs at "
            f"least {n_real}"
        )
    first_special = n_real - len(style.tokens)
    padded = tokens + tuple(f"<|reserved_{i}|>" for i in range(vocab_size - n_real))
    types = tuple(
        TOKEN_NORMAL if i < first_special else TOKEN_CONTROL if i < n_real else TOKEN_UNUSED
        for i in range(vocab_size)
    )
    index = {text: first_special + i for i, text in enumerate(style.tokens)}
    return Vocab(
        tokens=padded,
        token_types=types,
        merges=merges,
        bos_id=index[style.bos],
        eos_id=index[style.eos],
        eot_id=index[style.eot],
        pad_id=index[style.bos],
        n_real=n_real,
        chat_template=style.template,
    )
