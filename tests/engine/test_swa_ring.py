"""The sliding-window ring restored cell for cell: every restore equals the uninterrupted run.

The tiny gemma3 model has a 32-token window; with 64-token batches and two sequences its
ring has 256 cells, so a few hundred tokens wrap it several times.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest

from sessions.branching.swa_ring import SwaRing
from sessions.checkpoints import CheckpointStore
from sessions.llama.context import ContextParams, LlamaContext
from sessions.llama.ring_geometry import (
    cell_runs,
    ring_bytes,
    ring_positions,
    ring_size,
    window_positions,
    window_runs,
)
from sessions.llama.sequences import LIVE, SPARE
from sessions.llama.state_blob import FLAGS_FULL, FLAGS_PARTIAL, HEADER, LayoutError, StateLayout
from tests.threads import TEST_THREADS

from .test_exactness import branch, check, engine_for, flat

PARAMS = ContextParams(n_ctx=2048, n_batch=64, n_threads=TEST_THREADS)
TEXT = "the sea and the boats and the stars above the water, and a lighthouse by the shore "


@pytest.fixture
def gemma3(loaded_models):
    return loaded_models["gemma3"]


@pytest.fixture
def tokens(gemma3) -> list[int]:
    return gemma3.tokenize(TEXT * 40)[:900]


def decode(ctx: LlamaContext, tokens: list[int], start: int, end: int) -> np.ndarray:
    logits = None
    for a in range(start, end, 64):
        logits = ctx.decode(tokens[a : min(a + 64, end)], a)
    assert logits is not None
    return logits


@contextmanager
def decoded(model, tokens: list[int], end: int) -> Iterator[tuple[LlamaContext, SwaRing, np.ndarray]]:
    """A context that decoded ``tokens[:end]``, its ring, and the window it holds."""
    ctx = LlamaContext(model, PARAMS)
    try:
        decode(ctx, tokens, 0, end)
        ring = SwaRing(ctx, model.info.n_swa)
        window = ring.window()
        assert window is not None
        yield ctx, ring, window
    finally:
        ctx.close()


def test_ring_geometry_follows_llama_cpp():
    assert ring_size(n_ctx=8192, n_swa=512, n_seq_max=2, n_ubatch=512) == 1536
    assert ring_size(n_ctx=2048, n_swa=32, n_seq_max=2, n_ubatch=64) == 256
    assert ring_size(n_ctx=300, n_swa=512, n_seq_max=2, n_ubatch=512) == 512  # capped by n_ctx, padded
    assert ring_positions(5, 8).tolist() == [0, 1, 2, 3, 4, 5]
    assert ring_positions(10, 8).tolist() == [8, 9, 10, 3, 4, 5, 6, 7]


@pytest.mark.parametrize(("n_swa", "size"), [(512, 1536), (512, 512), (32, 256), (1024, 1280), (300, 256)])
def test_window_order_reckoned_is_the_ring_order(n_swa, size):
    """The window's positions in ring order, and its runs of consecutive cells, reckoned
    without sorting: the same as sorting the positions by cell (``p mod N``), from the
    first lap through several wraps, a whole lap (``n_swa == N``) included."""
    edges = [*range(size - 3, size + 3), *range(2 * size - n_swa - 2, 2 * size - n_swa + 2)]
    for pos_max in [*range(0, 3 * size, 7), *edges]:
        if pos_max < 0 or (n_swa > size and pos_max >= size):  # a window longer than the ring never wraps
            continue
        positions = np.arange(max(0, pos_max - n_swa + 1), pos_max + 1, dtype=np.int32)
        sorted_by_cell = positions[np.argsort(positions % size, kind="stable")]
        assert np.array_equal(window_positions(pos_max, n_swa, size), sorted_by_cell), pos_max
        assert window_runs(pos_max, n_swa, size) == cell_runs(sorted_by_cell.astype(np.int64) % size), pos_max
        cells = np.arange(min(size, pos_max + 1))
        assert np.array_equal(ring_positions(pos_max, size), pos_max - (pos_max - cells) % size), pos_max


@pytest.mark.parametrize("boundary", [128, 255, 256, 300, 511, 600])
def test_restored_ring_continues_bit_identically(gemma3, tokens, boundary):
    """Cells of [0, boundary) and the window there, put into a fresh context, then 200 more tokens."""
    whole = LlamaContext(gemma3, PARAMS)
    source = LlamaContext(gemma3, PARAMS)
    fresh = LlamaContext(gemma3, PARAMS)
    try:
        end = boundary + 200
        expected = decode(whole, tokens, 0, boundary) if boundary else None
        expected = decode(whole, tokens, boundary, end)
        decode(source, tokens, 0, boundary)
        window = SwaRing(source, gemma3.info.n_swa).window()
        assert window is not None
        cells = source.read_range(0, boundary)
        assert fresh.append_cells(cells)
        SwaRing(fresh, gemma3.info.n_swa).restore(window, boundary - 1)
        got = decode(fresh, tokens, boundary, end)
        assert np.array_equal(got, expected), f"max diff {np.abs(got - expected).max()}"
        assert fresh.pos_min() == whole.pos_min()
    finally:
        for ctx in (whole, source, fresh):
            ctx.close()


@pytest.mark.parametrize("live_empty", [False, True], ids=["through-the-spare", "first-straight-in"])
def test_cells_appended_batch_after_batch_leave_the_spare_empty(gemma3, tokens, live_empty):
    """One ``appending()`` for several batches, one of them refused (a truncated state):
    the live sequence holds the batches put in, the spare nothing once done, and the
    restored branch continues bit-identically; the same when the first batch goes
    straight into the (empty) live sequence."""
    whole = LlamaContext(gemma3, PARAMS)
    source = LlamaContext(gemma3, PARAMS)
    fresh = LlamaContext(gemma3, PARAMS)
    try:
        decode(whole, tokens, 0, 300)
        expected = decode(whole, tokens, 300, 500)  # batches from 300, as the restored one
        decode(source, tokens, 0, 300)
        window = SwaRing(source, gemma3.info.n_swa).window()
        assert window is not None
        first, second, third = (source.read_range(a, b) for a, b in [(0, 100), (100, 220), (220, 300)])
        def spare_empty() -> bool:
            return np.array_equal(fresh.state_read(SPARE, FLAGS_FULL), fresh.empty_state)

        with fresh.appending(live_empty=live_empty) as append:
            assert append(first) and append(second)
            assert not spare_empty()  # it keeps the last batch until the next write
            assert not append(third[: len(third) // 2])
        assert spare_empty()
        assert np.array_equal(fresh.read_range(0, 300), source.read_range(0, 220))  # the first two only
        with fresh.appending() as append:
            assert append(third)
        assert spare_empty()
        SwaRing(fresh, gemma3.info.n_swa).restore(window, 299)
        got = decode(fresh, tokens, 300, 500)
        assert np.array_equal(got, expected), f"max diff {np.abs(got - expected).max()}"
    finally:
        for ctx in (whole, source, fresh):
            ctx.close()


def test_window_read_later_is_the_window_of_then(gemma3, tokens):
    ctx = LlamaContext(gemma3, PARAMS)
    try:
        decode(ctx, tokens, 0, 320)
        ring = SwaRing(ctx, gemma3.info.n_swa)
        then = ring.window()
        decode(ctx, tokens, 320, 384)
        later = ring.window_at(320)
        assert later is not None and np.array_equal(later, then)
        decode(ctx, tokens, 384, 600)  # now the ring has reused those cells
        assert ring.window_at(320) is None
    finally:
        ctx.close()


def test_cut_then_relay_equals_the_uninterrupted_run(gemma3, tokens):
    whole = LlamaContext(gemma3, PARAMS)
    ctx = LlamaContext(gemma3, PARAMS)
    try:
        other = list(reversed(tokens))
        expected = decode(whole, tokens, 0, 512)
        decode(ctx, tokens, 0, 448)
        decode(ctx, other, 448, 480)  # a different continuation, then cut back to 448
        assert ctx.seq_rm(LIVE, 448, -1)
        SwaRing(ctx, gemma3.info.n_swa).relay()
        got = decode(ctx, tokens, 448, 512)
        assert np.array_equal(got, expected)
    finally:
        whole.close()
        ctx.close()


def test_window_in_other_cells_gives_other_bits(gemma3, tokens):
    """Why the ring is rebuilt cell for cell: the same window laid out from cell 0 is not exact."""
    whole = LlamaContext(gemma3, PARAMS)
    ctx = LlamaContext(gemma3, PARAMS)
    try:
        expected = decode(whole, tokens, 0, 704)
        decode(ctx, tokens, 0, 640)
        window = ctx.state_read(LIVE, FLAGS_PARTIAL)
        assert ctx.state_write(window, LIVE, FLAGS_PARTIAL)  # the window alone, from cell 0
        got = decode(ctx, tokens, 640, 704)
        assert not np.array_equal(got, expected)
    finally:
        whole.close()
        ctx.close()


def test_a_window_that_does_not_fit_is_refused(gemma3, tokens):
    with decoded(gemma3, tokens, 300) as (_ctx, ring, window):
        positions = StateLayout().read_attention(window, HEADER.size).positions
        assert positions.min() == 300 - gemma3.info.n_swa and positions.max() == 299
        with pytest.raises(LayoutError):
            ring.restore(window, 310)  # claims a window it does not hold
        with pytest.raises(LayoutError):
            ring.restore(window[:-5], 299)


def _read_as_file(target, window: np.ndarray) -> None:
    """Fill ``target.pieces`` from ``window`` in order, as the scatter read of its file does."""
    at = 0
    for piece in target.pieces:
        np.frombuffer(piece, dtype=np.uint8)[...] = window[at : at + len(piece)]
        at += len(piece)
    assert at == len(window)


def _read_into(ring: SwaRing, laid, pieces: list[tuple[int, int, np.ndarray]]):
    """Each piece read as its file would be, straight into ``laid`` (``piece_into``)."""
    reads = []
    for start, end, piece in pieces:
        target = ring.piece_into(laid, len(piece), start, end, lambda at, n, piece=piece: piece[at : at + n].tobytes())
        assert target is not None
        _read_as_file(target, piece)
        reads.append(target)
    return reads


@pytest.mark.parametrize("boundary", [20, 200, 300, 600])
def test_a_window_read_into_the_ring_is_the_laid_ring(gemma3, tokens, boundary):
    """Read straight into its ring cells (``piece_into``), a window file gives the very ring
    ``lay`` makes of it, byte for byte: before and after the ring wraps, and a window still short."""
    with decoded(gemma3, tokens, boundary) as (ctx, ring, window):
        ctx.restore_memory.drop("ring")  # both start from a zeroed ring
        expected = ring.lay([window], boundary - 1).blob.copy()
        ctx.restore_memory.drop("ring")
        laid = ring.skeleton(boundary - 1, ring.layers_of(window))
        reads = _read_into(ring, laid, [(0, boundary, window)])
        assert ring.window_shape is None  # learnt only from a file that checks out
        laid = ring.placed(laid, reads)
        assert ring.window_shape is not None
        assert np.array_equal(laid.blob, expected)
        assert (laid.pos_max, laid.real_from) == (boundary - 1, max(0, boundary - gemma3.info.n_swa))


@pytest.mark.parametrize("ends", [(20, 30, 45), (250, 262, 270, 290), (560, 575, 600)])
def test_a_window_of_pieces_is_the_window_whole(gemma3, tokens, ends):
    """The pieces of the segments that end within a window of a boundary, each read from the
    ring as a checkpoint would be (some of them long after), lay the ring the whole window
    lays: from memory, and read from files straight into it."""
    with decoded(gemma3, tokens, ends[-1]) as (ctx, ring, window):
        bounds = [0, *ends]
        pieces = [(a, b, ring.piece(a, b)) for a, b in zip(bounds, bounds[1:], strict=False)]
        assert all(piece is not None for _a, _b, piece in pieces)
        pos_max = ends[-1] - 1
        ctx.restore_memory.drop("ring")
        whole = ring.lay([window], pos_max).blob.copy()
        ctx.restore_memory.drop("ring")
        assert np.array_equal(ring.lay([piece for _a, _b, piece in pieces], pos_max).blob, whole)
        ctx.restore_memory.drop("ring")
        laid = ring.skeleton(pos_max, ring.layers_of(window))
        laid = ring.placed(laid, _read_into(ring, laid, pieces))
        ring.check_covered(pos_max, [(a, b) for a, b, _piece in pieces])
        assert np.array_equal(laid.blob, whole)
        low = pos_max - ring.n_swa + 1
        needed = [(a, b, piece) for a, b, piece in pieces if b > low]
        with pytest.raises(LayoutError, match="do not"):  # the oldest piece the window needs left out
            ring.lay([piece for _a, _b, piece in needed[1:]], pos_max)
        with pytest.raises(LayoutError, match="reach back"):
            ring.check_covered(pos_max, [(a, b) for a, b, _piece in needed[1:]])


def test_a_piece_holds_only_its_own_tokens_inside_its_window(gemma3, tokens):
    """A segment longer than the window keeps its last ``n_swa`` tokens' cells; a short one
    all of its own, none of the segment before."""
    with decoded(gemma3, tokens, 300) as (ctx, ring, window):
        layout = ctx.layout
        for start, end in ((100, 300), (280, 300), (250, 270)):
            piece = ring.piece(start, end)
            positions = layout.read_attention(piece, HEADER.size).positions
            low = max(start, end - ring.n_swa)
            assert sorted(positions.tolist()) == list(range(low, end))


def test_a_window_file_of_another_place_or_layout_is_refused(gemma3, tokens):
    with decoded(gemma3, tokens, 300) as (_ctx, ring, window):

        def read_at(at: int, n: int) -> bytes:
            return window[at : at + n].tobytes()

        laid = ring.skeleton(299, ring.layers_of(window))
        assert ring.piece_into(laid, len(window) - 5, 0, 300, read_at) is None  # not a window state
        assert ring.piece_into(laid, len(window), 0, 11, read_at) is None  # the piece of [0, 11) has 11 cells
        shifted = ring.piece_into(laid, len(window), 0, 310, read_at)  # as many cells, other positions
        assert shifted is not None
        _read_as_file(shifted, window)
        with pytest.raises(LayoutError, match="cells of its place"):
            ring.placed(laid, [shifted])
        damaged = window.copy()
        damaged[HEADER.size + 8 + 12 * gemma3.info.n_swa + 8] ^= 1  # the first layer's type
        target = ring.piece_into(laid, len(window), 0, 300, read_at)
        assert target is not None
        _read_as_file(target, damaged)
        with pytest.raises(LayoutError, match="another layout"):
            ring.placed(laid, [target])
        assert ring.window_shape is None


@pytest.mark.parametrize("boundary", [20, 300, 600])
def test_the_ring_size_prepared_from_a_window_file_is_enough(gemma3, tokens, boundary):
    """``ring_bytes`` (what the engine touches while the model loads) bounds the laid ring."""
    with decoded(gemma3, tokens, boundary) as (ctx, ring, window):
        laid = ring.lay([window], boundary - 1)
        needed = ring_bytes(len(window), ring.size, ring.n_swa)
        assert len(laid.blob) <= needed
        if boundary >= ring.n_swa:  # a full window: the estimate is close, not just large
            assert needed < len(laid.blob) + len(window)
        assert np.shares_memory(laid.blob, ctx.restore_memory.get("ring", len(laid.blob)))  # kept for the next


def reversed_cells(window: np.ndarray) -> np.ndarray:
    """The same window state with its cells in the opposite order (not the ring's)."""
    layout = StateLayout()
    section = layout.read_attention(window, HEADER.size)
    out = window.copy()
    layers = [(kind, row, rows[::-1]) for kind, row, rows in section.layers]
    layout.write_attention(out, HEADER.size, LIVE, section.positions[::-1].copy(), layers)
    return out


def test_the_layout_check_tells_ring_order(gemma3, tokens):
    ctx = LlamaContext(gemma3, PARAMS)
    try:
        decode(ctx, tokens, 0, 300)
        ring = SwaRing(ctx, gemma3.info.n_swa)
        window = ring.piece(0, 300, checked=False)
        assert window is not None and ring.in_run_order(window)
        assert not ring.in_run_order(reversed_cells(window))
        assert not ring.in_run_order(window[:10])  # not understood: not kept either
    finally:
        ctx.close()


def test_windows_out_of_ring_order_are_read_unchecked_but_never_saved(gemma3, tmp_path, monkeypatch):
    """The decode path reads pieces without the layout check; saving does it."""
    msgs = branch(gemma3, 0, 1, 3, 5)  # messages shorter than the window: no piece of one cell
    with CheckpointStore(tmp_path / "ck", ram_bytes=256 << 20, disk_bytes=1 << 30) as store:
        engine = engine_for(gemma3, store)
        assert engine.ring is not None
        read = engine.ring.piece
        read_parts = engine.ctx.read_range_parts

        def out_of_order(start: int, end: int, **how) -> np.ndarray | None:
            window = read(start, end, **how)
            return None if window is None else reversed_cells(window)

        def parts_out_of_order(start: int, end: int):
            cells, piece = read_parts(start, end)
            return cells, reversed_cells(piece)

        monkeypatch.setattr(engine.ring, "piece", out_of_order)
        monkeypatch.setattr(engine.ctx, "read_range_parts", parts_out_of_order)
        engine.prepare(*flat(msgs))
        engine.captures.flush()
        store.flush()
        assert not list((tmp_path / "ck").glob("*/*.snap"))
        assert list((tmp_path / "ck").glob("*/*.ckpt"))
        monkeypatch.undo()
        engine.prepare(*flat(msgs[:-1] + branch(gemma3, 6)))  # the same reads, in ring order
        engine.captures.flush()
        store.flush()
        assert list((tmp_path / "ck").glob("*/*.snap"))
    with CheckpointStore(tmp_path / "ck", ram_bytes=256 << 20, disk_bytes=1 << 30) as store:
        check(engine_for(gemma3, store), gemma3, msgs + branch(gemma3, 6))


def test_a_cut_of_positions_that_reused_no_cell_needs_no_relay(gemma3, tokens):
    """Before the ring's first lap ends every position has a cell of its own: a cut frees
    them, leaves the search head at the first, and the ring is the uninterrupted run's."""
    whole = LlamaContext(gemma3, PARAMS)
    ctx = LlamaContext(gemma3, PARAMS)
    try:
        ring = SwaRing(ctx, gemma3.info.n_swa)
        end = ring.size  # the last position that has a cell of its own is ring.size - 1
        keep = end - 128  # (batches of 64 from 0, as the whole run decodes them)
        other = list(reversed(tokens)) * 4
        expected = decode(whole, tokens * 4, 0, keep + 64)
        decode(ctx, tokens * 4, 0, keep)
        decode(ctx, other, keep, end)
        assert not ring.reused_by(end)
        assert ctx.seq_rm(LIVE, keep, -1)
        got = decode(ctx, tokens * 4, keep, keep + 64)
        assert np.array_equal(got, expected)
    finally:
        whole.close()
        ctx.close()


def test_a_cut_of_positions_that_reused_cells_needs_the_relay(gemma3, tokens):
    """One position past the lap reuses the first cell: cut away, it leaves that cell
    empty where the uninterrupted run keeps a masked one, and the next tokens differ."""
    whole = LlamaContext(gemma3, PARAMS)
    ctx = LlamaContext(gemma3, PARAMS)
    try:
        ring = SwaRing(ctx, gemma3.info.n_swa)
        end = ring.size + 32
        keep = ring.size - 128
        other = list(reversed(tokens)) * 4
        expected = decode(whole, tokens * 4, 0, keep + 64)
        decode(ctx, tokens * 4, 0, keep)
        decode(ctx, other, keep, end)
        assert ring.reused_by(end)
        assert ctx.seq_rm(LIVE, keep, -1)
        got = decode(ctx, tokens * 4, keep, keep + 64)
        assert not np.array_equal(got, expected)
    finally:
        whole.close()
        ctx.close()
