"""The one place that imports llama-cpp-python's ctypes bindings.

Importing ``llama_cpp`` loads a shared library and initialises ggml, which costs time the
shell subcommands should not pay, so every engine module asks for the bindings through
``lib()``. llama.cpp also logs every tensor it loads to stderr, which would scribble over
the terminal UI; ``lib()`` routes that log to Python's ``logging`` (warnings and errors
only) the first time it runs.
"""

from __future__ import annotations

import ctypes
import logging
import threading
from types import ModuleType

log = logging.getLogger("llamachat.llama")

_lock = threading.Lock()
_lib: ModuleType | None = None
_log_callback = None  # kept alive: llama.cpp holds a raw pointer to it


def lib() -> ModuleType:
    """Return ``llama_cpp`` with its backend initialised and its log quietened."""
    global _lib, _log_callback
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is None:
            import llama_cpp as L

            @L.llama_log_callback
            def _route(level: int, text: bytes, _user: ctypes.c_void_p) -> None:
                # GGML_LOG_LEVEL_WARN = 3, ERROR = 4; the rest is load chatter.
                if level >= 3 and text:
                    message = text.decode("utf-8", "replace").rstrip()
                    if message:
                        log.log(logging.ERROR if level == 4 else logging.WARNING, message)

            _log_callback = _route
            L.llama_log_set(_log_callback, ctypes.c_void_p())
            L.llama_backend_init()
            _lib = L
    return _lib
