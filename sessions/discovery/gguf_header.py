"""A small reader of a GGUF file's header: metadata and the tensor table, never the weights.

The model list shows name, size, quantisation, context length and memory kind for every
model found on disk, which may be dozens of multi-gigabyte files. Only the header is
needed for that, and reading it through ``mmap`` touches a few pages of each file. The
``gguf`` package reads the same format but imports numpy and builds arrays for every
field (a 150 000-entry vocabulary included); this reader skips long arrays instead, and
remembers where each one starts so a check that needs one (duplicate tokens, before a
load) can read just that array. Strings carry their length, so skipping an array of
strings still means stepping over each one: the loop that does it is kept as tight as
Python allows (a 262,144-token vocabulary is stepped over in about 20 ms).
"""

from __future__ import annotations

import mmap
import stat
import struct
from dataclasses import dataclass, field
from itertools import repeat
from pathlib import Path
from typing import Any

from sessions.discovery.ggml_types import tensor_nbytes
from sessions.errors import LlamachatError

MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
MAX_DIMS = 4
KEEP_ARRAYS_UP_TO = 64
"""Longer arrays (vocabularies, merges) are summarised as ``ArrayInfo``, not read."""
MAX_STRING_BYTES = 16 << 20
"""Longest metadata string read. The longest any real model carries is a chat template
of some tens of kB; a file claiming gigabytes (it may really be that large: model files
are) would have every header read copy them into memory."""

# GGUF value type id: (name, struct format or None for variable-size types)
VALUE_TYPES: dict[int, tuple[str, str | None]] = {
    0: ("uint8", "B"), 1: ("int8", "b"), 2: ("uint16", "H"), 3: ("int16", "h"),
    4: ("uint32", "I"), 5: ("int32", "i"), 6: ("float32", "f"), 7: ("bool", "?"),
    8: ("string", None), 9: ("array", None), 10: ("uint64", "Q"), 11: ("int64", "q"),
    12: ("float64", "d"),
}


class ModelFileError(LlamachatError):
    """A model file cannot be used; the message says why in plain words, naming the file."""


class _Truncated(LlamachatError):
    def __init__(self, what: str) -> None:
        self.what = what


class _Corrupt(LlamachatError):
    """A value in the header that no valid file contains."""


@dataclass(frozen=True)
class ArrayInfo:
    """A metadata array too long to be worth reading (its values were skipped)."""

    element_type: str
    length: int
    offset: int = 0
    """Where its first element starts in the file (see ``string_array``)."""


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]
    """Dimensions as stored (innermost first, as in ggml)."""
    type_id: int
    offset: int
    """Offset of the tensor's data from the start of the data section."""

    @property
    def n_elements(self) -> int:
        count = 1
        for dim in self.shape:
            count *= dim
        return count


@dataclass(frozen=True)
class GGUFHeader:
    """Everything in a GGUF file before its tensor data."""

    version: int
    byte_order: str
    """``little`` (almost every file) or ``big``."""
    metadata: dict[str, Any]
    tensors: list[TensorInfo] = field(default_factory=list)
    alignment: int = DEFAULT_ALIGNMENT
    data_offset: int = 0
    """Where the tensor data starts in the file."""
    file_size: int = 0

    def get(self, key: str, default: Any = None) -> Any:
        return self.metadata.get(key, default)

    def data_end(self) -> int | None:
        """Where the last tensor's data ends, or None when a tensor type is unknown."""
        end = self.data_offset
        for tensor in self.tensors:
            nbytes = tensor_nbytes(tensor.type_id, tensor.n_elements)
            if nbytes is None:
                return None
            end = max(end, self.data_offset + tensor.offset + nbytes)
        return end


