"""The one place that imports llama-cpp-python's ctypes bindings.

Importing ``llama_cpp`` loads a shared library and initialises ggml, which costs time the
shell subcommands should not pay, so every engine module asks for the bindings through
``lib()``. llama.cpp also logs every tensor it loads to stderr, which would scribble over
the terminal UI; ``lib()`` routes that log to Python's ``logging`` (warnings and errors
only) the first time it runs; ``log_lines`` lets a caller read every line for a while
(the loader reads which device each layer went to that way).

The bindings cover ``llama.h`` only. The ggml backend registry (devices, the RPC backend)
is reached through ``ggml()``, which opens the ggml libraries that ``llama_cpp`` has
already loaded: a wheel ships each library under several names as separate copies, and
opening another copy would give a second, empty registry that llama.cpp never sees.
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import ModuleType

log = logging.getLogger("llamachat.llama")

LOG_WARN = 3
LOG_ERROR = 4
"""ggml's log levels (``GGML_LOG_LEVEL_WARN``, ``_ERROR``); below them is load chatter."""
LOG_CONT = 5
"""``GGML_LOG_LEVEL_CONT``: more of the previous line (the loader's progress dots, the
tail of a long error), not a severity; it is logged at the level of the line it continues."""

_lock = threading.Lock()
_lib: ModuleType | None = None
_log_callback = None  # kept alive: llama.cpp holds a raw pointer to it
_line_listeners: list[Callable[[int, str], None]] = []
_last_level = 0
"""The level of the last line that was not a continuation (see ``LOG_CONT``)."""
_ggml: Ggml | None = None


def lib() -> ModuleType:
    """Return ``llama_cpp`` with its backend initialised and its log quietened."""
    global _lib, _log_callback
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is None:
            # Deferred: loading llama.cpp's library is the cost that every other import avoids.
            import llama_cpp as L

            @L.llama_log_callback
            def _route(level: int, text: bytes, _user: ctypes.c_void_p) -> None:
                global _last_level
                for listener in tuple(_line_listeners):
                    listener(level, text.decode("utf-8", "replace").rstrip() if text else "")
                if level == LOG_CONT:
                    level = _last_level
                else:
                    _last_level = level
                if level >= LOG_WARN and text:
                    message = text.decode("utf-8", "replace").rstrip()
                    if message:
                        log.log(logging.ERROR if level == LOG_ERROR else logging.WARNING, message)

            _log_callback = _route
            L.llama_log_set(_log_callback, ctypes.c_void_p())
            L.llama_backend_init()
            _lib = L
    return _lib


def bindings_only() -> ModuleType:
    """``llama.h``'s ctypes bindings alone, for a short-lived child process.

    ``import llama_cpp`` also imports the package's high-level API (numpy, Jinja, the chat
    formats), which is most of a new process's start; the trial load needs six functions
    of ``llama_cpp.llama_cpp``. The package's ``__init__`` is skipped by registering an
    empty package first, so the submodule loads alone; where that fails (another layout
    of the package), the whole package is imported. llama.cpp logs only its warnings and
    errors, to stderr, and its backends are initialised as ``lib()`` does. Only for a
    process that never calls ``lib()``: the package stays registered without its API.
    """
    import importlib.util  # only this child needs it

    spec = importlib.util.find_spec("llama_cpp")
    if spec is not None and spec.submodule_search_locations is not None and "llama_cpp" not in sys.modules:
        package = ModuleType("llama_cpp")
        package.__path__ = list(spec.submodule_search_locations)
        package.__spec__ = spec
        sys.modules["llama_cpp"] = package
    L: ModuleType
    try:
        # Deferred: this is the cost a child process is started for.
        import llama_cpp.llama_cpp as bindings
        L = bindings
    except ImportError:
        sys.modules.pop("llama_cpp", None)
        import llama_cpp as package
        L = package

    global _log_callback

    @L.llama_log_callback
    def _stderr(level: int, text: bytes, _user: ctypes.c_void_p) -> None:
        global _last_level
        if level != LOG_CONT:
            _last_level = level
        if _last_level >= LOG_WARN and text:
            sys.stderr.write(text.decode("utf-8", "replace"))

    _log_callback = _stderr
    L.llama_log_set(_log_callback, ctypes.c_void_p())
    L.llama_backend_init()
    return L


