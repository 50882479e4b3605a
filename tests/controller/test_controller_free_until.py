"""``JobControl.free_until``: the engine held for part of a piece of work, let go early once."""

from __future__ import annotations

from sessions.controller.job_control import JobControl


def test_free_until_lets_the_engine_go_once_and_never_twice():
    jobs = JobControl(lambda: None)
    with jobs.free_until() as release:
        assert release is not None
        with jobs.free() as free:
            assert not free  # held until released
        release()
        release()  # a second release does nothing (the lock is not released twice)
        with jobs.free() as free:
            assert free
        with jobs.free_until() as nested:
            assert nested is not None
    with jobs.free() as free:
        assert free


def test_free_until_yields_none_while_a_job_holds_the_engine():
    jobs = JobControl(lambda: None)
    with jobs.job(), jobs.free_until() as release:
        assert release is None
    with jobs.free() as free:
        assert free  # the job's end let it go; free_until took nothing