class _Cursor:
    """Sequential reads from the mapped file, with bounds checks that name what was read."""

    def __init__(self, buffer: Any, size: int, endian: str) -> None:
        self.buffer, self.size, self.endian, self.pos = buffer, size, endian, 0

    def unpack(self, fmt: str, what: str) -> tuple[Any, ...]:
        full = self.endian + fmt
        width = struct.calcsize(full)
        if self.pos + width > self.size:
            raise _Truncated(what)
        values = struct.unpack_from(full, self.buffer, self.pos)
        self.pos += width
        return values

    def skip(self, count: int, what: str) -> None:
        if count < 0 or self.pos + count > self.size:
            raise _Truncated(what)
        self.pos += count

    def string(self, what: str) -> str:
        (length,) = self.unpack("Q", what)
        if length > MAX_STRING_BYTES and self.pos + length <= self.size:  # (one past the file is truncated)
            raise _Corrupt(f"{what} is a string of {length:,} bytes; no model needs more than {MAX_STRING_BYTES:,}")
        start = self.pos
        self.skip(length, what)
        return bytes(self.buffer[start:self.pos]).decode("utf-8", errors="replace")

    def value(self, type_id: int, what: str) -> Any:
        if type_id not in VALUE_TYPES:
            raise _Corrupt(f"unknown value type {type_id} in {what}")
        name, fmt = VALUE_TYPES[type_id]
        if fmt is not None:
            return self.unpack(fmt, what)[0]
        if name == "string":
            return self.string(what)
        (element_type, count) = self.unpack("IQ", what)
        if element_type not in VALUE_TYPES:
            raise _Corrupt(f"unknown array type {element_type} in {what}")
        if VALUE_TYPES[element_type][0] == "array":
            # llama.cpp's gguf_init refuses any array of arrays, so no usable file has one;
            # reading them would recurse once per level (3,000 levels: RecursionError).
            raise _Corrupt(f"{what} is an array of arrays, which llama.cpp cannot read")
        element_name, element_fmt = VALUE_TYPES[element_type]
        start = self.pos
        if element_fmt is not None:
            if count > KEEP_ARRAYS_UP_TO:
                self.skip(count * struct.calcsize(self.endian + element_fmt), what)
                return ArrayInfo(element_name, count, start)
            return list(self.unpack(f"{count}{element_fmt}", what))
        if count > KEEP_ARRAYS_UP_TO:
            if count * 8 > self.size - self.pos:
                raise _Truncated(what)
            self.pos = skip_strings(self.buffer, self.pos, count, self.endian, self.size, what)
            return ArrayInfo(element_name, count, start)
        return [self.value(element_type, what) for _ in range(count)]


def skip_strings(buffer: Any, pos: int, count: int, endian: str, size: int, what: str) -> int:
    """The position after ``count`` length-prefixed strings starting at ``pos``.

    The hot loop of every header read (vocabularies and merges hold hundreds of thousands
    of strings): one ``unpack_from`` and one addition per string, the bounds checked once
    at the end (``unpack_from`` itself refuses to read past the mapped file).
    """
    length_at = struct.Struct(endian + "Q").unpack_from
    try:
        for _ in repeat(None, count):
            pos += 8 + length_at(buffer, pos)[0]
    except struct.error:
        raise _Truncated(what) from None
    if pos > size:
        raise _Truncated(what)
    return pos


def string_array(path: Path | str, info: ArrayInfo, byte_order: str = "little") -> list[bytes]:
    """The raw bytes of each string of a skipped array (``info`` from ``read_gguf_header``).

    Raises ``ModelFileError`` for a string longer than ``MAX_STRING_BYTES`` (the header
    read skips such arrays without copying them; this would copy every byte)."""
    endian = "<" if byte_order == "little" else ">"
    length_at = struct.Struct(endian + "Q").unpack_from
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as buffer:
        strings: list[bytes] = []
        append = strings.append
        pos = info.offset
        for _ in repeat(None, info.length):
            start = pos + 8
            pos = start + length_at(buffer, pos)[0]
            if pos - start > MAX_STRING_BYTES:
                raise ModelFileError(f"{Path(path).name}: corrupt GGUF header: a string of {pos - start:,} bytes "
                                     f"in an array; no model needs more than {MAX_STRING_BYTES:,}")
            append(buffer[start:pos])
        return strings


def _describe_start(head: bytes) -> str:
    if not head:
        return "the file is empty"
    if head.startswith(b"version https://git-lfs"):
        return "it is a Git LFS pointer, not the model itself (run `git lfs pull`)"
    if head.lstrip().lower().startswith((b"<!doctype", b"<html")):
        return "it is an HTML page (a failed download?)"
    text = _as_text(head[:48])
    if text:
        line = text.strip().splitlines()[0]
        shown = line if len(line) <= 32 else line[:32].rstrip() + "…"
        return f'it is text ("{shown}"), where a GGUF model starts with "GGUF"'
    shown = " ".join(f"{byte:02x}" for byte in head[:4])
    return f'its first bytes are {shown}, where a GGUF model starts with "GGUF" (47 47 55 46)'


