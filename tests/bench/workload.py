"""The W1 workload: a long branching chat with realistic turn sizes.

Texts are pseudo-English made from a fixed word list with a seeded generator, sized in
tokens of the model under test (system about 200, user turns about 120, replies about
380), so runs are repeatable and the numbers are comparable across models.

``w1_context`` sizes a context to W1 for a given model: the longest branch W1 and the
reopen after it build, counted in that model's tokens, with room for its chat template.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

WORDS = (
    "the a of and to in is was that it for on with as his they at be this from have or by one had "
    "not but what all were when we there can an your which their said if do will each about how up "
    "out them then she many some so these would other into has more her two like him see time could "
    "no make than first been its who now people my made over did down only way find use may water "
    "long little very after words called just where most know get through back much before go good "
    "new write our used me man too any day same right look think also around another came come work "
    "three word must because does part even place well such here take why things help put years "
    "different away again off went old number great tell men say small every found still between name "
    "should home big give air line set own under read last never us left end along while might next "
    "sound below saw something thought both few those always looked show large often together asked "
    "house world going want school important until form food keep children feet land side without boy "
    "once animals life enough took sometimes four head above kind began almost live page got earth need "
    "far hand high year mother light parts country father let night following picture being study second "
    "eyes soon times story boys since white days ever paper hard near sentence better best across during "
    "today others however sure means knew its try told young miles sun ways thing whole hear example heard"
).split()


def text_of(tokenize, n_tokens: int, rng: random.Random) -> str:
    """Words until the text is about ``n_tokens`` tokens long for this model."""
    words: list[str] = []
    while True:
        words.extend(rng.choice(WORDS) for _ in range(8))
        text = " ".join(words).capitalize() + "."
        if len(tokenize(text, False)) >= n_tokens:
            return text


SCALE = 1.0
"""The texts' sizes are multiplied by this: 1 wherever a figure is published. The suite's
runs of the benchmarks (``--w1-scale``) take a shorter chat of the same shape, since what
they check is that the figures hold together, not what they are; a run records its scale."""


SUITE_SCALE = 0.3
"""The scale the suite's runs take (the GPU check's rehearsal, the new-process W1 test):
the same events, routes and fields in a third of the tokens; their from-scratch prefills,
which grow faster than the chat, were most of their time at full size."""


def add_scale_flag(parser: argparse.ArgumentParser) -> None:
    """``--w1-scale``, for a benchmark that makes W1's texts (``set_scale`` takes its value)."""
    parser.add_argument("--w1-scale", type=float, default=1.0,
                        help="W1's texts at this fraction of their size (the suite's runs; figures are "
                             "published at 1)")


def set_scale(scale: float) -> None:
    """Every text this process makes from now on is ``scale`` times W1's size."""
    global SCALE
    if not 0 < scale <= 1:
        raise ValueError(f"a W1 scale is above 0 and at most 1, not {scale}")
    SCALE = scale


def w1_texts(tokenize, *, turns: int = 12, extra_turns: int = 3, seed: int = 1) -> dict:
    """System prompt, user turns, replies, edited turns and follow-up questions."""
    rng = random.Random(seed)

    def sized(n_tokens: int) -> str:
        return text_of(tokenize, max(8, round(n_tokens * SCALE)), rng)

    return {
        "system": sized(200),
        "users": [sized(120) for _ in range(turns)],
        "replies": [sized(380) for _ in range(turns)],
        "edits": {k: sized(120) for k in (2, 6, 11)},
        "follow_ups": [sized(120) for _ in range(extra_turns)],
    }


TEMPLATE_TOKENS_PER_MESSAGE = 16
"""Room for what a chat template puts around each message (ChatML's is 5 tokens; the
headers of other templates, gpt-oss's channels say, take up to a dozen)."""
TEMPLATE_TOKENS_FIXED = 256
"""Room for what a template adds once (a default system preamble, a generation prompt)."""
REOPEN_MESSAGE = "One more question about all of that, please."
"""The message the reopen adds after W1 (``branching.reopen``)."""


def w1_longest_branch(tokenize, reply_tokens: int) -> tuple[int, int]:
    """Tokens of the text of W1's longest branch and its message count: the original chat
    with its three follow-up questions, their replies, and the reopen's question and reply
    at its end (an edited branch is shorter: it stops at the edit's reply)."""
    texts = w1_texts(tokenize)
    fixed = [texts["system"], *texts["users"], *texts["replies"], *texts["follow_ups"], REOPEN_MESSAGE]
    replies = len(texts["follow_ups"]) + 1
    return sum(len(tokenize(text, False)) for text in fixed) + replies * reply_tokens, len(fixed) + replies


def w1_context(model: Path, reply_tokens: int, after: int = 0) -> int:
    """A context size that holds W1's longest branch on ``model`` and ``after`` tokens
    more (what is measured on top of it: ``overhead.TOKENS_ADDED``), in steps of 256.

    The texts are sized in the model's own tokens (``w1_texts``), so the chat's length
    differs between models and between made models of other seeds: a fixed 8,192 was
    one token short on some. The tokenizer comes from a vocabulary-only load (no weights).
    """
    from sessions.llama.native import lib

    L = lib()
    params = L.llama_model_default_params()
    params.vocab_only = True
    handle = L.llama_model_load_from_file(str(model).encode(), params)
    if not handle:
        raise RuntimeError(f"llama.cpp could not read the vocabulary of {model}")
    try:
        vocab = L.llama_model_get_vocab(handle)

        def tokenize(text: str, add_bos: bool) -> list[int]:
            data = text.encode()
            out = (L.llama_token * (len(data) + 8))()
            count = L.llama_tokenize(vocab, data, len(data), out, len(out), add_bos, True)
            assert count >= 0, "a token for each byte and a few more always fit"
            return list(out[:count])

        tokens, messages = w1_longest_branch(tokenize, reply_tokens)
    finally:
        L.llama_model_free(handle)
    need = tokens + messages * TEMPLATE_TOKENS_PER_MESSAGE + TEMPLATE_TOKENS_FIXED + after
    return -(-need // 256) * 256
