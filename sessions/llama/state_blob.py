"""Reading and writing llama.cpp sequence-state blobs without copying them through Python.

``llama_state_seq_get_data_ext`` writes one sequence's memory as: the context header
(``magic:u32 = 0xaf143cd8``, ``seq:i32``), then one section per memory part. For a
model with a sliding window the parts are the full-attention cache then the window cache
(``PARTIAL_ONLY`` gives the window alone); for a hybrid model the attention cache then
the recurrent state (``PARTIAL_ONLY`` gives the recurrent state alone); a plain model
has one attention section, a recurrent model one recurrent section.

An attention section (llama.cpp's ``llama_kv_cache::state_write`` for one sequence,
flash attention on, so V is not transposed) is, little-endian::

    n_stream:u32, then per stream
      cell_count:u32, and if it is not 0:
        cell_count x (pos:i32, n_seq:u32 = 1, [ext], seq:i32)
        v_trans:u32 = 0, n_layer:u32
        n_layer x (k_type:i32, k_row:u64, cell_count x k_row bytes)
        n_layer x (v_type:i32, v_row:u64, cell_count x v_row bytes)

Two things in it depend on the model and cannot be told from the blob alone, so they
are read from the model (``StateLayout``, made by ``sessions.llama.model``) and checked
against llama.cpp once per context (``sessions.llama.layout_check``):

- ``ext``: models whose rotary positions are M-RoPE or IMROPE (Qwen2-VL, Qwen3-VL,
  Qwen3.5, some GLM-4) or that hash n-grams of token ids into per-layer embeddings
  keep a ``llama_kv_cell_ext`` in every cell (``x:i32, y:i32, tok:i32``: a 2D position
  and the cell's token), written between the sequence count and the sequence id;
- the values: an MLA cache (DeepSeek-style latent attention) keeps keys alone, so its
  section has ``n_layer`` key entries and no value entries.

Cells appear in the order of their index in the cache. The checkpoint code splits and
joins these sections (the attention cells of a range apart from the window or
recurrent state at its end), and the window code re-lays cells; both work on numpy
views of one buffer, so a blob is copied only where bytes really move. A blob that
does not parse raises ``LayoutError`` and the caller falls back to recomputing.
"""

from __future__ import annotations

import ctypes
import functools
import struct
from dataclasses import dataclass

import numpy as np

from sessions.errors import LlamachatError

STATE_MAGIC = 0xAF143CD8
"""llama_context's ``io_magic``, first in every sequence state."""
HEADER = struct.Struct("<Ii")
FLAGS_FULL = 0
FLAGS_PARTIAL = 1
"""``LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY``: only the window (iSWA) or the recurrent state (hybrid)."""
FLAGS_ON_DEVICE = 2
"""``LLAMA_STATE_SEQ_FLAGS_ON_DEVICE``: the state's data stays in the model's own memory (a
copy kept by the context, one per sequence id), the blob holds only its fields and cells."""
CELL_EXT_BYTES = 12
"""``sizeof(llama_kv_cell_ext)`` in the pinned llama.cpp: ``x``, ``y`` and ``tok``, three int32."""


class LayoutError(LlamachatError):
    """The blob is not in the layout this module knows (another llama.cpp version?)."""


Buffer = bytes | bytearray | memoryview | np.ndarray
Layers = tuple[tuple[int, int], ...]
"""``(type, row_bytes)`` of every K layer then every V layer of an attention section."""


def as_array(blob: Buffer) -> np.ndarray:
    """A uint8 view of ``blob`` (no copy)."""
    if isinstance(blob, np.ndarray):
        return blob.reshape(-1).view(np.uint8)
    return np.frombuffer(blob, dtype=np.uint8)


def pointer(blob: np.ndarray) -> ctypes._Pointer[ctypes.c_uint8]:
    """The address of a numpy buffer as the ``uint8_t *`` llama.cpp's state calls take."""
    address = blob.__array_interface__["data"][0]  # cheaper than ``blob.ctypes``
    return ctypes.cast(address, ctypes.POINTER(ctypes.c_uint8))


