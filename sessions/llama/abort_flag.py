"""A stop flag that llama.cpp can poll without entering Python.

ggml calls a context's abort callback once per graph node, thousands of times per batch,
from its worker threads. A Python callback there takes the GIL every time, which slows the
decode and starves the UI thread while a long prompt is read. The C library's ``strlen``
has the right shape (one pointer in, an integer out) and reads one byte: pointed at a
two-byte buffer it returns 0 (go on) while the buffer holds ``"\\0"`` and 1 (stop) once it
holds ``"x"``. Where no C library can be found, a Python callback does the same job.
"""

from __future__ import annotations

import ctypes
import ctypes.util


def _native_strlen():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
        return ctypes.cast(libc.strlen, ctypes.c_void_p).value
    except (OSError, AttributeError, TypeError):
        return None


class AbortFlag:
    """``callback`` and ``data`` go to ``llama_set_abort_callback``; ``set`` stops a decode."""

    def __init__(self, L) -> None:
        self._buf = ctypes.create_string_buffer(2)
        address = _native_strlen()
        if address:
            self.callback = L.ggml_abort_callback(address)
            self.native = True
        else:  # pragma: no cover - every supported platform has a C library
            self.callback = L.ggml_abort_callback(lambda _data: self.is_set())
            self.native = False
        self.data = ctypes.cast(self._buf, ctypes.c_void_p)

    def set(self) -> None:
        self._buf[0] = b"x"

    def clear(self) -> None:
        self._buf[0] = b"\0"

    def is_set(self) -> bool:
        return self._buf[0] != b"\0"
