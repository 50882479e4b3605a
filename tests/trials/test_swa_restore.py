"""A long sliding-window branch restores exactly (an issue the crash trials found).

The crash trials compare the logits of every restored branch with a from-scratch run.
On the gemma3 model (interleaved sliding-window attention, window 32) they differed (by
1e-3 to 1e-2) as soon as the branch was longer than llama.cpp's sliding-window cache,
which with ``swa_full`` off holds ``2 * n_swa + n_ubatch`` cells rounded up to 256.
The cause was the order of the cells in the wrapped ring: flash attention sums over
cells in buffer order, and a restore laid them out afresh. The engine now re-lays the
window in position order at every segment boundary on every route
(``sessions.branching.swa_ring``); these tests guard that, below and past the ring size.
"""

from __future__ import annotations

import numpy as np
import pytest

from sessions.branching.branch_engine import BranchEngine, PrepareResult
from sessions.branching.segments import message_ends
from sessions.checkpoints import CheckpointStore
from sessions.llama.context import ContextParams, LlamaContext
from sessions.synth import make_model

pytestmark = pytest.mark.engine

PARAMS = ContextParams(n_ctx=2048, n_batch=16, n_threads=1)
WINDOW = 32
SWA_CACHE_CELLS = 256
TURNS = 12


def _logits_after(model, store, tokens, ends, stepped, extra: int = 4) -> tuple[PrepareResult, list[np.ndarray]]:
    """A new context prepares the branch (restoring what ``store`` holds); what that took,
    and the logits after it and after each of ``extra`` greedy tokens."""
    ctx = LlamaContext(model, PARAMS)
    try:
        engine = BranchEngine(model, ctx, store)
        result = engine.prepare(tokens, ends, stepped=stepped)
        out, current, pos = [result.logits.copy()], result.logits, len(tokens)
        for _ in range(extra):
            current = ctx.decode([int(np.argmax(current))], pos)
            out.append(current.copy())
            pos += 1
        return result, out
    finally:
        ctx.close()


@pytest.fixture(scope="module")
def gemma3():
    from sessions.llama.model import LlamaModel

    model = LlamaModel(make_model("gemma3", "tiny", swa_window=WINDOW), on_progress=lambda _f: None)
    yield model
    model.close()


def _conversation(model):
    msgs = [model.tokenize(f"turn {i}: tell me about the sea and the boats at night, and the stars",
                           add_bos=(i == 0)) for i in range(TURNS)]
    stepped = [i % 2 == 1 for i in range(TURNS)]  # replies are replayed one token at a time
    return msgs, stepped


def _branch(msgs, stepped, k):
    return [t for m in msgs[:k] for t in m], message_ends([len(m) for m in msgs[:k]]), stepped[:k]


def test_short_sliding_window_branch_restores_exactly(gemma3, tmp_path):
    msgs, stepped = _conversation(gemma3)
    k = next(k for k in range(TURNS, 0, -1) if len(_branch(msgs, stepped, k)[0]) < SWA_CACHE_CELLS - 16)
    with CheckpointStore(tmp_path, ram_bytes=64 << 20, disk_bytes=1 << 30) as store:
        for turn in range(1, k + 1):  # one "process" per turn, each restoring the last
            _logits_after(gemma3, store, *_branch(msgs, stepped, turn), extra=0)
        prep, restored = _logits_after(gemma3, store, *_branch(msgs, stepped, k))
    fresh = _logits_after(gemma3, None, *_branch(msgs, stepped, k))[1]
    # The last pass above prepared this very branch: all of it, logits too, comes back from
    # the store (were the restore skipped, both sides would be the same recompute).
    assert (prep.tokens_restored, prep.tokens_evaluated) == (len(_branch(msgs, stepped, k)[0]), 0)
    assert all(np.array_equal(a, b) for a, b in zip(restored, fresh, strict=True))


def test_long_sliding_window_branch_restores_exactly(gemma3, tmp_path):
    msgs, stepped = _conversation(gemma3)
    assert len(_branch(msgs, stepped, TURNS)[0]) > SWA_CACHE_CELLS + 32
    with CheckpointStore(tmp_path, ram_bytes=64 << 20, disk_bytes=1 << 30) as store:
        for turn in range(1, TURNS + 1):
            _logits_after(gemma3, store, *_branch(msgs, stepped, turn), extra=0)
        prep, restored = _logits_after(gemma3, store, *_branch(msgs, stepped, TURNS))
    fresh = _logits_after(gemma3, None, *_branch(msgs, stepped, TURNS))[1]
    assert (prep.tokens_restored, prep.tokens_evaluated) == (len(_branch(msgs, stepped, TURNS)[0]), 0)
    differences = [float(np.max(np.abs(a - b))) for a, b in zip(restored, fresh, strict=True)]
    assert max(differences) == 0.0, f"largest logit difference {max(differences):.3g}"
