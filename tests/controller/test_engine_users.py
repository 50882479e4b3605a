"""A model switch closes the old engine only once no quick reader (an attachment's token
count, the context meter) still holds it: real threads, waiting on events."""

from __future__ import annotations

import threading

from sessions.controller.engine_users import EngineUsers


def test_a_switch_waits_for_a_reader_before_the_engine_can_be_closed():
    users = EngineUsers()
    users.engine = engine = object()  # type: ignore[assignment]
    reading, done_reading = threading.Event(), threading.Event()
    taken: list[object] = []

    def reader() -> None:
        with users.borrowed() as held:
            assert held is engine
            reading.set()
            done_reading.wait(10)

    def switch() -> None:
        taken.append(users.take())

    waiting = threading.Event()

    class Gate(threading.Condition):
        def wait_for(self, predicate, timeout=None):
            waiting.set()  # the switch has taken the engine and now waits for its readers
            return super().wait_for(predicate, timeout)

    users._gate = Gate()
    r = threading.Thread(target=reader)
    r.start()
    assert reading.wait(10)
    s = threading.Thread(target=switch)
    s.start()
    assert waiting.wait(10)
    assert taken == [] and s.is_alive()
    assert users.engine is None  # but no new reader gets it meanwhile
    with users.borrowed() as late:
        assert late is None
    done_reading.set()
    s.join(10)
    r.join(10)
    assert taken == [engine]


def test_with_no_reader_the_engine_is_handed_over_at_once():
    users = EngineUsers()
    assert users.take() is None
    users.engine = engine = object()  # type: ignore[assignment]
    assert users.take() is engine and users.engine is None
