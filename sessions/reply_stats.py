"""The numbers every reply reports, from what the engine measured.

Time to first token runs from the request (after the model was loaded) to the first
sampled token, so it includes planning, restoring and prompt evaluation: what a person
waits for. Generation speed excludes that first wait.
"""

from __future__ import annotations

import time

from sessions.stop_reason import StopReason
from sessions.tree import GenerationStats


def reply_stats(prep, result, t_request: float, *, room: int, wanted: int,
                decode_rates: tuple[float, float] = (0.0, 0.0)) -> GenerationStats:
    """``decode_rates``: the engine's measured seconds per token in a batch and alone
    (``GenerationStats.decode_batch_seconds``; 0: not measured)."""
    t_end = time.perf_counter()
    first = result.first_token_at
    n = len(result.tokens)
    reason = StopReason(result.stop_reason)
    if reason is StopReason.LENGTH and room < wanted and n >= room:
        reason = StopReason.CONTEXT_FULL  # the reply was cut by the context, not by its length limit
    return GenerationStats(
        tokens_restored=prep.tokens_restored,
        tokens_evaluated=prep.tokens_evaluated,
        tokens_generated=n,
        prompt_seconds=prep.seconds,
        ttft_seconds=(first - t_request) if first else 0.0,
        generation_tps=(n - 1) / (t_end - first) if first and n > 1 and t_end > first else 0.0,
        stop_reason=reason,
        decode_batch_seconds=decode_rates[0],
        decode_step_seconds=decode_rates[1],
    )
