"""A llama.cpp context laid out for branch restores: sequence 0 is live, sequence 1 spare.

``n_seq_max = 2`` with a unified KV cache lets one spare sequence id turn the cache into
per-message segments (see ``shared/notes/llama-cpp-state.md``): copying a token range of
the live sequence into the spare one and serialising it gives exactly the KV cells of
that range plus the sliding-window or recurrent state at its end. ``swa_full`` stays off
so sliding-window models keep their small cache, which is what makes cutting them back
dangerous and checkpoints necessary.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from sessions.errors import DecodeCancelled, LlamachatError
from sessions.llama.abort_flag import AbortFlag
from sessions.llama.batch_fill import BatchFiller, TokenIds
from sessions.llama.decode_speeds import DecodeSpeeds
from sessions.llama.model import LlamaModel
from sessions.llama.native import held_errors, lib
from sessions.llama.restore_memory import RestoreMemory
from sessions.llama.sequences import LIVE, SEQUENCES, SPARE
from sessions.llama.state_blob import FLAGS_FULL, FLAGS_ON_DEVICE, HEADER, Buffer, SectionShape, as_array, pointer
from sessions.llama.warm_buffers import WarmBuffers

_FLASH_ATTN = {"auto": -1, "off": 0, "on": 1}


class DecodeError(LlamachatError):
    """llama.cpp refused a batch."""


class ContextFull(DecodeError):
    """No room left in the KV cache for the batch (the conversation outgrew n_ctx)."""


def default_threads(cpus: int | None = None) -> int:
    """Threads when the config does not say: every core but one, at most 8.

    llama.cpp's threads wait for each other at every step of a token; when one of them
    loses its core (to the UI thread, or to anything else on the machine) all of them
    wait, and a reply can slow down a hundredfold. Leaving a core free avoids that.
    """
    cpus = cpus if cpus is not None else (os.cpu_count() or 1)
    return max(1, min(8, cpus - 1))


@dataclass(frozen=True)
class ContextParams:
    """What a context is made with. ``compat`` lists the ones a saved state depends on."""

    n_ctx: int = 8192
    n_batch: int = 512
    """Tokens per decode call; llama.cpp's micro-batch is the same size, so a batch is
    never split into a one-token tail (see ``sessions.branching.segments.batches``)."""
    n_threads: int | None = None
    flash_attn: str = "on"
    """"on", "off" or "auto". A state saved with one setting does not load with another.

    On by default: without flash attention llama.cpp's CPU path gives last-bit different
    results after a branch is rebuilt from several segments (the state is the same, the
    arithmetic order is not), so restores would not be bit-exact."""
    type_k: int = 1  # GGML_TYPE_F16
    type_v: int = 1
    n_gpu_layers: int = 0
    """Layers offloaded by the model this context belongs to (part of ``compat``)."""
    devices: str = ""
    """Which device holds which layers (``Placement.key()``; empty: all on the CPU). Another
    split over other hardware computes other last bits, so states never cross splits."""

    def threads(self) -> int:
        return self.n_threads or default_threads()

    def compat(self) -> str:
        """Canonical string of the settings a saved state depends on, bit for bit.

        Some of these only change whether a state loads at all (flash attention, the
        K/V types, the stream layout); the others change the arithmetic, so a state
        made under another value loads and then gives other logits than a recompute:
        the batch and micro-batch sizes decide how tokens are grouped into one matrix
        product, and the layers offloaded decide which backend computes each layer.
        """
        return (
            f"state-v2;fa={self.flash_attn};type_k={self.type_k};type_v={self.type_v};"
            f"n_batch={self.n_batch};n_ubatch={self.n_batch};n_gpu_layers={self.n_gpu_layers};"
            f"n_seq_max={SEQUENCES};kv_unified=1;swa_full=0" + (f";devices={self.devices}" if self.devices else "")
        )


def native_params(L, params: ContextParams, *, n_ctx: int, n_batch: int, n_seq_max: int):
    """llama.cpp's parameters of a context made with ``params``: one unified cache over
    ``n_seq_max`` sequences, a sliding window's cache kept small (``swa_full`` off), the
    micro-batch as large as the batch."""
    cp = L.llama_context_default_params()
    cp.n_ctx = n_ctx
    cp.n_batch = cp.n_ubatch = n_batch
    cp.n_seq_max = n_seq_max
    cp.kv_unified = True
    cp.swa_full = False
    cp.n_threads = cp.n_threads_batch = params.threads()
    cp.flash_attn_type = _FLASH_ATTN.get(params.flash_attn, 0)
    cp.type_k, cp.type_v = params.type_k, params.type_v
    cp.no_perf = True
    return cp


def free_native(L, ctx, batch) -> None:
    """Free a context and its ``llama_batch`` (either may be missing: a failed start)."""
    if batch is not None:
        L.llama_batch_free(batch)
    if ctx:
        L.llama_free(ctx)


class LlamaContext:
    """Decoding and sequence-state operations on one context of a loaded model."""

    def __init__(self, model: LlamaModel, params: ContextParams, restore_memory: RestoreMemory | None = None):
        L = lib()
        self._L = L
        self.model = model
        self.params = params
        self.layout = model.state_layout
        """How this context's states lay out their cells (``state_blob.StateLayout``)."""
        cp = native_params(L, params, n_ctx=params.n_ctx, n_batch=params.n_batch, n_seq_max=SEQUENCES)
        self._abort = AbortFlag(L)
        self._abortable = False
        self.restore_memory = restore_memory or RestoreMemory()
        """The buffers restores write into, kept between them (prepared early by the
        engine that made this context, see ``restore_memory``)."""
        self.warm = WarmBuffers(self.restore_memory.pages)
        """Touched buffers for the snapshots read while a decode runs (``state_read(warm=True)``,
        ``once=True`` for window pieces), touched by the same thread as the restore memory's."""
        self.stop_between_batches = False
        """Honour ``request_abort`` only between batches: an RPC backend aborts the process
        when a graph computation is stopped midway."""
        self._ctx = self._batch = None
        try:
            with held_errors() as errors:
                self._ctx = L.llama_init_from_model(model.handle, cp)
            if not self._ctx:
                why = (errors[-1].partition(": ")[2] or errors[-1]) if errors else "out of memory?"
                raise DecodeError(f"llama.cpp could not create a context of {params.n_ctx} tokens: {why}")
            self._mem = L.llama_get_memory(self._ctx)
            self.n_ctx = int(L.llama_n_ctx(self._ctx))
            self.n_ubatch = int(L.llama_n_ubatch(self._ctx))
            self.n_seq_max = int(L.llama_n_seq_max(self._ctx))
            self.n_vocab = model.info.n_vocab
            self._batch = L.llama_batch_init(params.n_batch, 0, 1)
            self._filler = BatchFiller(self._batch, params.n_batch, self.n_ctx, LIVE)
            self.decode_seconds = 0.0
            """Time spent inside ``llama_decode`` (what the engine's own bookkeeping is measured against)."""
            self.decode_cpu_seconds = 0.0
            """CPU time of the calling thread inside ``llama_decode`` (it computes too)."""
            self.state_seconds = 0.0
            """Time inside llama.cpp's state reads and writes (``llama_state_seq_get_data_ext``
            and ``_set_data_ext``): on a GPU the copies between host and device, apart from
            the engine's own work around them."""
            self.bytes_read = 0
            """Bytes of state copied out of the context (what checkpoints cost the model's memory)."""
            self.bytes_written = 0
            """Bytes of state copied into the context (restores)."""
            self.speeds = DecodeSpeeds()
            """Seconds per batched token and per one-token call, from the calls so far."""
            self._n_admitted = 0
            self._admitted_end = 0
            """Where the batch decoded next ends: the helper touches the window pieces
            asked for (``WarmBuffers.expect_once``) up to a batch past it."""
            self.checked_window_shape: SectionShape | None = None
            """The layout of this context's sliding-window states, when the layout check
            (``layout_check``) has read one: it sizes pieces before they are read."""
            self.checked_cells_shape: SectionShape | None = None
            """The layout of a range's cells, when the layout check has read one."""
            self.empty_state = self.state_read(SPARE, FLAGS_FULL)
            """llama.cpp's state of a sequence that holds nothing: its sections are the
            "no cells" form of every memory part, used to write one part alone."""
        except BaseException:
            # Freed now, while its model is still there: the caller closes the model next,
            # and a context left to the garbage collector would be freed after it.
            self.close()
            raise

    # -- decoding ---------------------------------------------------------------------

    def request_abort(self) -> None:
        """Make the running decode stop at the next graph node (from any thread)."""
        self._abort.set()

    def clear_abort(self) -> None:
        self._abort.clear()

    def _set_abortable(self, on: bool) -> None:
        # Prompt batches can be stopped midway. A generated token is not: stopping between
        # tokens is soon enough, and a token stopped halfway would leave the cache unusable
        # and cost the whole reply's checkpoint.
        if on != self._abortable:
            if on:
                self._L.llama_set_abort_callback(self._ctx, self._abort.callback, self._abort.data)
            else:
                self._L.llama_set_abort_callback(self._ctx, self._L.ggml_abort_callback(), None)
            self._abortable = on

    def decode(
        self, tokens: Sequence[int] | np.ndarray, start: int, *, want_logits: bool = True, abortable: bool = False
    ) -> np.ndarray | None:
        """Decode ``tokens`` at positions start.. on the live sequence, in one llama_decode.

        The caller splits work into batches of at most ``n_batch``; batch boundaries decide
        the exact floating-point state, so they are chosen by the caller, not here.
        ``abortable`` lets ``request_abort`` stop it midway (``DecodeCancelled``).
        """
        self._admit(len(tokens), start, abortable)
        self._filler.tokens(tokens, start, want_logits)
        return self._run(want_logits)

    def decode_span(self, ids: TokenIds, a: int, b: int, *, want_logits: bool, abortable: bool) -> np.ndarray | None:
        """``decode(ids[a:b], a)``: a prompt batch, whose tokens sit at their own positions,
        copied into llama.cpp's batch without numpy (``batch_fill``)."""
        self._admit(b - a, a, abortable)
        self._filler.span(ids, a, b, want_logits)
        return self._run(want_logits)

    def _admit(self, n: int, start: int, abortable: bool) -> None:
        if abortable and self.stop_between_batches and self._abort.is_set():
            raise DecodeCancelled()
        self._set_abortable(abortable and not self.stop_between_batches)
        if n <= 0 or n > self.params.n_batch:
            raise ValueError(f"batch of {n} tokens (n_batch is {self.params.n_batch})")
        if start + n > self.n_ctx:
            raise ContextFull(f"the conversation needs {start + n} tokens but the context holds {self.n_ctx}")
        self._n_admitted = n
        self._admitted_end = start + n

    def _run(self, want_logits: bool) -> np.ndarray | None:
        self.warm.refill(self._admitted_end + self.params.n_batch)
        t0, c0 = time.perf_counter(), time.thread_time()
        rc = self._L.llama_decode(self._ctx, self._batch)
        # llama_decode returns before an asynchronous backend (a GPU, RPC servers) has
        # finished; the next state read or logits call would wait for it instead, and
        # the decode's time would be counted as the engine's own.
        self._L.llama_synchronize(self._ctx)
        seconds = time.perf_counter() - t0
        self.decode_seconds += seconds
        self.decode_cpu_seconds += time.thread_time() - c0
        if rc == 2:
            raise DecodeCancelled()
        if rc == 1:
            raise ContextFull("no room left in the KV cache for this batch")
        if rc != 0:
            raise DecodeError(f"llama_decode failed with code {rc}")
        self.speeds.record(self._n_admitted, seconds)
        if not want_logits:
            return None
        ptr = self._L.llama_get_logits_ith(self._ctx, -1)
        return np.ctypeslib.as_array(ptr, shape=(self.n_vocab,)).copy()

    def sample_last(self, chain) -> int | None:
        """The token llama.cpp's sampler ``chain`` picks from the last decode's logits,
        accepted into its history; None when that decode kept no logits.

        llama.cpp builds the candidate array in C here, where ``Sampler`` would build
        the same array in numpy. Every chain ``Sampler`` makes ends in a sampler that
        always picks (greedy or dist), so llama.cpp's check that one was picked holds.
        """
        if not self._L.llama_get_logits_ith(self._ctx, -1):
            return None
        return int(self._L.llama_sampler_sample(chain, self._ctx, -1))

    # -- sequence memory --------------------------------------------------------------

    def seq_rm(self, seq: int, p0: int = -1, p1: int = -1) -> bool:
        return bool(self._L.llama_memory_seq_rm(self._mem, seq, p0, p1))

    def seq_cp(self, src: int, dst: int, p0: int = -1, p1: int = -1) -> None:
        self._L.llama_memory_seq_cp(self._mem, src, dst, p0, p1)

    def pos_min(self, seq: int = LIVE) -> int:
        return int(self._L.llama_memory_seq_pos_min(self._mem, seq))

    def pos_max(self, seq: int = LIVE) -> int:
        return int(self._L.llama_memory_seq_pos_max(self._mem, seq))

    def clear(self) -> None:
        self._L.llama_memory_clear(self._mem, True)

    def state_size(self, seq: int, flags: int = FLAGS_FULL) -> int:
        return int(self._L.llama_state_seq_get_size_ext(self._ctx, seq, flags))

    def state_read(
        self, seq: int, flags: int = FLAGS_FULL, *, warm: bool = False, once: bool = False, size: int | None = None,
    ) -> np.ndarray:
        """The state of ``seq`` in a new buffer (llama.cpp writes straight into it).

        ``warm`` for the reads a decode waits for, whose size repeats (a recurrent state):
        the buffer comes with its pages mapped (``WarmBuffers``); ``once`` for those whose
        size was asked for ahead (a window's piece, ``WarmBuffers.expect_once``).
        ``size``: the state's size when the caller knows it, which spares llama.cpp a
        walk over the state to measure it; should the state be larger, llama.cpp logs
        that it did not fit, and it is measured and read again.
        """
        if size is not None:
            blob = self._read_into(seq, flags, size, warm, once)
            if len(blob):
                return blob
        return self._read_into(seq, flags, self.state_size(seq, flags), warm, once)

    def _read_into(self, seq: int, flags: int, size: int, warm: bool, once: bool) -> np.ndarray:
        buf = self.warm.take(size, once=once) if warm or once else np.empty(size, dtype=np.uint8)
        t0 = time.perf_counter()
        n = self._L.llama_state_seq_get_data_ext(self._ctx, pointer(buf), size, seq, flags)
        self.state_seconds += time.perf_counter() - t0
        self.bytes_read += n
        return buf[:n]

    def state_write(self, blob: Buffer, seq: int, flags: int = FLAGS_FULL) -> bool:
        """Load a state into ``seq`` (which llama.cpp empties first); False if refused.

        On a refusal only a part of the memory may have been emptied: the caller must
        treat the sequence as lost.
        """
        if not 0 <= seq < self.n_seq_max:
            raise ValueError("sequence id out of range")  # llama.cpp aborts the process otherwise
        data = as_array(blob)
        t0 = time.perf_counter()
        n = self._L.llama_state_seq_set_data_ext(self._ctx, pointer(data), len(data), seq, flags)
        self.state_seconds += time.perf_counter() - t0
        self.bytes_written += len(data) if n else 0
        return n != 0

    def keep_on_device(self, seq: int) -> np.ndarray:
        """Keep a copy of ``seq``'s whole state in the context's own memory (on the GPU where
        the layers run), under ``seq``'s id; returns what stays on the host: its fields and
        cells, a few KB, which ``put_back_from_device`` takes. A later copy under the same
        id replaces it."""
        size = int(self._L.llama_state_seq_get_size_ext(self._ctx, seq, FLAGS_FULL | FLAGS_ON_DEVICE))
        buf = np.empty(size, dtype=np.uint8)
        t0 = time.perf_counter()
        n = self._L.llama_state_seq_get_data_ext(self._ctx, pointer(buf), size, seq, FLAGS_FULL | FLAGS_ON_DEVICE)
        self.state_seconds += time.perf_counter() - t0
        self.bytes_read += n
        return buf[:n]

    def put_back_from_device(self, kept: Buffer, seq: int) -> bool:
        """Restore into ``seq`` (emptied first) a state kept by ``keep_on_device`` in this
        very context, its data copied within the model's memory. Only ever with a blob
        this context made, whose copy is still the latest under its id: llama.cpp ends the
        process on one it does not hold."""
        if not 0 <= seq < self.n_seq_max:
            raise ValueError("sequence id out of range")
        data = as_array(kept)
        t0 = time.perf_counter()
        n = self._L.llama_state_seq_set_data_ext(self._ctx, pointer(data), len(data), seq,
                                                 FLAGS_FULL | FLAGS_ON_DEVICE)
        self.state_seconds += time.perf_counter() - t0
        self.bytes_written += len(data) if n else 0
        return n != 0

    def cells_only(self, blob: Buffer) -> np.ndarray:
        """A full state with only its attention cells: the other parts say "no cells".

        The checkpoint of a token range keeps the attention cells of that range; the
        window or recurrent state at its end is saved apart (and only where needed).
        """
        data = as_array(blob)
        section = self.layout.read_attention(data, HEADER.size)
        tail = self.cells_tail()
        if section.end == len(data) and not len(tail):
            return data  # a plain model's: the cells are all there is (no copy)
        out = np.empty(section.end + len(tail), dtype=np.uint8)
        out[: section.end] = data[: section.end]
        out[section.end :] = tail
        return out

    def read_range(self, start: int, end: int) -> np.ndarray:
        """The attention cells of live positions [start, end), and nothing else.

        They are copied to the spare sequence and read from there; the spare sequence
        is dropped at once (on a sliding-window cache it would otherwise pin cells).
        """
        self.seq_cp(LIVE, SPARE, start, end)
        try:
            blob = self.state_read(SPARE, FLAGS_FULL)
        finally:
            self.seq_rm(SPARE)
        return self.cells_only(blob)

    def read_range_parts(self, start: int, end: int) -> tuple[np.ndarray, np.ndarray]:
        """The attention cells of live positions [start, end) (as ``read_range`` gives them),
        and, from the same read, the state that follows them in the spare sequence, as a
        state of the live sequence on its own (a sliding window's part: the sliding-layer
        cells of the range that the window at ``end`` still holds).

        One read of the range gives both, so a range and its window piece are copied out
        of the context once.
        """
        self.seq_cp(LIVE, SPARE, start, end)
        try:
            blob = self.state_read(SPARE, FLAGS_FULL)
        finally:
            self.seq_rm(SPARE)
        section = self.layout.read_attention(blob, HEADER.size)
        tail = self.cells_tail()
        cells = np.empty(section.end + len(tail), dtype=np.uint8)
        cells[: section.end] = blob[: section.end]
        cells[section.end :] = tail
        rest = np.empty(HEADER.size + len(blob) - section.end, dtype=np.uint8)
        rest[HEADER.size :] = blob[section.end :]
        self.layout.relabel(rest, LIVE)
        return cells, rest

    def cells_tail(self) -> np.ndarray:
        """What follows the attention section in a cells-only state (see ``cells_only``)."""
        empty = self.layout.read_attention(self.empty_state, HEADER.size)
        return self.empty_state[empty.end :]

    def append_cells(self, blob: Buffer) -> bool:
        """Add saved attention cells (from ``read_range``) to the live sequence."""
        with self.appending() as append:
            return append(blob)

    @contextmanager
    def appending(self, live_empty: bool = False) -> Iterator[Callable[[Buffer], bool]]:
        """A function that adds saved attention cells to the live sequence, batch after batch.

        A batch is written into the spare sequence and copied to the live one. llama.cpp
        empties a sequence before it writes a state into it, so the spare keeps its copy
        of a batch until the next one's write, and is emptied once, on leaving: each
        emptying scans the whole cache, and a restore of many batches saves two scans a
        batch.
        With ``live_empty`` (the caller knows the live sequence holds nothing) the first
        batch goes straight into the live sequence, the very cells it would have taken
        through the spare one, and saves that batch's copy and scan.
        """
        direct = live_empty

        def append(blob: Buffer) -> bool:
            nonlocal direct
            if direct:
                direct = False
                return self.state_write(blob, LIVE, FLAGS_FULL)
            if not self.state_write(blob, SPARE, FLAGS_FULL):
                return False
            self.seq_cp(SPARE, LIVE)
            return True

        try:
            yield append
        finally:
            self.seq_rm(SPARE)

    def close(self, wait: bool = True) -> None:
        """Free the context; ``wait``: for the helper threads to end as well.

        ``__del__`` does not wait. A collection of a context left in a reference cycle
        can run on any thread at any allocation, threading's own bookkeeping included:
        a thread starting up collects while it holds the lock that a join of a
        non-daemon thread (the checkpoint reader) takes, and that join then waits for
        itself for good. Told to stop, the helpers end on their own.
        """
        self.warm.close(wait)
        self.restore_memory.close(wait)
        free_native(self._L, self._ctx, self._batch)
        self._ctx = self._batch = None

    def __del__(self) -> None:  # pragma: no cover
        try:
            self.close(wait=False)
        except Exception:
            pass