def read_header(blob: np.ndarray) -> int:
    """Check the context header; returns the sequence id it was written for."""
    if len(blob) < HEADER.size:
        raise LayoutError("the state is shorter than its header")
    magic, seq = HEADER.unpack_from(blob.data, 0)
    if magic != STATE_MAGIC:
        raise LayoutError("not a llama.cpp sequence state")
    return int(seq)


@dataclass(frozen=True)
class AttentionSection:
    """One attention-cache section of a blob, as views into it."""

    start: int
    """Byte offset of the section (its ``n_stream`` field)."""
    end: int
    """Byte offset just past it."""
    cells: np.ndarray
    """Each cell's fields as int32 columns (``StateLayout.cells``), in cache order."""
    layers: tuple[tuple[int, int, np.ndarray], ...]
    """``(type, row_bytes, rows)`` for every K layer then every V layer; ``rows`` has one
    row per cell."""

    @property
    def positions(self) -> np.ndarray:
        """int32 position of each cell, in cache order."""
        return self.cells[:, 0]


@dataclass(frozen=True)
class StateLayout:
    """What one model's attention sections look like beyond what a blob says of itself.

    The default is a model with plain positions and values (llama, Gemma, LFM2, ...).
    """

    cell_ext: int = 0
    """Bytes of ``llama_kv_cell_ext`` in every cell (0, or ``CELL_EXT_BYTES``)."""
    values: bool = True
    """Whether each layer stores values after its keys (not for an MLA cache)."""

    @property
    def cell_bytes(self) -> int:
        """Bytes of one cell's fields for a cell of one sequence: pos, n_seq, [ext], seq."""
        return 12 + self.cell_ext

    @property
    def seq_column(self) -> int:
        """Column of the sequence id among a cell's int32 fields (``cells``)."""
        return (8 + self.cell_ext) // 4

    def n_entries(self, n_layer: int) -> int:
        """Row entries of a section of ``n_layer`` layers: keys, then values if any."""
        return 2 * n_layer if self.values else n_layer

    def n_layer(self, layers: Layers | tuple) -> int:
        return len(layers) // 2 if self.values else len(layers)

    def describe(self) -> str:
        parts = ["plain cells" if not self.cell_ext else f"cells with {self.cell_ext} bytes of extra position data"]
        if not self.values:
            parts.append("keys only")
        return ", ".join(parts)

    # -- reading -----------------------------------------------------------------------------

    def cells(self, blob: np.ndarray, offset: int, count: int) -> np.ndarray:
        """The ``count`` cells' fields at ``offset`` as int32 columns (a view)."""
        cols = self.cell_bytes // 4
        return np.frombuffer(blob, dtype="<i4", count=cols * count, offset=offset).reshape(count, cols)

    def _read_cells(self, blob: np.ndarray, offset: int) -> np.ndarray:
        """The cell fields of the section at ``offset``, checked to be this sequence's alone."""
        (n_stream,) = struct.unpack_from("<I", blob.data, offset)
        if n_stream != 1:
            raise LayoutError(f"{n_stream} cache streams (only a unified cache is supported)")
        (count,) = struct.unpack_from("<I", blob.data, offset + 4)
        if offset + 8 + self.cell_bytes * count > len(blob):
            raise LayoutError("the state ends inside its cell list")
        meta = self.cells(blob, offset + 8, count)
        if count and not np.all(meta[:, 1] == 1):
            raise LayoutError("cells shared by several sequences")
        return meta

    def read_positions(self, blob: np.ndarray, offset: int) -> np.ndarray:
        """The cell positions of the attention section at ``offset``, without its layers."""
        try:
            return self._read_cells(blob, offset)[:, 0]
        except (struct.error, ValueError):
            raise LayoutError("the state ends early") from None

    def read_attention(self, blob: np.ndarray, offset: int) -> AttentionSection:
        """Parse the attention section at ``offset`` (views, no copies)."""
        try:
            meta = self._read_cells(blob, offset)
            count = len(meta)
            pos = offset + 8
            if count == 0:
                return AttentionSection(offset, pos, meta, ())
            pos += self.cell_bytes * count
            v_trans, n_layer = struct.unpack_from("<II", blob.data, pos)
            pos += 8
            if v_trans:
                raise LayoutError("V is stored transposed (flash attention off)")
            layers = []
            for _ in range(self.n_entries(n_layer)):
                kind, row = struct.unpack_from("<iQ", blob.data, pos)
                pos += 12
                size = row * count
                if pos + size > len(blob):
                    raise LayoutError("the state ends inside a layer")
                layers.append((kind, row, blob[pos : pos + size].reshape(count, row)))
                pos += size
        except (struct.error, ValueError):
            raise LayoutError("the state ends early") from None
        return AttentionSection(offset, pos, meta, tuple(layers))

    # -- writing -----------------------------------------------------------------------------

    def attention_bytes(self, count: int, layers: Layers | tuple) -> int:
        """Size of an attention section with ``count`` cells and these layer row sizes."""
        if count == 0:
            return 8
        return 8 + self.cell_bytes * count + 8 + sum(12 + layer[1] * count for layer in layers)

    def rows_offsets(self, layers: Layers, count: int, offset: int = HEADER.size) -> list[tuple[int, int]]:
        """Offset and row size of each layer's rows in an attention section of ``count``
        (> 0) cells at ``offset``: the layout ``write_attention`` writes, without reading it
        back (a restore's pieces are slices at these offsets)."""
        at = offset + 8 + self.cell_bytes * count + 8  # past the cell list, then v_trans and n_layer
        out = []
        for _kind, row in layers:
            at += 12  # the layer's type and row size
            out.append((at, row))
            at += row * count
        return out

    def write_attention(self, out: np.ndarray, offset: int, seq: int, cells: np.ndarray, layers) -> int:
        """Write an attention section into ``out`` at ``offset``; returns the end offset.

        ``cells`` are the cells' positions (a 1-D array: any extra fields are zero) or
        their whole fields (rows as ``cells`` gives them: extra fields kept). ``layers``
        is ``(type, row_bytes, rows)`` per K then V layer, where ``rows`` is an array of
        one row per cell, or None for rows left as they are in ``out`` (the caller fills
        them, or they are filler that nothing reads).
        """
        count = len(cells)
        struct.pack_into("<II", out.data, offset, 1, count)
        pos = offset + 8
        if count == 0:
            return pos
        meta = self.cells(out, pos, count)
        if cells.ndim == 2:
            meta[...] = cells
        else:
            meta[:, 0] = cells
            meta[:, 2 : self.seq_column] = 0
        meta[:, 1] = 1
        meta[:, self.seq_column] = seq
        pos += self.cell_bytes * count
        struct.pack_into("<II", out.data, pos, 0, self.n_layer(layers))
        pos += 8
        for kind, row, rows in layers:
            struct.pack_into("<iQ", out.data, pos, kind, row)
            pos += 12
            if rows is not None:
                out[pos : pos + row * count].reshape(count, row)[...] = rows
            pos += row * count
        return pos

    def relabel(self, blob: np.ndarray, seq: int) -> None:
        """Write ``seq`` as the sequence a one-section state belongs to (in place)."""
        HEADER.pack_into(blob.data, 0, STATE_MAGIC, seq)
        count = int(np.frombuffer(blob, dtype="<u4", count=1, offset=HEADER.size + 4)[0])
        self.cells(blob, HEADER.size + 8, count)[:, self.seq_column] = seq

    # -- shapes ------------------------------------------------------------------------------

    def probe_shape(self, read_at, size: int) -> tuple[SectionShape, int]:
        """The shape and cell count of a cells-only state of ``size`` bytes, from a few small reads.

        ``read_at(offset, n)`` gives ``n`` bytes of the state at ``offset``. Raises
        ``LayoutError`` for a state this module does not know.
        """

        def read(pos: int, n: int) -> bytes:
            # A damaged field can point anywhere: never read past the state, nor ask for a
            # negative length (the tail's, when the last layer's rows end past the state).
            if n < 0 or pos + n > size:
                raise LayoutError("the state ends early")
            return read_at(pos, n)

        try:
            magic, seq, n_stream, count = struct.unpack("<IiII", read(0, 16))
            if magic != STATE_MAGIC or n_stream != 1:
                raise LayoutError("not a single-stream sequence state")
            pos = 16 + self.cell_bytes * count
            v_trans, n_layer = struct.unpack("<II", read(pos, 8))
            if v_trans:
                raise LayoutError("V is stored transposed (flash attention off)")
            pos += 8
            entries = self.n_entries(n_layer)
            if pos + 12 * entries > size:
                raise LayoutError("the state ends inside its layers")
            layers = []
            for _ in range(entries):
                kind, row = struct.unpack("<iQ", read(pos, 12))
                layers.append((kind, row))
                pos += 12 + row * count
            tail = read(pos, size - pos)
        except struct.error:
            raise LayoutError("the state ends early") from None
        return SectionShape(self, seq, tuple(layers), tail), count

    def shape_of(self, blob: np.ndarray) -> SectionShape:
        """The shape of a cells-only state held in memory."""
        seq = read_header(blob)
        section = self.read_attention(blob, HEADER.size)
        if not len(section.positions):
            raise LayoutError("a state with no cells has no layers")
        layers = tuple((kind, row) for kind, row, _rows in section.layers)
        return SectionShape(self, seq, layers, bytes(blob[section.end :]))


