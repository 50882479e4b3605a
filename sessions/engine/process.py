"""The engine in a child process, for models whose layers live on RPC servers.

llama.cpp's RPC client has no way to report a lost server: it calls ``GGML_ABORT`` and the
process ends, and a stop midway through a graph is an abort too. So when RPC servers are
used, ``EngineProcess`` stands in for ``LlamaChatEngine`` (same ``ChatEngine`` protocol)
and runs the real one, with its checkpoint store, in ``sessions.engine.child``.
If a server dies, only the child ends: the next call raises ``EngineLost`` with one
sentence naming the server, the reply being written is dropped (what the store has
committed stays), and the call after that loads the model again in a new child, which
probes the servers first, so the session reopens as soon as they are back.

A stop (``request_abort``, or ``should_stop`` during a reply) reaches the child as a
message and takes effect after the batch or token in progress. If nothing comes back for
``stop_grace`` seconds, or three times the slowest step seen so far if that is longer (a
server that hangs rather than dies, a dead network), the child is killed and the servers
are probed to say which one no longer answers.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from typing import IO, Any, cast

import numpy as np

from sessions.engine.reports import Generated, Prepared, ProgressFn, RoutePlan, Tier, WarmedAhead
from sessions.engine.settings import EngineSettings
from sessions.engine.wire import Loaded, LoadRequest, WireError, from_wire
from sessions.rpc.errors import EngineLost, RpcError
from sessions.rpc.probe import probe
from sessions.sampling import SamplingSettings
from sessions.stop_reason import StopReason
from sessions.templates.chat_template import ChatTemplate

log = logging.getLogger(__name__)

STOP_GRACE = 20.0
"""Seconds a stop may take before the child is presumed stuck on a server (at least)."""
CLOSE_WAIT = 120.0
"""Seconds ``close`` waits for the child to finish its checkpoint writes."""
_POLL = 0.05


class EngineProcess:
    """A ``ChatEngine`` whose model runs in a child process (see the module docstring)."""

    def __init__(
        self,
        path: str | Path,
        settings: EngineSettings,
        *,
        checkpoint_dir: str | Path | None,
        on_progress: Callable[[float], None] | None = None,
        on_notice: Callable[[str], None] | None = None,
        stop_grace: float = STOP_GRACE,
    ) -> None:
        self._request = LoadRequest(str(path), settings, str(checkpoint_dir) if checkpoint_dir else None)
        self._on_progress = on_progress
        self._on_notice = on_notice
        self.stop_grace = stop_grace
        self._send_lock = threading.Lock()
        self._child: subprocess.Popen[bytes] | None = None
        self._conn: Connection | None = None
        self._stderr: IO[bytes] | None = None
        self._stop_asked: float | None = None
        self._slowest_step = 0.0
        """Longest wait between two messages of the child so far: a batch, a token, a tensor."""
        self._start()

    # -- the child ----------------------------------------------------------------------

    def _start(self) -> None:
        """Start a child, load the model in it, and take its description (blocking)."""
        parent_end, child_end = socket.socketpair()
        if self._stderr is not None:
            self._stderr.close()
        self._stderr = tempfile.TemporaryFile()
        env = dict(os.environ, GGML_NO_BACKTRACE="1")  # an abort must not wait for gdb
        try:
            self._child = subprocess.Popen(
                [sys.executable, "-m", "sessions.engine.child", str(child_end.fileno())],
                pass_fds=(child_end.fileno(),), stdin=subprocess.DEVNULL, stdout=self._stderr,
                stderr=self._stderr, env=env, start_new_session=True,
            )
        finally:
            child_end.close()
        self._conn = Connection(parent_end.detach())
        self._send(("load", self._request))
        try:
            loaded = self._wait(stoppable=False)
            self._send(("call", "template", ()))
            chosen = self._wait(stoppable=False)
        except BaseException:
            self._kill()
            self._child = None  # the next call tries again
            raise
        assert isinstance(loaded, Loaded)
        self.info = loaded.info
        self.n_ctx = loaded.n_ctx
        self.load_seconds = loaded.load_seconds
        self.placement = loaded.placement
        self.checkpoint_notice = loaded.checkpoint_notice
        self.template = _rebuilt(chosen)

    def _send(self, message: tuple[Any, ...]) -> None:
        with self._send_lock:
            if self._conn is None:
                return
            try:
                self._conn.send(message)
            except OSError:
                pass  # the child is gone; the waiting side reports it

    def _wait(self, *, on_progress: ProgressFn | None = None, on_text: Callable[[str], None] | None = None,
              on_version_text: Callable[[int, str], None] | None = None,
              should_stop: Callable[[], bool] | None = None, stoppable: bool = True) -> Any:
        """Read messages until the answer; stream what comes before it to the callbacks.

        A load is not ``stoppable``: llama.cpp cannot stop one, so a stop request waits.
        """
        assert self._conn is not None
        stop_sent = False
        last_message = time.monotonic()
        while True:
            if should_stop is not None and not stop_sent and should_stop():
                self._send(("stop",))
                stop_sent = True
                self._stop_asked = self._stop_asked or time.monotonic()
            if self._stop_asked is not None and stoppable:
                grace = max(self.stop_grace, 3 * self._slowest_step)
                if time.monotonic() - max(self._stop_asked, last_message) > grace:
                    raise self._lost(f"it did not stop within {grace:.0f} s of the stop request")
            try:
                if not self._conn.poll(_POLL):
                    continue
                message = self._conn.recv()
            except (EOFError, OSError):
                raise self._lost(None) from None
            now = time.monotonic()
            self._slowest_step, last_message = max(self._slowest_step, now - last_message), now
            kind = message[0]
            if kind in ("result", "loaded"):
                return message[1]
            if kind == "error":
                error = message[1]
                raise from_wire(error) if isinstance(error, WireError) else RuntimeError(str(error))
            if kind == "text" and on_text is not None:
                on_text(message[1])
            elif kind == "version_text" and on_version_text is not None:
                on_version_text(message[1], message[2])
            elif kind == "progress" and on_progress is not None:
                on_progress(*message[1:])
            elif kind == "load_progress" and self._on_progress is not None:
                self._on_progress(message[1])
            elif kind == "notice":
                (self._on_notice or log.warning)(message[1])

    def _lost(self, stuck: str | None) -> EngineLost:
        """End the child for good and say, in one sentence, what happened and to which server."""
        self._kill()
        code = self._child.returncode if self._child is not None else None
        self._child = None  # the next call starts a new one
        self._stop_asked = None
        down = []
        for endpoint in self._request.settings.rpc:
            try:
                probe(endpoint, timeout=1.0)
            except RpcError:
                down.append(endpoint)
        said = _abort_reason(self._stderr_tail())
        if down:
            what = f"RPC server {down[0]}" if len(down) == 1 else f"RPC servers {', '.join(down)}"
            head = f"lost {what} ({stuck or said or 'it stopped answering'})"
        else:
            why = stuck or said or (f"killed by signal {-code}" if code and code < 0 else f"exit status {code}")
            head = f"the engine process ended ({why}) while the RPC servers still answer"
        return EngineLost(f"{head}: the reply being written was dropped, every sent message is kept; "
                          "the next request loads the model again")

    def _kill(self) -> None:
        if self._child is not None and self._child.poll() is None:
            self._child.kill()
        if self._child is not None:
            self._child.wait()
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _stderr_tail(self) -> str:
        if self._stderr is None:
            return ""
        self._stderr.seek(0, os.SEEK_END)
        size = self._stderr.tell()
        self._stderr.seek(max(0, size - 4096))
        return self._stderr.read().decode("utf-8", "replace")

    def _call(self, name: str, *args: Any, on_progress: ProgressFn | None = None,
              on_text: Callable[[str], None] | None = None, on_version_text: Callable[[int, str], None] | None = None,
              should_stop: Callable[[], bool] | None = None) -> Any:
        """One call and its answer. Calls come one at a time: the controller's engine lock
        (``sessions.controller.job_control``) is the rule; only ``request_abort`` and
        ``clear_abort`` come from other threads meanwhile, and they only send."""
        if self._child is None:
            self._start()  # a server came back, or says in one line that it did not
        elif self._child.poll() is not None:
            raise self._lost(None)  # it ended between calls: say so once, start anew next time
        self._send(("call", name, args))
        try:
            return self._wait(on_progress=on_progress, on_text=on_text, on_version_text=on_version_text,
                              should_stop=should_stop)
        finally:
            self._stop_asked = None

    # -- the ChatEngine protocol -------------------------------------------------------

    @property
    def devices(self) -> str:
        return self.placement.summary() if self.placement is not None else ""

    @property
    def attention_notice(self) -> str | None:
        return self.placement.attention_notice() if self.placement is not None else None

    def tokenize(self, text: str, add_bos: bool) -> list[int]:
        return cast("list[int]", self._call("tokenize", text, add_bos))

    def detokenize(self, tokens: Sequence[int]) -> str:
        return cast(str, self._call("detokenize", list(tokens)))

    def plan(self, target: Sequence[int], ends: Sequence[int], *, need_logits: bool = True,
             stepped: Sequence[bool] | None = None) -> RoutePlan:
        return cast(RoutePlan, self._call("plan", list(target), list(ends), need_logits,
                                          list(stepped) if stepped is not None else None))

    def prepare(self, target: Sequence[int], ends: Sequence[int], stepped: Sequence[bool] | None = None,
                on_progress: ProgressFn | None = None, *, reply_follows: bool = False,
                need_logits: bool = True) -> Prepared:
        return cast(Prepared, self._call("prepare", list(target), list(ends),
                                         list(stepped) if stepped is not None else None, reply_follows,
                                         need_logits, on_progress=on_progress))

    def generate(self, logits: np.ndarray, settings: SamplingSettings, *, max_tokens: int,
                 on_text: Callable[[str], None] | None = None,
                 should_stop: Callable[[], bool] = lambda: False) -> Generated:
        if should_stop():  # stopped before it began: the child would race the stop to a first token
            return Generated([], "", StopReason.CANCELLED, None, 0.0)
        return cast(Generated, self._call("generate", logits, settings, max_tokens, on_text=on_text,
                                          should_stop=should_stop))

    def save_checkpoints(self) -> None:
        self._call("save_checkpoints")

    def generate_versions(self, logits: np.ndarray, settings: Sequence[SamplingSettings], *, max_tokens: int,
                          on_text: Callable[[int, str], None] | None = None,
                          should_stop: Callable[[], bool] = lambda: False) -> list[Generated]:
        if should_stop():
            return [Generated([], "", StopReason.CANCELLED, None, 0.0) for _ in settings]
        return cast("list[Generated]", self._call("generate_versions", logits, list(settings), max_tokens,
                                                  on_version_text=on_text, should_stop=should_stop))

    def warm_ahead(self, target: Sequence[int], ends: Sequence[int], should_stop: Callable[[], bool], *,
                   planned: Callable[[], None] | None = None) -> WarmedAhead:
        """Warmed in the child, into the RAM tier of its checkpoint store; a stop reaches it
        as a reply's does, and takes effect between two checkpoints. ``planned`` is not
        called: the reads are one call to the child, which takes calls one at a time."""
        if should_stop():
            return WarmedAhead(stopped=True)
        return cast(WarmedAhead, self._call("warm_ahead", list(target), list(ends), should_stop=should_stop))

    def saved_tiers(self, prefixes: Sequence[str]) -> list[Tier | None]:
        return cast("list[Tier | None]", self._call("saved_tiers", list(prefixes)))

    def request_abort(self) -> None:
        """Stop the running prepare between batches (any thread)."""
        self._stop_asked = self._stop_asked or time.monotonic()
        self._send(("abort",))

    def clear_abort(self) -> None:
        self._stop_asked = None
        self._send(("clear",))

    def close(self) -> None:
        """Let the child finish its checkpoint writes and exit; kill it if it cannot."""
        if self._child is not None:
            self._send(("abort",))
            self._send(("close",))
            try:
                self._child.wait(CLOSE_WAIT)
            except subprocess.TimeoutExpired:
                self._child.send_signal(signal.SIGKILL)
            self._kill()
            self._child = None
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None


def _rebuilt(chosen: dict[str, Any]) -> ChatTemplate:
    """The template the child's engine chose (``child._Worker._template``), compiled here.

    The child chose it as an engine in this process would (``sessions.templates.choice``: the user's
    override, the model's own, or a built-in picked by the vocabulary); choosing again here
    would need the model's vocabulary and read the override file a second time, which may
    have changed since. Compiling the same source with the same options gives the same
    template; what the choice and the child's probe decided is copied over as it was (a
    second test render here would only cost a second deadline, or be cut by a stop).
    """
    return ChatTemplate.probed(chosen["source"], name=chosen["name"], origin=chosen["origin"],
                               bos_token=chosen["bos_token"], eos_token=chosen["eos_token"],
                               variables=chosen["variables"], fallback_reason=chosen["fallback_reason"],
                               merges_system=chosen["merges_system"])


def _abort_reason(tail: str) -> str | None:
    """llama.cpp's own words from the child's last output, without the file and line."""
    for line in reversed(tail.splitlines()):
        if "GGML_ASSERT" in line or ": " in line and ("RPC" in line or "rpc" in line):
            return line.split(": ", 1)[-1].strip().rstrip(".")[:160]
    return None
