"""The W1 workload: a long branching chat with realistic turn sizes.

Texts are pseudo-English made from a fixed word list with a seeded generator, sized in
tokens of the model under test (system about 200, user turns about 120, replies about
380), so runs are repeatable and the numbers are comparable across models.
"""

from __future__ import annotations

import random

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


def w1_texts(tokenize, *, turns: int = 12, extra_turns: int = 3, seed: int = 1) -> dict:
    """System prompt, user turns, replies, edited turns and follow-up questions."""
    rng = random.Random(seed)
    return {
        "system": text_of(tokenize, 200, rng),
        "users": [text_of(tokenize, 120, rng) for _ in range(turns)],
        "replies": [text_of(tokenize, 380, rng) for _ in range(turns)],
        "edits": {k: text_of(tokenize, 120, rng) for k in (2, 6, 11)},
        "follow_ups": [text_of(tokenize, 120, rng) for _ in range(extra_turns)],
    }
