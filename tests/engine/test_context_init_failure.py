"""A context whose set-up fails after llama.cpp made it is freed there and then.

The engine closes the model when making the context fails; a half-made context left to
the garbage collector would call ``llama_free`` later, on a context whose model is gone
(a use after free). The failure is made real by breaking the first state read, the last
step of ``LlamaContext.__init__``.
"""

from __future__ import annotations

import pytest

from sessions.llama.context import ContextParams, LlamaContext
from sessions.llama.model import LlamaModel
from sessions.llama.native import lib


def test_a_failure_after_llama_init_frees_the_context_before_it_propagates(model_paths, monkeypatch):
    L = lib()
    made: list[object] = []
    freed: list[object] = []
    init, free = L.llama_init_from_model, L.llama_free

    frees_before: list[int] = []

    def init_spy(model, params):
        ctx = init(model, params)
        made.append(ctx)
        frees_before.append(len(freed))
        return ctx

    def free_spy(ctx):
        freed.append(ctx)
        free(ctx)

    def broken_read(self, *args, **kwargs):
        raise MemoryError("no room for the empty state")

    monkeypatch.setattr(L, "llama_init_from_model", init_spy)
    monkeypatch.setattr(L, "llama_free", free_spy)
    monkeypatch.setattr(LlamaContext, "state_read", broken_read)
    model = LlamaModel(model_paths["llama"])
    try:
        with pytest.raises(MemoryError) as caught:
            LlamaContext(model, ContextParams(n_ctx=256, n_batch=64))
        # The traceback still holds the half-made object: only an explicit free counts.
        half = caught.traceback[-1].frame.f_locals["self"]

        def ours() -> list[object]:
            """The frees of the context made here (the garbage collector may free other
            tests' contexts meanwhile: those are not this test's, even one that had the
            same address before ours was made there)."""
            return [ctx for ctx in freed[frees_before[0]:] if ctx in made]

        assert made and ours() == made
        assert half._ctx is None
        half.close()  # and a second close (or the finaliser) frees nothing twice
        assert ours() == made
    finally:
        model.close()
