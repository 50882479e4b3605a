"""Batches filled without numpy hold what llama.cpp must see, and nothing out of range."""

from __future__ import annotations

import numpy as np
import pytest

from sessions.llama.batch_fill import SHORT, BatchFiller, TokenIds
from sessions.llama.native import lib

CAPACITY = 16
N_CTX = 64


@pytest.fixture
def batch():
    L = lib()
    made = L.llama_batch_init(CAPACITY, 0, 1)
    yield made
    L.llama_batch_free(made)


def contents(batch) -> tuple[list[int], list[int], list[int], list[int]]:
    n = batch.n_tokens
    return ([batch.token[i] for i in range(n)], [batch.pos[i] for i in range(n)],
            [batch.logits[i] for i in range(n)], [batch.seq_id[i][0] for i in range(n)])


def test_a_prompt_span_sits_at_its_own_positions(batch):
    filler = BatchFiller(batch, CAPACITY, N_CTX, seq=0)
    ids = TokenIds(list(range(1000, 1040)))
    filler.span(ids, 20, 32, want_logits=False)
    tokens, pos, flags, seqs = contents(batch)
    assert tokens == list(range(1020, 1032))
    assert pos == list(range(20, 32))
    assert flags == [0] * 12
    assert seqs == [0] * 12
    filler.span(ids, 32, 36, want_logits=True)  # a shorter batch after a longer one: no stale flags
    tokens, pos, flags, _ = contents(batch)
    assert (tokens, pos, flags) == (list(range(1032, 1036)), list(range(32, 36)), [0, 0, 0, 1])


@pytest.mark.parametrize("n", [1, SHORT, SHORT + 1, CAPACITY])
def test_tokens_short_and_long_fill_the_same_way(batch, n):
    filler = BatchFiller(batch, CAPACITY, N_CTX, seq=0)
    filler.span(TokenIds([7] * CAPACITY), 0, CAPACITY, want_logits=True)  # leave other values behind
    given = np.arange(500, 500 + n, dtype=np.int64)
    filler.tokens(list(given) if n % 2 else given, 40, want_logits=True)
    tokens, pos, flags, _ = contents(batch)
    assert tokens == list(range(500, 500 + n))
    assert pos == list(range(40, 40 + n))
    assert flags == [0] * (n - 1) + [1]


def test_a_span_never_reads_past_its_tokens(batch):
    filler = BatchFiller(batch, CAPACITY, N_CTX, seq=0)
    ids = TokenIds(list(range(10)))
    for a, b in [(5, 11), (-1, 3), (4, 4), (6, 5)]:
        with pytest.raises(ValueError):
            filler.span(ids, a, b, want_logits=False)


def test_a_batch_never_writes_past_the_batch_or_the_positions(batch):
    filler = BatchFiller(batch, CAPACITY, N_CTX, seq=0)
    with pytest.raises(ValueError):
        filler.span(TokenIds(list(range(CAPACITY + 1))), 0, CAPACITY + 1, want_logits=False)
    with pytest.raises(ValueError):
        filler.tokens(list(range(CAPACITY)), N_CTX - CAPACITY + 1, want_logits=False)


def test_a_short_batch_is_held_to_the_same_limits():
    L = lib()
    small = L.llama_batch_init(2, 0, 1)
    try:
        filler = BatchFiller(small, 2, N_CTX, seq=0)
        with pytest.raises(ValueError):
            filler.tokens([1, 2, 3], 0, want_logits=True)  # within SHORT, beyond the batch
        with pytest.raises(ValueError):
            filler.tokens([1], N_CTX, want_logits=True)
    finally:
        L.llama_batch_free(small)


@pytest.mark.parametrize("tokens", [[1 << 32], [5, -(1 << 31) - 1], list(range(SHORT)) + [1 << 40]])
def test_a_token_id_beyond_32_bits_is_refused_not_cut(batch, tokens):
    filler = BatchFiller(batch, CAPACITY, N_CTX, seq=0)
    with pytest.raises((ValueError, OverflowError)):
        filler.tokens(tokens, 0, want_logits=True)
