"""Several versions of a reply sampled in one batch, after the question made live once.

The question is live in the app's context (``BranchEngine.prepare``), its logits in hand.
Its state is copied into a ``BatchContext`` with one sequence per version, and each step
decodes one token of every version still going in a single ``llama_decode``: on a CPU
four versions cost about twice one, on a GPU about one.

Nothing of the batch is kept. A batch gives each version other last bits than decoding
it alone would, so the versions are stored as replies that were not sampled alone
(``GenerationStats.batch``; ``stepped`` false in ``sessions.controller.branch_tokens``), which every
rebuild decodes as one batch from the question's state; the controller then has the
app's context decode each of them that way (``prepare``), which leaves a rebuild's
cells and checkpoints by construction. The app's context is only read here (the
question's state), so the question's own checkpoints are still there to be taken.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from sessions.branching.branch_engine import BranchEngine, GenerateResult
from sessions.errors import BatchUnavailable
from sessions.llama.batch_context import BatchContext
from sessions.llama.context import ContextFull
from sessions.llama.detokenizer import Detokenizer
from sessions.llama.sequences import LIVE
from sessions.llama.state_blob import FLAGS_FULL
from sessions.stop_reason import StopReason

if TYPE_CHECKING:
    from sessions.llama.sampler import Sampler

VersionText = Callable[[int, str], None]
"""(version, text): more text of one version."""


def batch_limit(engine: BranchEngine) -> int:
    """The most tokens the context of several versions at once may hold: as many as the
    chat's own context. Its memory is then at most the memory the chat already takes, which
    the user chose with ``-c``; versions that need more (a long limit times many versions)
    are written one after another in the chat's own context instead, with a sentence that
    says so (``BatchUnavailable``)."""
    return engine.ctx.n_ctx


def sample_versions(engine: BranchEngine, logits: np.ndarray, samplers: Sequence[Sampler], *, max_tokens: int,
                    on_text: VersionText | None = None,
                    should_stop: Callable[[], bool] = lambda: False) -> list[GenerateResult]:
    """One reply per sampler after the live sequence, sampled in one batch (see the module
    docstring); the live sequence is left as it was, and the checkpoints its ``prepare``
    left to read after the reply are read now. A stop ends every version."""
    t0 = time.perf_counter()
    began, n = len(engine.live), len(samplers)
    tokens: list[list[int]] = [[] for _ in range(n)]
    detoks = [Detokenizer(engine.model.piece) for _ in range(n)]
    for detok in detoks:  # a character a reply gone on from left unfinished (none after a question)
        detok.prime(engine.live[max(0, began - 4):began])
    reasons: list[StopReason | None] = [None] * n
    first: list[float | None] = [None] * n
    row: dict[int, int] = {}
    """Each version's item in the last step: where its logits are."""
    needed = began + n * max_tokens + 1
    if needed > batch_limit(engine):
        raise BatchUnavailable(f"{n} versions of up to {max_tokens} tokens after {began} would need a context of "
                               f"{needed} tokens at once, more than the {engine.ctx.n_ctx} of the chat's own")
    with BatchContext(engine.model, engine.ctx.params, n, needed) as batch:
        batch.load(engine.ctx.state_read(LIVE, FLAGS_FULL))
        going = list(range(n))
        for step in range(max_tokens):
            if should_stop():
                for k in going:
                    reasons[k] = StopReason.CANCELLED
                going = []
                break
            items = []
            for k in going:
                if k in row:
                    token = samplers[k].sample(batch.logits(row[k]), output_of=batch.row(row[k]))
                else:
                    token = samplers[k].sample(logits)
                first[k] = first[k] or time.perf_counter()
                if engine.model.is_eog(token):
                    reasons[k] = StopReason.EOG
                else:
                    items.append((token, began + step, k))
            if not items:
                going = []
                break
            try:
                batch.step(items)
            except ContextFull:  # sized for every version's limit: only a bug gets here
                for _, _, k in items:
                    reasons[k] = StopReason.CONTEXT_FULL
                going = []
                break
            going = []
            for i, (token, _, k) in enumerate(items):
                tokens[k].append(token)
                row[k] = i
                going.append(k)
                text = detoks[k].push(token)
                if text and on_text:
                    on_text(k, text)
        for k in range(n):
            tail = detoks[k].finish()
            if tail and on_text:
                on_text(k, tail)
    seconds = time.perf_counter() - t0
    engine.captures.flush()
    return [GenerateResult(tokens[k], detoks[k].text, reasons[k] or StopReason.LENGTH, first[k], seconds)
            for k in range(n)]
