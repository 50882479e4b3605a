"""A trial load in a child process, for what no header check can prove.

llama.cpp has hundreds of ``GGML_ASSERT`` checks on a model's numbers, spread over every
architecture, and a failed one ends the process (exit status 134) with the app and the
terminal it had taken over. The header checks (``abort_checks.header_problem``) catch
the known ones, those met only at the first decode included; for the rest, the file is
first loaded by a short-lived child process the way llama.cpp loads it, without reading
its tensor data (``sessions.llama.trial_load`` says which aborts each part covers). If
the child dies of a signal, the file is refused with the assertion llama.cpp printed; if
it loads, the file is remembered as passed (``probed-models.json`` in the cache folder,
keyed by the file's path, device, inode, size and modification time, and by the installed
llama-cpp-python's own files, so a new version or a rebuild tries every file again), so each
file is tried once.

The trial reads the header and plans the memory, so it costs the child's start whatever
the file's size, not a second load of a download of tens of gigabytes
(``tests.bench.trial_load`` measures it against a load). The models llamachat makes
itself (the demo model, ``sessions.synth``) are written by this program and are not tried.

The child runs ``python -m sessions.llama.trial_load FILE``: exit status 0 when the file
loads, 3 (``REFUSED``) when llama.cpp refuses it (the real load then says why), anything
else a crash.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
from importlib.util import find_spec
from pathlib import Path

from sessions import paths
from sessions.bounded_read import read_regular_file
from sessions.trial_status import REFUSED

PROBE_TIMEOUT = 300.0
CACHE_NAME = "probed-models.json"
CACHE_LIMIT = 8 << 20
"""Bytes of the list of probed files read (a line per model file)."""
TRIAL = "sessions.llama.trial_load"
"""The module the child process runs (it imports llama.cpp; this one must not)."""


def probe_once(path: Path) -> str | None:
    """Why llama.cpp cannot be trusted with ``path`` (it crashed a trial load), or None."""
    if _made_by_llamachat(path):
        return None
    key = _identity(path)
    if key is None:
        return None  # cannot be looked at: the load itself will say why
    if key in _passed():
        return None
    problem, passed = _try(path)
    if passed:
        _remember(key)
    return problem


def _made_by_llamachat(path: Path) -> bool:
    try:
        return path.resolve().parent == paths.made_models_dir().resolve()
    except OSError:
        return False


def _identity(path: Path) -> str | None:
    try:
        real = path.resolve()
        info = real.stat()
        build = _llama_cpp_build()
    except OSError:
        return None
    return f"{real}|{info.st_dev}|{info.st_ino}|{info.st_size}|{info.st_mtime_ns}|{build}"


def _llama_cpp_build() -> str:
    """The installed llama-cpp-python, by its package's first file (size and time): an
    upgrade or a rebuild writes it anew. Found without importing llama.cpp's bindings (this
    module must not), nor ``importlib.metadata``, which every ``llamachat ask`` would pay
    for at its start."""
    spec = find_spec("llama_cpp")
    if spec is None or spec.origin is None:
        raise OSError("llama-cpp-python is not installed")
    info = os.stat(spec.origin)
    return f"{spec.origin}:{info.st_size}:{info.st_mtime_ns}"


def _cache_file() -> Path:
    return paths.cache_dir() / CACHE_NAME


def _passed() -> set[str]:
    """Files that loaded before; a damaged or foreign cache only means probing again."""
    try:
        entries = json.loads(read_regular_file(_cache_file(), CACHE_LIMIT))  # a FIFO there must not block
    except (OSError, ValueError):
        return set()
    return {entry for entry in entries if isinstance(entry, str)} if isinstance(entries, list) else set()


def _remember(key: str) -> None:
    entries = sorted(_passed() | {key})
    try:
        folder = paths.ensure_private_dir(paths.cache_dir())
        fd, temp = tempfile.mkstemp(dir=folder, prefix=f".{CACHE_NAME}.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(entries, handle)
        os.replace(temp, _cache_file())
    except OSError:
        pass  # not remembered: the file is tried again next time


def _try(path: Path) -> tuple[str | None, bool]:
    """(why the file is refused or None, whether it passed)."""
    env = dict(os.environ, GGML_NO_BACKTRACE="1")  # no debugger attached to the child
    try:
        done = subprocess.run([sys.executable, "-m", TRIAL, str(path)],
                              stdin=subprocess.DEVNULL, capture_output=True, env=env, timeout=PROBE_TIMEOUT)
    except subprocess.TimeoutExpired:
        return None, False  # a slow disk is no reason to refuse; tried again next time
    except OSError:
        return None, False
    if done.returncode == 0:
        return None, True
    if done.returncode == REFUSED:
        return None, False
    return _crash(done.returncode, done.stderr.decode("utf-8", "replace")), False


def _crash(returncode: int, stderr: str) -> str:
    if returncode < 0:
        try:
            how = signal.Signals(-returncode).name
        except ValueError:
            how = f"signal {-returncode}"
    else:
        how = f"exit status {returncode}"
    said = next((line.strip() for line in stderr.splitlines() if "GGML_ASSERT" in line or "error" in line.lower()),
                "")
    said = re.sub(r"\S*/(?=[^/\s]+:\d+:)", "", said)  # the source file's name, not the build folder
    detail = f": {said[-200:]}" if said else ""
    return f"invalid model file: llama.cpp crashed trying to load it ({how}{detail})"