@contextmanager
def log_lines(listener: Callable[[int, str], None]) -> Iterator[None]:
    """Call ``listener(level, line)`` for every llama.cpp log line while inside (1 = debug)."""
    lib()
    _line_listeners.append(listener)
    try:
        yield
    finally:
        _line_listeners.remove(listener)


class _HeldErrors(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@contextmanager
def held_errors() -> Iterator[list[str]]:
    """llama.cpp's error lines while inside, in a list that fills as they come.

    They are the only place llama.cpp says *why* a load or a context failed, and while
    held they stay off the terminal: the failure is reported once, as an error that
    says why, instead of as log noise around it."""
    handler = _HeldErrors()
    log.addHandler(handler)
    try:
        yield handler.lines
    finally:
        log.removeHandler(handler)


@dataclass(frozen=True)
class Ggml:
    """The ggml backend registry functions llamachat uses, typed (``ggml-backend.h``)."""

    load_all: Callable[[], None]
    reg_by_name: Callable[[bytes], int | None]
    reg_get_proc_address: Callable[[int, bytes], int | None]
    register: Callable[[int], None]
    dev_count: Callable[[], int]
    dev_get: Callable[[int], int]
    dev_by_name: Callable[[bytes], int | None]
    dev_name: Callable[[int], bytes]
    dev_description: Callable[[int], bytes]
    dev_type: Callable[[int], int]
    dev_memory: Callable[[int, object, object], None]


_SONAMES = {"ggml": ("libggml.so.0", "libggml.0.dylib"), "base": ("libggml-base.so.0", "libggml-base.0.dylib")}


def _loaded(names: tuple[str, ...]) -> ctypes.CDLL:
    """The already-loaded library with one of these sonames (never a fresh copy)."""
    nowhere = getattr(os, "RTLD_NOLOAD", 0)
    for name in names:
        try:
            return ctypes.CDLL(name, mode=nowhere | getattr(os, "RTLD_GLOBAL", 0))
        except OSError:
            continue
    raise OSError(f"none of {', '.join(names)} is loaded by llama_cpp on {sys.platform}")


def ggml() -> Ggml:
    """The backend registry of the ggml that llama.cpp uses (loads ``llama_cpp`` first)."""
    global _ggml
    if _ggml is not None:
        return _ggml
    lib()
    with _lock:
        if _ggml is None:
            g, base = _loaded(_SONAMES["ggml"]), _loaded(_SONAMES["base"])
            p, c_char_p, c_size_t = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t

            def fn(dll, name, restype, *argtypes):
                f = getattr(dll, name)
                f.restype, f.argtypes = restype, list(argtypes)
                return f

            _ggml = Ggml(
                load_all=fn(g, "ggml_backend_load_all", None),
                reg_by_name=fn(g, "ggml_backend_reg_by_name", p, c_char_p),
                reg_get_proc_address=fn(base, "ggml_backend_reg_get_proc_address", p, p, c_char_p),
                register=fn(g, "ggml_backend_register", None, p),
                dev_count=fn(g, "ggml_backend_dev_count", c_size_t),
                dev_get=fn(g, "ggml_backend_dev_get", p, c_size_t),
                dev_by_name=fn(g, "ggml_backend_dev_by_name", p, c_char_p),
                dev_name=fn(base, "ggml_backend_dev_name", c_char_p, p),
                dev_description=fn(base, "ggml_backend_dev_description", c_char_p, p),
                dev_type=fn(base, "ggml_backend_dev_type", ctypes.c_int, p),
                dev_memory=fn(base, "ggml_backend_dev_memory", None, p,
                              ctypes.POINTER(c_size_t), ctypes.POINTER(c_size_t)),
            )
    return _ggml
