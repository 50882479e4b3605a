"""How long a sliding window stays in the ring, and that a piece left for later is read then.

The ring has ``N`` cells and position ``p`` lives in cell ``p mod N`` (``swa_ring``). The
window after token ``end - 1`` is positions ``end - n_swa .. end - 1``; its oldest cell is
first reused by position ``end - n_swa + N``. So exactly ``N - n_swa`` tokens after it the
window is still whole, and one more takes it: both the ring's reads and the captures'
decision to read a piece before the decode overwrites it must draw the line there.
"""

from __future__ import annotations

import numpy as np

from sessions.branching.swa_ring import SwaRing
from sessions.checkpoints import CheckpointStore, prefix_hash
from sessions.llama.context import LlamaContext
from sessions.llama.sequences import LIVE

from .test_exactness import check, engine_for
from .test_swa_ring import PARAMS, decode, gemma3, tokens  # noqa: F401 (fixtures)

END = 300


def test_a_window_outlives_ring_minus_window_tokens_and_no_more(gemma3, tokens):  # noqa: F811
    ctx = LlamaContext(gemma3, PARAMS)
    try:
        ring = SwaRing(ctx, gemma3.info.n_swa)
        lasts = ring.size - ring.n_swa
        decode(ctx, tokens, 0, END)
        then = ring.window()
        assert then is not None
        decode(ctx, tokens, END, END + lasts)
        assert ctx.pos_min(LIVE) == END - ring.n_swa  # the window's oldest cell is still there
        assert not ring.overwritten(END - ring.n_swa, ctx.pos_max(LIVE))
        later = ring.piece(0, END, checked=False)
        assert later is not None and np.array_equal(later, then)
        decode(ctx, tokens, END + lasts, END + lasts + 1)
        assert ctx.pos_min(LIVE) == END - ring.n_swa + 1  # one token more reused it
        assert ring.overwritten(END - ring.n_swa, ctx.pos_max(LIVE))
        assert ring.piece(0, END, checked=False) is None
    finally:
        ctx.close()


def test_a_snapshot_whose_window_lasts_to_the_prompt_end_is_saved(gemma3, tokens, tmp_path):  # noqa: F811
    """A prompt that ends exactly ``N - n_swa`` tokens after a boundary: the window there is
    left for the flush (the decode does not overwrite it), and the flush reads it."""
    ck = tmp_path / "ck"
    with CheckpointStore(ck, ram_bytes=256 << 20, disk_bytes=1 << 30) as store:
        engine = engine_for(gemma3, store)
        assert engine.ring is not None
        lasts = engine.ring.size - engine.n_swa
        msgs = [tokens[:END], tokens[END : END + lasts]]
        engine.prepare(msgs[0] + msgs[1], [END, END + lasts])
        assert store.has(engine.compat, prefix_hash(tokens[:END]), "snapshot")
        engine.ctx.close()
    with CheckpointStore(ck, ram_bytes=256 << 20, disk_bytes=1 << 30) as store:
        other = tokens[600:640]
        result = check(engine_for(gemma3, store), gemma3, [msgs[0], other])
        assert result.tokens_evaluated == len(other)  # the window at END came back from disk