def _as_text(head: bytes) -> str | None:
    """``head`` as text, when it reads as such (UTF-8, a character perhaps cut at its end)."""
    for cut in range(4):
        try:
            text = head[: len(head) - cut].decode("utf-8")
        except UnicodeDecodeError:
            continue
        if text.strip() and all(ch.isprintable() or ch in "\t\r\n" for ch in text):
            return text
        return None
    return None


def read_gguf_header(path: Path | str) -> GGUFHeader:
    """Parse the header of ``path``; raises ``ModelFileError`` with the reason it cannot."""
    path = Path(path)
    try:
        info = path.stat()
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError
        if not stat.S_ISREG(info.st_mode):  # a pipe or device would block or never end
            raise ModelFileError(f"{path} is not a regular file")
        size = info.st_size
        with open(path, "rb") as handle:
            head = handle.read(64)
            if head[:4] != MAGIC:
                raise ModelFileError(f"not a GGUF file: {path.name}: {_describe_start(head)}")
            if len(head) < 8:
                raise ModelFileError(
                    f"{path.name}: truncated GGUF header (the file ends at byte {size} "
                    "while reading the version)")
            with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
                # the mapping's own length: the file may have changed since ``stat``
                return _parse(mapped, len(mapped), path)
    except FileNotFoundError:
        raise ModelFileError(f"no such model file: {path}") from None
    except IsADirectoryError:
        raise ModelFileError(f"{path} is a folder, not a model file") from None
    except PermissionError:
        raise ModelFileError(f"cannot read {path}: permission denied") from None
    except OSError as error:
        raise ModelFileError(f"cannot read {path}: {error.strerror or error}") from None
    except (RecursionError, MemoryError):
        # Last resort: the model list reads every file it finds, and one hostile file must
        # show as unusable there rather than end the list (only ``ModelFileError`` is caught).
        raise ModelFileError(f"{path.name}: GGUF header too large or too deeply nested to read") from None
    except (struct.error, ValueError, OverflowError) as error:
        raise ModelFileError(f"{path.name}: corrupt GGUF header ({error})") from None


def _parse(buffer: Any, size: int, path: Path) -> GGUFHeader:
    (version,) = struct.unpack_from("<I", buffer, 4)
    endian, byte_order = "<", "little"
    if version & 0xFFFF == 0 and version:
        (version,) = struct.unpack_from(">I", buffer, 4)
        endian, byte_order = ">", "big"
    if version not in SUPPORTED_VERSIONS:
        raise ModelFileError(
            f"{path.name}: GGUF version {version} is not supported (only versions 2 and 3); "
            "convert the model again with a recent llama.cpp")
    cursor = _Cursor(buffer, size, endian)
    cursor.pos = 8
    try:
        n_tensors, n_kv = cursor.unpack("QQ", "the header counts")
        if n_kv * 13 > size or n_tensors * 24 > size:
            raise _Truncated("the header counts (they are larger than the file)")
        metadata: dict[str, Any] = {}
        for index in range(n_kv):
            key = cursor.string(f"metadata key {index + 1} of {n_kv}")
            (type_id,) = cursor.unpack("I", f"the type of {key!r}")
            metadata[key] = cursor.value(type_id, f"the value of {key!r}")
        tensors = [_tensor(cursor, index, n_tensors) for index in range(n_tensors)]
    except _Truncated as truncated:
        raise ModelFileError(
            f"{path.name}: truncated GGUF header (the file ends at byte {size} "
            f"while reading {truncated.what})") from None
    except _Corrupt as corrupt:
        raise ModelFileError(f"{path.name}: corrupt GGUF header: {corrupt}") from None
    alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    if isinstance(alignment, bool) or not isinstance(alignment, int) or alignment <= 0 \
            or alignment & (alignment - 1):
        raise ModelFileError(f"{path.name}: corrupt GGUF header: bad alignment {alignment!r}")
    data_offset = -(-cursor.pos // alignment) * alignment
    return GGUFHeader(version, byte_order, metadata, tensors, alignment, data_offset, size)


def _tensor(cursor: _Cursor, index: int, count: int) -> TensorInfo:
    what = f"tensor info {index + 1} of {count}"
    name = cursor.string(what)
    (n_dims,) = cursor.unpack("I", what)
    if n_dims > MAX_DIMS:
        raise _Corrupt(f"tensor {name!r} has {n_dims} dimensions")
    shape = cursor.unpack(f"{n_dims}Q", what) if n_dims else ()
    type_id, offset = cursor.unpack("IQ", what)
    return TensorInfo(name, tuple(shape), type_id, offset)
