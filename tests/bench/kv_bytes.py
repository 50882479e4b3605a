"""What the engine's checkpoints cost in bytes, against the KV the model itself holds.

Every figure here is a count of bytes, exact on any machine, set against the KV bytes of
the tokens concerned: the K and V of a token in every layer that keeps cells of its own
(each token's sliding-window KV counted once), as llama.cpp serialises them. That size
comes from the context itself (``measure``), so it holds for any GGUF; for a made model
it is set beside ``sessions.synth.memory_bytes``, which computes it from the model's shape
(the context's figure is larger by the few bytes of cell metadata a saved state carries:
positions and sequence ids).

Goals (``budget_*`` fields; issue "Bytes at the size of real models"):
- during a prefill, bytes copied out of the model's memory, the read-out after it
  included, are at most 1.2x the KV bytes of the prefilled tokens;
- a tree's checkpoints on disk are at most 1.2x the KV bytes of its unique tokens (on a
  model whose memory is attention and windows; a recurrent state is on top, and its
  bytes are given apart).
"""

from __future__ import annotations

from dataclasses import dataclass

BUDGET_READ_VS_KV = 1.2
BUDGET_DISK_VS_KV = 1.2

PROBE_TOKENS = (8, 4)
"""Two lengths of a range at the live sequence's end whose saved sizes are compared: their
difference over the difference in tokens is the bytes of one token, fixed parts (headers,
a recurrent state) cancelled. Short enough to lie inside any window."""


@dataclass(frozen=True)
class KvBytes:
    """The KV bytes of one token of a model, as its context serialises them."""

    per_token: float
    """Every layer that keeps cells of its own."""
    window_per_token: float
    """Of ``per_token``, the windowed layers' share (a window snapshot's pieces hold it)."""
    spec_per_token: int | None = None
    """``memory_bytes(spec).kv_per_token`` for a made model (None: not made here)."""

    @property
    def cells_per_token(self) -> float:
        """The layers that keep every token (what a ``cells`` checkpoint holds)."""
        return self.per_token - self.window_per_token

    def fields(self) -> dict:
        out = {"kv_bytes_per_token": round(self.per_token, 1),
               "kv_window_bytes_per_token": round(self.window_per_token, 1),
               "kv_cells_bytes_per_token": round(self.cells_per_token, 1)}
        if self.spec_per_token is not None:
            out.update({"kv_bytes_per_token_from_shape": self.spec_per_token,
                        "kv_cell_metadata_bytes_per_token": round(self.per_token - self.spec_per_token, 1)})
        return out


def measure(ctx, kind, live_tokens: int, spec=None) -> KvBytes:
    """KV bytes per token of the model behind ``ctx``, from the sizes of short ranges of
    its live sequence copied to the spare sequence (no byte is read out: sizes only).

    ``kind`` says what a partial state holds: the window of a windowed model, the
    recurrent state of a hybrid (whose difference cancels); a recurrent model keeps no KV.
    """
    from sessions.llama.state_blob import FLAGS_FULL, FLAGS_PARTIAL
    from sessions.memory_kind import MemoryKind
    from sessions.synth import memory_bytes

    spec_bytes = memory_bytes(spec).kv_per_token if spec is not None else None
    long, short = PROBE_TOKENS
    if kind is MemoryKind.RECURRENT or live_tokens < long:
        return KvBytes(0.0, 0.0, spec_bytes)
    full = [_range_size(ctx, live_tokens - n, live_tokens, FLAGS_FULL) for n in PROBE_TOKENS]
    window = 0.0
    if kind is MemoryKind.SWA:
        part = [_range_size(ctx, live_tokens - n, live_tokens, FLAGS_PARTIAL) for n in PROBE_TOKENS]
        window = (part[0] - part[1]) / (long - short)
    return KvBytes((full[0] - full[1]) / (long - short), window, spec_bytes)


def _range_size(ctx, start: int, end: int, flags: int) -> int:
    from sessions.llama.sequences import LIVE, SPARE

    ctx.seq_cp(LIVE, SPARE, start, end)
    try:
        return ctx.state_size(SPARE, flags)
    finally:
        ctx.seq_rm(SPARE)


def counted(ctx) -> None:
    """Make ``ctx`` count the state bytes it copies out and in (``bytes_read``,
    ``bytes_written``) where it does not count them itself: a checkout from before the
    context counted them, run with this harness copied in for a before-and-after. Its
    reads and writes are counted as the context counts them: every byte of a state read,
    and every byte of a state written that llama.cpp took."""
    if hasattr(ctx, "bytes_read"):
        return
    ctx.bytes_read = ctx.bytes_written = 0
    read, write = ctx.state_read, ctx.state_write

    def counted_read(*args, **kwargs):
        blob = read(*args, **kwargs)
        ctx.bytes_read += len(blob)
        return blob

    def counted_write(blob, *args, **kwargs):
        taken = write(blob, *args, **kwargs)
        ctx.bytes_written += memoryview(blob).nbytes if taken else 0
        return taken

    ctx.state_read, ctx.state_write = counted_read, counted_write


def read_out(tokens: int, bytes_read: int, deferred_bytes: int, kv: KvBytes) -> dict:
    """A prefill's bytes copied out of the model's memory (``ctx.bytes_read``), those read
    after it (the deferred read-out) included, per 1,000 tokens and against their KV."""
    kv_bytes = tokens * kv.per_token
    return {
        "bytes_read": bytes_read,
        "bytes_read_deferred": deferred_bytes,
        "bytes_read_per_1000_tokens": int(bytes_read / max(tokens, 1) * 1000),
        "kv_bytes_of_tokens": int(kv_bytes),
        "bytes_read_vs_kv": round(bytes_read / kv_bytes, 3) if kv_bytes else None,
        "budget_bytes_read_vs_kv": BUDGET_READ_VS_KV,
    }


def restored_by_tier(plan) -> dict:
    """The checkpoint bytes a route put back, by the tier each came from."""
    tiers = {"ram": 0, "disk": 0}
    parts = [*plan.restore, *(s for s in (plan.rewind, plan.snapshot) if s is not None)]
    for part in parts:
        tiers[part.tier] = tiers.get(part.tier, 0) + part.nbytes
    return {f"bytes_restored_{tier}": nbytes for tier, nbytes in tiers.items()}


def disk_against_kv(disk_bytes: int, snapshot_bytes: int, unique_tokens: int, kv: KvBytes) -> dict:
    """A tree's checkpoints on disk against the KV of its unique tokens, and how many
    unique tokens the default disk budget (``checkpoints.max_disk``) holds at that rate."""
    from sessions.config.model import CheckpointConfig

    budget = CheckpointConfig().max_disk
    kv_unique = unique_tokens * kv.per_token
    window_unique = unique_tokens * kv.window_per_token
    per_token = disk_bytes / max(unique_tokens, 1)
    return {
        **kv.fields(),
        "kv_of_unique_tokens_bytes": int(kv_unique),
        "kv_bytes_per_1000_unique_tokens": int(kv.per_token * 1000),
        "disk_vs_kv_of_unique_tokens": round(disk_bytes / kv_unique, 3) if kv_unique else None,
        "budget_disk_vs_kv_of_unique_tokens": BUDGET_DISK_VS_KV,
        "snapshots_vs_window_kv_of_unique_tokens": round(snapshot_bytes / window_unique, 3) if window_unique else None,
        "default_disk_budget_bytes": budget,
        "unique_tokens_in_default_disk_budget": int(budget / per_token) if per_token else None,
    }