@dataclass(frozen=True)
class SectionShape:
    """What every cells-only state of one context shares: everything but its cells.

    Known from one such state, it gives the exact layout of a state of any cell count,
    so a restore can read a checkpoint file's pieces straight into place (``pieces``).
    """

    layout: StateLayout
    seq: int
    """The sequence the states were read from (their header and cells say it)."""
    layers: Layers
    tail: bytes
    """What follows the attention section (the other memory parts, with no cells)."""

    def size(self, count: int) -> int:
        """Bytes of a cells-only state of ``count`` cells."""
        return HEADER.size + self.layout.attention_bytes(count, self.layers) + len(self.tail)

    def fixed(self, count: int) -> bytes:
        """The bytes of such a state that are not cells: header, section fields, tail."""
        return _fixed_bytes(self, count)


@functools.lru_cache(maxsize=256)
def _fixed_bytes(shape: SectionShape, count: int) -> bytes:
    out = [HEADER.pack(STATE_MAGIC, shape.seq), struct.pack("<II", 1, count)]
    out.append(struct.pack("<II", 0, shape.layout.n_layer(shape.layers)))
    out.extend(struct.pack("<iQ", kind, row) for kind, row in shape.layers)
    return b"".join(out) + shape.tail


class JoinedCells:
    """A cells-only state of ``count`` cells laid out in ``out``, filled range by range.

    The skeleton (header, section fields, tail) is written at once; each range's cells
    then go to their place, from a state in memory (``copy``) or, as file pieces, by a
    scatter read (``pieces``), without a separate join. The cell list is left as it is:
    every range writes its own, and only the cells written are ever used (``first``).

    A restore makes one per batch and asks for the pieces of every file, so offsets are
    worked out once here and pieces are slices of a ``memoryview``: numpy views cost
    several times more, and a restore of a long branch asks for hundreds of pieces.
    """

    def __init__(self, shape: SectionShape, count: int, out: np.ndarray) -> None:
        if count <= 0:
            raise ValueError("a join of no cells")
        self.shape, self.count = shape, count
        layout = shape.layout
        self.blob = out[: shape.size(count)]
        self._view = self.blob.data
        fixed = shape.fixed(count)  # header, cell count, v_trans and n_layer, each layer's fields, tail
        self._meta_at = HEADER.size + 8
        self._view[: self._meta_at] = fixed[: self._meta_at]
        self._rows_at = layout.rows_offsets(shape.layers, count)
        """Offset and row size of each layer's rows."""
        layers_at = self._meta_at + layout.cell_bytes * count  # v_trans and n_layer, after the cell list
        self._view[layers_at : layers_at + 8] = fixed[16:24]
        for i, (at, _row) in enumerate(self._rows_at):
            self._view[at - 12 : at] = fixed[24 + 12 * i : 36 + 12 * i]
        self._view[len(self.blob) - len(shape.tail) :] = shape.tail
        self.meta = layout.cells(self.blob, self._meta_at, count)

    @functools.cached_property
    def rows(self) -> list[np.ndarray]:
        """Each layer's rows, one per cell."""
        return [self.blob[at : at + row * self.count].reshape(self.count, row) for at, row in self._rows_at]

    def pieces(self, at: int, count: int, scratch: np.ndarray) -> list[memoryview]:
        """Where the state of a file holding cells ``[at, at + count)`` of this one goes.

        In file order: the fields that are not cells go to ``scratch`` (of
        ``len(shape.fixed(count))`` bytes, to be checked with ``check``), cells and rows
        to their place here.
        """
        view, fields = self._view, scratch.data
        cell = self.shape.layout.cell_bytes
        meta = self._meta_at + cell * at
        out = [fields[:16], view[meta : meta + cell * count], fields[16:24]]
        pos = 24
        for offset, row in self._rows_at:
            out += [fields[pos : pos + 12], view[offset + row * at : offset + row * (at + count)]]
            pos += 12
        out.append(fields[pos : pos + len(self.shape.tail)])
        return out

    def check(self, count: int, scratch: np.ndarray) -> None:
        """Raise ``LayoutError`` unless a file read with ``pieces`` had this shape.

        Its cells are checked with all the others, by ``check_cells``.
        """
        if scratch.tobytes() != self.shape.fixed(count):
            raise LayoutError("a checkpoint of another layout")

    def check_cells(self, count: int) -> None:
        """Raise ``LayoutError`` unless the first ``count`` cells belong to this sequence alone.

        Without extra fields each cell's ``n_seq`` and ``seq`` are adjacent and read as one
        64-bit word (``n_seq`` low), a single strided comparison: a quarter of the time of
        comparing the two columns.
        """
        layout, seq = self.shape.layout, self.shape.seq
        if layout.cell_ext:
            meta = self.meta[:count]
            ok = bool(np.all(meta[:, 1] == 1) and np.all(meta[:, layout.seq_column] == seq))
        else:
            words = np.ndarray((count,), dtype="<u8", buffer=self.blob, offset=self._meta_at + 4,
                               strides=(layout.cell_bytes,))
            ok = bool((words == (1 | (seq & 0xFFFFFFFF) << 32)).all())
        if not ok:
            raise LayoutError("cells shared by several sequences")

    def copy(self, at: int, blob: np.ndarray) -> int:
        """Put the cells of a cells-only state held in memory at ``at``; returns their count."""
        layout = self.shape.layout
        if read_header(blob) != self.shape.seq:
            raise LayoutError("a checkpoint of another sequence")
        section = layout.read_attention(blob, HEADER.size)
        count = len(section.positions)
        layers = tuple((kind, row) for kind, row, _rows in section.layers)
        if layers != self.shape.layers or bytes(blob[section.end :]) != self.shape.tail:
            raise LayoutError("a checkpoint of another layout")
        self.meta[at : at + count] = section.cells
        for dst, (_kind, _row, src) in zip(self.rows, section.layers, strict=True):
            dst[at : at + count] = src
        return count

    def first(self, count: int) -> np.ndarray:
        """A new state of the first ``count`` cells only (when a later range failed)."""
        layout = self.shape.layout
        layers = [(kind, row, rows[:count]) for (kind, row), rows in zip(self.shape.layers, self.rows, strict=True)]
        out = np.empty(self.shape.size(count), dtype=np.uint8)
        HEADER.pack_into(out.data, 0, STATE_MAGIC, self.shape.seq)
        end = layout.write_attention(out, HEADER.size, self.shape.seq, self.meta[:count], layers)
        out[end:] = np.frombuffer(self.shape.tail, dtype=np.uint8)
        return out
