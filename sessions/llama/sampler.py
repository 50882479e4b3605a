"""Token sampling from logits held in numpy, or still in the context.

The engine keeps the logits of every checkpoint it saves, so a regenerate at a restored
message boundary samples without decoding anything. llama.cpp's ``llama_sampler_sample``
only reads logits from a context, so for those this applies the same sampler chain to a
``llama_token_data_array`` built from a numpy array instead.

Building that array over the whole vocabulary costs more than the chain itself: with a
large vocabulary, after a decode (caches cold), a good part of a small model's token on a
GPU (``docs/benchmarks.md``, "What the engine's choices rest on"). Greedy sampling with
no repeat penalty needs none of it: the chain's greedy sampler takes the first largest
logit, which is what ``np.argmax`` finds, a tenth of the time. Other sampling,
when the logits are those of the context's last decode (every generated token after the
first), lets llama.cpp fill the array itself in C (``llama_sampler_sample``): the same
array, so the same token, without numpy's three passes.
"""

from __future__ import annotations

import ctypes
import random
from typing import Protocol

import numpy as np

from sessions.llama.native import lib
from sessions.sampling import SamplingSettings


class SamplesLast(Protocol):
    """Where the logits of a decode are, for the chain to sample them there
    (``LlamaContext``, or one version's row of a batch)."""

    def sample_last(self, chain) -> int | None: ...


_TOKEN_DATA = np.dtype([("id", "<i4"), ("logit", "<f4"), ("p", "<f4")], align=True)


class Sampler:
    """A llama.cpp sampler chain for one reply (it holds the repeat-penalty history)."""

    def __init__(self, settings: SamplingSettings, n_vocab: int):
        problem = settings.out_of_range()
        if problem:  # ctypes would wrap it, or hand llama.cpp a NaN
            raise ValueError(problem)
        L = lib()
        self._L = L
        self.settings = settings
        self.seed = settings.seed if settings.seed >= 0 else random.getrandbits(31)
        self._chain = L.llama_sampler_chain_init(L.llama_sampler_chain_default_params())
        add = lambda s: L.llama_sampler_chain_add(self._chain, s)  # noqa: E731
        if settings.repeat_penalty != 1.0 and settings.repeat_last_n != 0:
            add(L.llama_sampler_init_penalties(n_vocab, settings.repeat_last_n, settings.repeat_penalty, 0.0, 0.0))
        if settings.greedy:
            add(L.llama_sampler_init_greedy())
        else:
            if settings.top_k > 0:
                add(L.llama_sampler_init_top_k(settings.top_k))
            if settings.top_p < 1.0:
                add(L.llama_sampler_init_top_p(settings.top_p, 1))
            if settings.min_p > 0.0:
                add(L.llama_sampler_init_min_p(settings.min_p, 1))
            add(L.llama_sampler_init_temp(settings.temperature))
            add(L.llama_sampler_init_dist(self.seed))
        self._data = np.zeros(n_vocab, dtype=_TOKEN_DATA)
        self._ids = np.arange(n_vocab, dtype=np.int32)
        unpenalised = settings.repeat_penalty == 1.0 or settings.repeat_last_n == 0
        self._argmax = unpenalised and settings.greedy
        """Greedy alone: the chain's answer is the first largest logit."""

    def sample(self, logits: np.ndarray, *, output_of: SamplesLast | None = None) -> int:
        """Pick the next token from ``logits`` and record it in the chain's history.

        ``output_of``: where the decode that gave ``logits`` left them; the chain then reads
        them there.
        """
        if self._argmax:
            token = int(np.argmax(logits))
            if logits[token] == logits[token]:  # not NaN: argmax stops at the first NaN, the chain never takes one
                return token  # greedy alone keeps no history
        if output_of is not None:
            sampled = output_of.sample_last(self._chain)
            if sampled is not None:
                return sampled
        data = self._data
        data["id"] = self._ids
        data["logit"] = logits
        data["p"] = 0.0
        arr = self._L.llama_token_data_array(
            data=data.ctypes.data_as(self._L.llama_token_data_p),
            size=len(data),
            selected=-1,
            sorted=False,
        )
        self._L.llama_sampler_apply(self._chain, ctypes.byref(arr))
        if not 0 <= arr.selected < arr.size:
            raise RuntimeError("the sampler chain selected no token")
        token = int(arr.data[arr.selected].id)
        self._L.llama_sampler_accept(self._chain, token)
        return token

    def close(self) -> None:
        if self._chain:
            self._L.llama_sampler_free(self._chain)
            self._chain = None

    def __del__(self) -> None:  # pragma: no cover
        try:
            self.close()
        except Exception:
            pass
