"""The one thread that drives the model, and the bounded queue of requests waiting for it.

The model has one context, and the controller one job at a time on it (its engine lock):
requests are served in the order they came, each as one job on this thread. The HTTP
handlers run on the event loop and never wait on llama.cpp: a handler puts its job in
the queue (or is told at once that the queue is full) and reads what the job reports
(text as it is written, then the result or the error) from an asyncio queue the thread
fills through the loop.

A job is stopped when its client leaves or the server stops (``cancel``): one still
waiting is dropped when its turn comes, and the running one is stopped through the
controller, whose reply so far is then stored as a stopped reply. SIGINT, SIGTERM and
SIGHUP are blocked on this thread (and on llama.cpp's, which it starts), so they reach
the main thread, where the server handles them.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sessions.api.chat import SessionController
from sessions.events import Event, ignore
from sessions.serve.errors import ApiError

log = logging.getLogger("llamachat.serve")

IDLE_LOOK = 60.0
"""Seconds the thread waits for a job before it does its housekeeping anyway."""

SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


@dataclass(frozen=True)
class Started:
    """The job has the model now (it waited in the queue until then)."""


@dataclass(frozen=True)
class Text:
    index: int
    """Which choice (``n``) the text belongs to."""
    text: str


@dataclass(frozen=True)
class Done:
    result: Any


@dataclass(frozen=True)
class Failed:
    error: BaseException


Report = Started | Text | Done | Failed


class Job:
    """One request's work on the engine thread, and what it reports to its handler."""

    def __init__(self, loop: asyncio.AbstractEventLoop, work: Callable[[SessionController, Job], Any]) -> None:
        self._loop = loop
        self.work = work
        self.reports: asyncio.Queue[Report] = asyncio.Queue()
        self.gone = threading.Event()
        """The client left, or the server stops: the job stops where it is."""
        self.listener: Callable[[Event], None] = ignore
        """What the job does with the controller's events while it runs (its work sets it)."""

    def hear(self, event: Event) -> None:
        """The controller's listener while the job runs (on the engine thread)."""
        self.listener(event)

    def report(self, item: Report) -> None:
        """Hand ``item`` to the handler (any thread)."""
        try:
            self._loop.call_soon_threadsafe(self.reports.put_nowait, item)
        except RuntimeError:  # the loop has closed: nobody is reading any more
            pass


class EngineThread:
    """Runs jobs one at a time on one thread, with a bounded queue before it."""

    def __init__(self, controller: SessionController, queue_size: int) -> None:
        self.controller = controller
        self._idle_listener = controller.listener
        """Who hears the controller between jobs (the server's own notices)."""
        self._waiting: queue.Queue[Job | None] = queue.Queue(maxsize=queue_size + 1)
        """The jobs waiting, and room for the end mark (None) that ``stop`` puts last."""
        self._queue_size = queue_size
        self._lock = threading.RLock()
        self._running: Job | None = None
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="llamachat-serve-engine", daemon=True)
        self.housekeeping: Callable[[], None] = lambda: None
        """Work of the server's own, done between jobs (it decides how often)."""

    def start(self) -> None:
        self._thread.start()

    def submit(self, job: Job) -> None:
        """Queue ``job``; ``ApiError`` (503) when the queue is full or the server stops."""
        with self._lock:
            if self._closed:
                raise ApiError("the server is shutting down", 503)
            if self._waiting.qsize() >= self._queue_size:
                raise ApiError(f"the server is busy: {self._queue_size} requests are already waiting for the "
                               "model; retry later", 503)
            self._waiting.put_nowait(job)

    def cancel(self, job: Job) -> None:
        """Stop ``job``: dropped if it still waits, stopped through the controller if it runs (any thread)."""
        with self._lock:
            job.gone.set()
            if self._running is job:
                self.controller.cancel()

    def stop(self) -> None:
        """Take no more jobs, stop the running one and drop those waiting (any thread, a
        signal handler included: nothing here waits)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            running = self._running
            if running is not None:
                running.gone.set()
                self.controller.cancel()
        while True:
            try:
                job = self._waiting.get_nowait()
            except queue.Empty:
                break
            if job is not None:
                job.gone.set()
                job.report(Failed(ApiError("the server is shutting down", 503)))
        self._waiting.put_nowait(None)  # room for it: the queue was just emptied

    def join(self, timeout: float | None = None) -> None:
        """Wait for the thread to end (after ``stop``)."""
        self._thread.join(timeout)

    def _run(self) -> None:
        if hasattr(signal, "pthread_sigmask"):
            signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
        while True:
            try:
                job = self._waiting.get(timeout=IDLE_LOOK)
            except queue.Empty:
                self._housekeep()
                continue
            if job is None:
                return
            if job.gone.is_set():
                job.report(Failed(ApiError("the request was withdrawn before the model took it", 503)))
                continue
            self._housekeep()
            self.controller.begin_job()  # a stop meant for the job before is not this one's
            with self._lock:
                self._running = job
            self.controller.listener = job.hear
            job.report(Started())
            try:
                result = job.work(self.controller, job)
            except BaseException as error:  # handed to the request's handler, which answers with it
                job.report(Failed(error))
            else:
                job.report(Done(result))
            finally:
                self.controller.listener = self._idle_listener
                with self._lock:
                    self._running = None

    def _housekeep(self) -> None:
        try:
            self.housekeeping()
        except Exception as error:  # the server's own tidying never fails a request
            log.warning("housekeeping failed: %s", error)
