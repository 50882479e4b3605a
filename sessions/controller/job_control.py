"""Who may drive llama.cpp, and how a job is stopped: the engine lock and the stop flag.

One llama.cpp context must never be used by two threads at once, and this lock is the
one rule that says so: every blocking engine method of the controller (load, warm,
reply, trim, close) runs inside ``job``, and every quick call to the engine (a plan, the
saved marks) inside ``held`` or ``free``; so does the plan of a warm ahead (``free_until``:
its reads into RAM touch only the checkpoint store, and the app stops them before it
starts a job). Nothing
else keeps jobs apart: the app's workers only queue gestures so that jobs do not pile up
behind this lock, and the engine in a child process (``sessions.engine.process``) takes
calls one at a time because they come one at a time from here. Stopping uses two
signals: a flag the controller checks between steps, and llama.cpp's abort flag, which
interrupts a decode in the middle of a batch.

The stop flag also stops a chat template rendering inside the job (``sandbox.stop_renders_with``):
a template is untrusted code, and one that runs long (the test render when a model loads, a
reply's prompt) ends at the stop as a decode does; so does the computing of a whole
imported chat's tokens (``sessions.controller.branch_tokens``), in a job and in the quick calls a job
makes (``held``). The quick reads beside jobs (``free``, ``free_until``) stop only when the
controller closes (``closing``): a stop pressed while nothing ran is for the next job.

The order of events the protocol has to survive: the UI schedules a job, the user
presses stop, and only then does the worker thread start. That stop must not be lost,
so the flags are cleared when a job *ends*, not when it starts. A stop pressed while
nothing ran must not hit the next job either, so whoever schedules a job calls
``begin`` first (on the scheduling thread, while the engine is idle).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from sessions.engine.protocol import ChatEngine
from sessions.templates.sandbox import rendering_in, stop_renders_with

READ_POLL_SECONDS = 0.01
"""How often a quick read waiting behind another one checks whether a job has come."""


class JobControl:
    """The engine lock and the stop flags of one controller."""

    def __init__(self, engine: Callable[[], ChatEngine | None]) -> None:
        self._engine = engine
        """The engine loaded now (it changes when another model is loaded)."""
        self._lock = threading.Lock()
        self._jobs = 0
        """Jobs waiting for the engine or holding it (a quick read gives way to them)."""
        self._jobs_lock = threading.Lock()
        self._reader: int | None = None
        """The ident of the thread holding the engine for a quick read now."""
        self._stop = threading.Event()
        self._closing = threading.Event()
        """Set once the controller closes: quick reads stop too."""
        self._thread: int | None = None
        """The ident of the thread running the job now."""

    @property
    def stop_requested(self) -> bool:
        return self._stop.is_set()

    def begin(self) -> None:
        """Forget a stop that came while no job ran (call before scheduling a job)."""
        self._clear()

    def cancel(self) -> None:
        """Stop the running job, or else the next one to start, as soon as possible (any thread)."""
        self._stop.set()
        engine = self._engine()
        if engine is not None:
            engine.request_abort()

    def closing(self) -> None:
        """The controller closes: stop the job and every quick read as soon as possible."""
        self._closing.set()
        self.cancel()

    def stop_render(self) -> bool:
        """Stop the job only if it is rendering a chat template now; whether it was.

        While a model loads, llama.cpp cannot be stopped, but the template's test render
        can: Esc stops that one, and is not remembered for a render to come (a stop kept
        for later would refuse a sound template that happens to render after the key).
        """
        if not rendering_in(self._thread):
            return False
        self.cancel()
        return True

    def resume_decoding(self) -> None:
        """Let llama.cpp decode again once a prompt is in: from here on, stops are
        checked between tokens (``stop_requested``), and the reply so far is kept."""
        engine = self._engine()
        if engine is not None:
            engine.clear_abort()

    @contextmanager
    def job(self) -> Iterator[None]:
        """Hold the engine for one blocking job; the stop is used up when it ends."""
        with self._jobs_lock:
            self._jobs += 1
        try:
            with self._lock:
                self._thread = threading.get_ident()
                try:
                    with stop_renders_with(self._stop):
                        yield
                finally:
                    self._thread = None
                    self._clear()
        finally:
            with self._jobs_lock:
                self._jobs -= 1

    def _take_for_read(self) -> bool:
        """Take the engine for a quick read unless a job holds it or waits for it.

        Another quick read that holds it is waited for: it ends in moments, and two reads
        asked at once (the tree's marks and a switch's cost, when a job ends) must both
        get their answer, where the one that lost would say "once the model is idle" to a
        model that is idle, and nothing would ask again.
        """
        if self._reader == threading.get_ident():
            return False  # this thread holds it already, for another read
        while not self._lock.acquire(timeout=READ_POLL_SECONDS):
            if self._jobs:
                return False
        self._reader = threading.get_ident()
        return True

    def _end_read(self) -> None:
        self._reader = None
        self._lock.release()

    def _clear(self) -> None:
        self._stop.clear()
        engine = self._engine()
        if engine is not None:
            engine.clear_abort()

    @contextmanager
    def held(self) -> Iterator[None]:
        """Hold the engine for a quick call that is no job: wait for a running job to end,
        and leave the stop flags alone (a stop pressed meanwhile is for the next job)."""
        self._lock.acquire()
        self._reader = threading.get_ident()
        try:
            with stop_renders_with(self._stop):
                yield
        finally:
            self._end_read()

    @contextmanager
    def free_until(self) -> Iterator[Callable[[], None] | None]:
        """Like ``free``, yielding a release (None when a job holds the engine) that the
        holder calls once the part of its work that needs the engine is done; the rest
        runs beside whatever takes the engine next. Released at the end in any case."""
        if self._jobs or not self._take_for_read():
            yield None
            return
        held = [True]

        def release() -> None:
            if held[0]:
                held[0] = False
                self._end_read()

        try:
            with stop_renders_with(self._closing):
                yield release
        finally:
            release()

    @contextmanager
    def free(self) -> Iterator[bool]:
        """Hold the engine for a quick read if no job holds it (yields whether it does).

        A plan reads the live state of the context, which a running job changes; rather
        than wait for the job, the read is skipped and the caller says it cannot tell yet.
        """
        got = not self._jobs and self._take_for_read()
        try:
            with stop_renders_with(self._closing):
                yield got
        finally:
            if got:
                self._end_read()
