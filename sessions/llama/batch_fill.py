"""Filling llama.cpp's batch between two decodes with as little Python as it takes.

A prefill's work outside ``llama_decode`` is mostly the few Python calls between two
batches, and there they run with cold CPU caches: a decode streams the model's weights
through them, so the first numpy call after it fetches numpy's own code from memory
again: a few ``ctypes.memmove`` calls from arrays prepared once move the same bytes in a
fraction of the time numpy's assignments take (the figures: ``docs/benchmarks.md``, "What
the engine's choices rest on"). Every prompt batch pays that, so prompt batches are filled
from a ``TokenIds`` (the branch's tokens as one int32 array, its address taken once) and a
table of positions; one generated token is written through ctypes directly.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence

import numpy as np

SHORT = 8
"""Batches up to this many tokens are written element by element (a generated token)."""
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


def _address(array: np.ndarray) -> int:
    return int(array.__array_interface__["data"][0])


def _target(field) -> int:
    """Where a ``llama_batch`` array field points (llama_batch_init allocated it)."""
    address = ctypes.cast(field, ctypes.c_void_p).value
    if not address:
        raise ValueError("a llama_batch without its arrays")
    return address


class TokenIds:
    """Token ids as one int32 array whose address is taken once, for batches copied out of it."""

    __slots__ = ("array", "address")

    def __init__(self, tokens: Sequence[int] | np.ndarray) -> None:
        self.array = np.array(tokens, dtype=np.int32)  # a copy: the address must outlive the caller's list
        self.address = _address(self.array)


class BatchFiller:
    """Writes tokens, positions and logits flags into one ``llama_batch`` of the live sequence.

    Every token of every batch belongs to the live sequence alone, so the sequence ids are
    written once, here.
    """

    def __init__(self, batch, capacity: int, n_ctx: int, seq: int) -> None:
        self._batch = batch
        self._capacity = capacity
        self._token = _target(batch.token)
        self._pos = _target(batch.pos)
        self._flags = _target(batch.logits)
        self._positions = np.arange(max(n_ctx, capacity), dtype=np.int32)
        """Position ``p`` at index ``p``: a batch's positions are one slice of it."""
        self._n_positions = len(self._positions)
        self._no_logits = np.zeros(capacity, dtype=np.int8)
        self._positions_at = _address(self._positions)
        self._no_logits_at = _address(self._no_logits)
        np.ctypeslib.as_array(batch.n_seq_id, shape=(capacity,))[:] = 1
        for i in range(capacity):
            batch.seq_id[i][0] = seq

    def span(self, ids: TokenIds, a: int, b: int, want_logits: bool) -> None:
        """``ids[a:b]`` at positions ``a..b-1`` (a prompt batch: its tokens sit where they stand)."""
        if not 0 <= a < b <= len(ids.array):
            raise ValueError(f"tokens {a}..{b} of {len(ids.array)}")
        self._check(b - a, a)
        self._fill(ids.address + 4 * a, b - a, a, want_logits)

    def tokens(self, tokens: Sequence[int] | np.ndarray, start: int, want_logits: bool) -> None:
        """``tokens`` at positions ``start..``."""
        n = len(tokens)
        self._check(n, start)
        if n <= SHORT:
            batch = self._batch
            for i in range(n):
                token = int(tokens[i])
                if not INT32_MIN <= token <= INT32_MAX:  # ctypes would keep the low 32 bits
                    raise ValueError(f"token id {token} is not a 32-bit integer")
                batch.token[i] = token
                batch.pos[i] = start + i
                batch.logits[i] = 0
            batch.logits[n - 1] = 1 if want_logits else 0
            batch.n_tokens = n
            return
        ids = TokenIds(tokens)
        self._fill(ids.address, n, start, want_logits)

    def _check(self, n: int, start: int) -> None:
        if not 0 < n <= self._capacity or start < 0 or start + n > self._n_positions:
            raise ValueError(f"a batch of {n} tokens at position {start} does not fit")

    def _fill(self, token_at: int, n: int, start: int, want_logits: bool) -> None:
        """The three copies, for a batch its caller checked (``_check``)."""
        ctypes.memmove(self._token, token_at, 4 * n)
        ctypes.memmove(self._pos, self._positions_at + 4 * start, 4 * n)
        ctypes.memmove(self._flags, self._no_logits_at, n)
        if want_logits:
            self._batch.logits[n - 1] = 1
        self._batch.n_tokens = n
