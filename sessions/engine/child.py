"""The engine process: one ``LlamaChatEngine`` and its checkpoint store, driven over a socket.

Started by ``EngineProcess`` as ``python -m sessions.engine.child FD``. A listener
thread reads every message as it arrives: a stop or abort takes effect at once (the
engine checks it between batches and between tokens), calls are queued for the main
thread, which runs them one at a time and streams progress and text back. When the
socket closes (the app ended, even by SIGKILL) the process stops the running work,
finishes its checkpoint writes and exits.

If an RPC server dies, llama.cpp aborts this process; the app sees the socket close,
and nothing here has to survive it: checkpoints are written to a temp file and renamed,
so a write cut short leaves at most a temp file that the next store cleans up.
"""

from __future__ import annotations

import queue
import signal
import sys
import threading
from collections.abc import Sequence
from dataclasses import fields
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np

from sessions.checkpoints import CheckpointStore
from sessions.engine.chat_engine import LlamaChatEngine
from sessions.engine.reports import Generated, Prepared, RoutePlan, Tier, WarmedAhead
from sessions.engine.wire import Loaded, LoadRequest, to_wire
from sessions.sampling import SamplingSettings

Call = tuple[str, str, tuple[Any, ...]]
"""``("call", name, args)`` (``wire``)."""


class _Channel:
    """Sends from any thread (results, streamed text, the store's notices)."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self._lock = threading.Lock()

    def send(self, *message: Any) -> None:
        with self._lock:
            self.conn.send(message)


def _open(request: LoadRequest, channel: _Channel) -> tuple[LlamaChatEngine, CheckpointStore | None]:
    s = request.settings
    store = None
    if request.checkpoint_dir is not None:
        store = CheckpointStore(Path(request.checkpoint_dir), ram_bytes=s.checkpoint_ram_mb << 20,
                                disk_bytes=s.checkpoint_disk_bytes,
                                on_problem=lambda text: channel.send("notice", text))
    try:
        engine = LlamaChatEngine(
            request.path,
            s.context_params(),
            n_gpu_layers=s.n_gpu_layers,
            tensor_split=s.tensor_split,
            rpc=s.rpc,
            checkpoints=store,
            interval=s.checkpoint_interval,
            parking=s.parked_mb << 20,
            on_progress=lambda f: channel.send("load_progress", f),
            template_override=s.template_override(Path(request.path)),
            template_variables=s.template_variables(Path(request.path)),
        )
    except BaseException:
        if store is not None:
            store.close()
        raise
    return engine, store


class _Worker:
    def __init__(self, engine: LlamaChatEngine, channel: _Channel) -> None:
        self.engine = engine
        self.channel = channel
        self.calls: queue.Queue[Call | None] = queue.Queue()
        self.stop = threading.Event()

    def listen(self) -> None:
        """Route every incoming message; runs in its own thread until the socket closes."""
        conn = self.channel.conn
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):
                message = ("close",)
            kind = message[0]
            if kind == "abort":
                self.engine.request_abort()
            elif kind == "clear":
                self.engine.clear_abort()
            elif kind == "stop":
                self.stop.set()
            elif kind == "call":
                if message[1] in ("generate", "generate_versions", "warm_ahead"):
                    self.stop.clear()  # here, in order: a stop sent after this call still counts
                self.calls.put(message)
            elif kind == "close":
                self.engine.request_abort()
                self.stop.set()
                self.calls.put(None)
                return

    def run(self) -> None:
        while (message := self.calls.get()) is not None:
            _, name, args = message
            try:
                try:
                    reply = ("result", getattr(self, f"_{name}")(*args))
                except Exception as error:
                    reply = ("error", to_wire(error))
                self.channel.send(*reply)
            except OSError:  # the app is gone: nobody to answer
                return

    def _template(self) -> dict[str, Any]:
        """The chat template the engine chose, as the fields that rebuild it.

        The parent renders every prompt, so it must use this very template (the user's
        override, or the fallback the vocabulary picks), not choose one of its own. A
        compiled Jinja template does not pickle: it is compiled again there.
        """
        template = self.engine.template
        return {f.name: getattr(template, f.name) for f in fields(template) if f.name != "_compiled"}

    def _tokenize(self, text: str, add_bos: bool) -> list[int]:
        return self.engine.tokenize(text, add_bos)

    def _detokenize(self, tokens: Sequence[int]) -> str:
        return self.engine.detokenize(tokens)

    def _plan(self, target: Sequence[int], ends: Sequence[int], need_logits: bool = True,
              stepped: Sequence[bool] | None = None) -> RoutePlan:
        return self.engine.plan(target, ends, need_logits=need_logits, stepped=stepped)

    def _warm_ahead(self, target: Sequence[int], ends: Sequence[int]) -> WarmedAhead:
        return self.engine.warm_ahead(target, ends, self.stop.is_set)

    def _saved_tiers(self, prefixes: Sequence[str]) -> list[Tier | None]:
        return self.engine.saved_tiers(prefixes)

    def _prepare(self, target: Sequence[int], ends: Sequence[int], stepped: Sequence[bool] | None,
                 reply_follows: bool = False, need_logits: bool = True) -> Prepared:
        def progress(done: int, total: int, rate: float) -> None:
            self.channel.send("progress", done, total, rate)

        return self.engine.prepare(target, ends, stepped, progress, reply_follows=reply_follows,
                                   need_logits=need_logits)

    def _generate(self, logits: np.ndarray, settings: SamplingSettings, max_tokens: int) -> Generated:
        return self.engine.generate(logits, settings, max_tokens=max_tokens,
                                    on_text=lambda text: self.channel.send("text", text),
                                    should_stop=self.stop.is_set)

    def _save_checkpoints(self) -> None:
        self.engine.save_checkpoints()

    def _generate_versions(self, logits: np.ndarray, settings: Sequence[SamplingSettings],
                           max_tokens: int) -> list[Generated]:
        return self.engine.generate_versions(logits, settings, max_tokens=max_tokens,
                                             on_text=lambda k, text: self.channel.send("version_text", k, text),
                                             should_stop=self.stop.is_set)


def serve(conn: Connection) -> int:
    channel = _Channel(conn)
    try:
        kind, request = conn.recv()
    except (EOFError, OSError):
        return 0
    assert kind == "load"
    try:
        engine, store = _open(request, channel)
    except Exception as error:
        channel.send("error", to_wire(error))
        return 1
    try:
        channel.send("loaded", Loaded(engine.info, engine.n_ctx, engine.load_seconds, engine.placement,
                                        engine.checkpoint_notice))
        worker = _Worker(engine, channel)
        threading.Thread(target=worker.listen, name="engine-listener", daemon=True).start()
        worker.run()
    finally:
        if store is not None:
            store.close()  # the queued checkpoint writes land before the process ends
        engine.close()
    return 0


def main(argv: list[str]) -> int:
    # Terminal signals belong to the app, which stops this process through the socket.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    conn = Connection(int(argv[0]))
    try:
        return serve(conn)
    finally:
        conn.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
