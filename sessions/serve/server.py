"""``llamachat serve`` running: the runtime opened, the model loaded, uvicorn listening.

The core is opened as the app and ``ask`` open it (``sessions.api.runtime.open_runtime``), so
the server shares their database, checkpoints and rules for several processes: the app
and ``ask`` keep working on the same data dir while it runs, and the chats it keeps open
in the app. The socket is bound here first, so a port in use is one sentence, and port
0 takes a free one (the line saying where it listens names it).

SIGINT, SIGTERM and SIGHUP stop it gracefully: no new request is taken, the reply being
written stops and is stored as a stopped reply, requests still waiting are answered
503, the open streams end, the checkpoint writer finishes and the database closes; the
exit status is 0. A second SIGINT ends the open connections at once.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from sessions.api.chat import SessionController
from sessions.api.runtime import open_runtime
from sessions.api.settings import Config
from sessions.errors import LlamachatError
from sessions.events import Event, NoticeRaised
from sessions.sampling import SamplingSettings
from sessions.serve.app import Api, Limits, ServedModel
from sessions.serve.engine_thread import SIGNALS, EngineThread

log = logging.getLogger("llamachat.serve")

CLEAN_EVERY = 600.0
"""Seconds between two looks for served chats past their budget or age."""


@dataclass(frozen=True)
class ServeOptions:
    host: str = "127.0.0.1"
    port: int = 8080
    api_keys: tuple[str, ...] = ()
    alias: str | None = None
    """The model's name in ``/v1/models`` (default: its file's name)."""
    queue: int = 16
    """Requests that may wait for the model behind the one it is answering."""
    max_body: int = 8 << 20
    body_seconds: float = 60.0
    queue_seconds: float = 600.0
    keep_chats: int | None = 1000
    """Served chats kept at most (the least recently used go first); None: no limit."""
    keep_days: float | None = 30.0
    """Days a served chat is kept unused; None: no limit."""
    access_log: bool = False


class ServeError(LlamachatError):
    """The server cannot start (a port in use, an address that is not this machine's)."""


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (port 0: a free one); ``ServeError`` in words when it cannot be."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as error:
        raise ServeError(f"cannot listen on {host}: {error.strerror}") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as error:
        sock.close()
        raise ServeError(f"cannot listen on {host}:{port}: {error.strerror or error}") from None
    sock.set_inheritable(True)
    return sock


def serve(config: Config, options: ServeOptions, model: Path | None, sampling: SamplingSettings,
          say: Callable[[str], None]) -> int:
    """Run the server with ``model`` (None: the demo model) until a signal stops it; the
    exit status. ``say`` tells the person who started it (where it listens, what it
    loaded, warnings)."""
    import uvicorn  # deferred: the other commands never need the HTTP stack

    def listen(event: Event) -> None:
        if isinstance(event, NoticeRaised):
            say(f"{event.level}: {event.text}")

    sock = bind(options.host, options.port)
    with (contextlib.closing(sock), _logging_to(say),
          open_runtime(config, listener=listen, sampling=sampling) as runtime):
        for notice in runtime.notices:
            say(f"warning: {notice}")
        controller = runtime.controller
        info = controller.load_model(model if model is not None else controller.models.demo_model())
        controller.listener = listen
        _clean(controller, options)
        engine = EngineThread(controller, options.queue)
        served = ServedModel(options.alias or info.path.name, _names(options.alias, info.path),
                             controller.n_ctx or 0, int(info.path.stat().st_mtime),
                             {"kind": info.kind.value, "architecture": info.architecture, "n_vocab": info.n_vocab})
        api = Api(engine, served, api_keys=options.api_keys, limits=Limits(
            options.max_body, options.body_seconds, options.queue_seconds), defaults=sampling)
        server = _Server(uvicorn.Config(api.app(), log_config=None, log_level="warning",
                                        access_log=options.access_log, timeout_keep_alive=5,
                                        timeout_graceful_shutdown=10, lifespan="off"), engine)
        engine.housekeeping = _every(CLEAN_EVERY, lambda: _clean(controller, options))
        engine.start()
        host, port = sock.getsockname()[:2]
        try:
            with server.handling_signals():
                say(f"listening on http://{_url_host(host)}:{port} (model {served.id}, "
                    f"context {served.n_ctx:,} tokens)")
                server.run(sockets=[sock])
        finally:
            engine.stop()
            engine.join()
        if server.signum is not None:
            say(f"stopped by {signal.Signals(server.signum).name}")
    return 0


@contextlib.contextmanager
def _logging_to(say: Callable[[str], None]) -> Iterator[None]:
    """The server's log lines (one per request, warnings) told as ``say`` tells the rest."""

    class Told(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            say(self.format(record))

    handler = Told()
    log.addHandler(handler)
    level, propagate = log.level, log.propagate
    log.setLevel(logging.INFO)
    log.propagate = False
    try:
        yield
    finally:
        log.removeHandler(handler)
        log.setLevel(level)
        log.propagate = propagate


def _names(alias: str | None, path: Path) -> frozenset[str]:
    return frozenset(name for name in (alias, path.name, path.stem, str(path)) if name)


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _clean(controller: SessionController, options: ServeOptions) -> None:
    max_age = None if options.keep_days is None else options.keep_days * 86400
    deleted = controller.clean_served(keep=options.keep_chats, max_age=max_age)
    if deleted:
        log.info("deleted %d served chats past the budget (--keep-chats) or age (--keep-days)", len(deleted))


def _every(seconds: float, work: Callable[[], None]) -> Callable[[], None]:
    """``work``, run when called no sooner than ``seconds`` after it last ran."""
    last = [time.monotonic()]

    def maybe() -> None:
        if time.monotonic() - last[0] >= seconds:
            last[0] = time.monotonic()
            work()

    return maybe


class _Server:
    """uvicorn's server, with the stop this one needs: SIGHUP handled as SIGTERM, the engine
    stopped at once (a reply being written does not hold the shutdown up), and the signal
    not raised again afterwards (the runtime must close before the process ends). The
    handlers are installed before the line saying where it listens, so a signal sent as
    soon as that line is read stops it as gracefully as any other."""

    def __init__(self, config: Any, engine: EngineThread) -> None:
        import uvicorn

        outer = self

        class Server(uvicorn.Server):
            @contextlib.contextmanager
            def capture_signals(self) -> Iterator[None]:
                yield  # installed by ``_Server.handling_signals``, earlier

            def handle_exit(self, sig: int, frame: FrameType | None) -> None:
                outer.signum = outer.signum or sig
                engine.stop()
                super().handle_exit(signal.SIGINT if sig == signal.SIGINT else signal.SIGTERM, frame)

        self.signum: int | None = None
        self._server = Server(config)

    @contextlib.contextmanager
    def handling_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {number: signal.signal(number, self._server.handle_exit) for number in SIGNALS}
        try:
            yield
        finally:
            for number, handler in previous.items():
                signal.signal(number, handler)

    def run(self, sockets: list[socket.socket]) -> None:
        self._server.run(sockets=sockets)
