"""Quick reads of the engine (a switch's cost, the tree's marks) give way to jobs, not to each other."""

from __future__ import annotations

import threading

from sessions.controller.job_control import JobControl

WAIT = 10.0


class WatchedLock:
    """The engine lock, telling when an acquire came back empty-handed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.missed = threading.Event()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        got = self._lock.acquire(blocking, timeout)
        if not got:
            self.missed.set()
        return got

    def release(self) -> None:
        self._lock.release()

    __enter__ = acquire

    def __exit__(self, *exc) -> None:
        self.release()


def reader(jobs: JobControl, answers: list[bool]) -> threading.Thread:
    def read() -> None:
        with jobs.free() as free:
            answers.append(free)

    thread = threading.Thread(target=read)
    thread.start()
    return thread


def test_a_read_asked_while_another_read_holds_the_engine_waits_for_it_and_gets_its_answer():
    jobs = JobControl(lambda: None)
    jobs._lock = lock = WatchedLock()  # type: ignore[assignment]
    answers: list[bool] = []
    with jobs.free() as first:
        assert first
        second = reader(jobs, answers)
        assert lock.missed.wait(WAIT)  # the second read found the engine taken...
        assert answers == []  # ...and waits, where it used to answer "busy" at once
    second.join(WAIT)
    assert answers == [True]


def test_a_read_asked_while_a_job_holds_the_engine_is_told_at_once():
    jobs = JobControl(lambda: None)
    answers: list[bool] = []
    with jobs.job():
        reader(jobs, answers).join(WAIT)
        assert answers == [False]
        with jobs.free_until() as release:
            assert release is None


def test_a_read_waiting_behind_another_gives_way_to_a_job_that_comes_meanwhile():
    jobs = JobControl(lambda: None)
    jobs._lock = lock = WatchedLock()  # type: ignore[assignment]
    answers: list[bool] = []
    job_started, job_may_end = threading.Event(), threading.Event()

    def job() -> None:
        with jobs.job():
            job_started.set()
            job_may_end.wait(WAIT)

    with jobs.free():
        second = reader(jobs, answers)
        assert lock.missed.wait(WAIT)
        worker = threading.Thread(target=job)
        worker.start()
        second.join(WAIT)  # the job is waiting for the engine: the read gives up
        assert answers == [False]
    assert job_started.wait(WAIT)
    job_may_end.set()
    worker.join(WAIT)
