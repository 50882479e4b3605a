"""A second, short-lived context where several versions of a reply are sampled at once.

The app's own context has two sequences (``sequences``), and its states are what every
restore must reproduce bit for bit. Several versions decoded in one batch get other last
bits than each decoded alone, so they are sampled here, in a context with one sequence
per version, and never kept: the versions' tokens are stored, and the app's context then
decodes each of them the way a rebuild does (``sessions.branching.versions``).

The question's state is copied in from the app's context (``load``) and shared between
the sequences with ``llama_memory_seq_cp``, so the prompt is evaluated once, in the app's
context, whatever the number of versions.
"""

from __future__ import annotations

import ctypes
import time
from typing import Any

import numpy as np

from sessions.errors import BatchUnavailable
from sessions.llama.context import ContextFull, ContextParams, DecodeError, free_native, native_params
from sessions.llama.model import LlamaModel
from sessions.llama.native import held_errors, lib
from sessions.llama.state_blob import FLAGS_FULL, Buffer, as_array, pointer

PAD = 256
"""The context's size is rounded up to this many tokens (llama.cpp pads it too)."""


class BatchContext:
    """``n_seq`` sequences over one unified cache, made with the app context's settings."""

    def __init__(self, model: LlamaModel, params: ContextParams, n_seq: int, n_ctx: int):
        L = lib()
        self._L = L
        self.n_seq = n_seq
        self.n_vocab = model.info.n_vocab
        # At least the app context's two sequences: a sliding window's cache is sized by them.
        cp = native_params(L, params, n_ctx=-(-n_ctx // PAD) * PAD, n_batch=max(params.n_batch, n_seq),
                           n_seq_max=max(n_seq, 2))
        self._ctx: Any = None
        self._batch: Any = None
        with held_errors() as errors:
            self._ctx = L.llama_init_from_model(model.handle, cp)
        if not self._ctx:
            why = (errors[-1].partition(": ")[2] or errors[-1]) if errors else "out of memory?"
            raise BatchUnavailable(f"llama.cpp could not make a context for {n_seq} versions at once "
                                   f"({cp.n_ctx} tokens): {why}")
        self._mem = L.llama_get_memory(self._ctx)
        self._batch = L.llama_batch_init(n_seq, 0, 1)
        self.decode_seconds = 0.0
        """Time inside ``llama_decode`` (what the work around it is measured against)."""

    def load(self, blob: Buffer) -> None:
        """The question's state (a whole sequence's, ``FLAGS_FULL``) into every sequence."""
        data = as_array(blob)
        if self._L.llama_state_seq_set_data_ext(self._ctx, pointer(data), len(data), 0, FLAGS_FULL) == 0:
            raise BatchUnavailable("the question's state did not load into the context for several versions")
        for seq in range(1, self.n_seq):
            self._L.llama_memory_seq_cp(self._mem, 0, seq, -1, -1)

    def step(self, items: list[tuple[int, int, int]]) -> None:
        """Decode one token for each (token, position, sequence), all in one batch; each
        token's logits are kept (``logits``)."""
        b = self._batch
        b.n_tokens = len(items)
        for i, (token, pos, seq) in enumerate(items):
            b.token[i], b.pos[i], b.n_seq_id[i], b.logits[i] = token, pos, 1, 1
            b.seq_id[i][0] = seq
        t0 = time.perf_counter()
        rc = self._L.llama_decode(self._ctx, b)
        self._L.llama_synchronize(self._ctx)
        self.decode_seconds += time.perf_counter() - t0
        if rc == 1:
            raise ContextFull("no room left in the KV cache for the versions")
        if rc != 0:
            raise DecodeError(f"llama_decode failed with code {rc}")

    def logits(self, i: int) -> np.ndarray:
        """The logits after item ``i`` of the last step: a view, valid until the next one."""
        return np.ctypeslib.as_array(self._L.llama_get_logits_ith(self._ctx, i), shape=(self.n_vocab,))

    def row(self, i: int) -> _Row:
        """Item ``i`` of the last step, as ``Sampler.sample``'s ``output_of`` takes a context."""
        return _Row(self, i)

    def sample(self, chain: ctypes.c_void_p, i: int) -> int:
        return int(self._L.llama_sampler_sample(chain, self._ctx, i))

    def close(self) -> None:
        free_native(self._L, self._ctx, self._batch)
        self._ctx = self._batch = None

    def __enter__(self) -> BatchContext:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Row:
    """One item of a batch's last step, sampled in C as ``LlamaContext.sample_last`` does."""

    __slots__ = ("_batch", "_i")

    def __init__(self, batch: BatchContext, i: int) -> None:
        self._batch, self._i = batch, i

    def sample_last(self, chain) -> int:
        return self._batch.sample(chain, self._i)
