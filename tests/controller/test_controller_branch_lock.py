"""A worker tokenizing a branch does not hold the tree lock: the UI's reads and gestures go on.

A chat opened with a model it has no frozen tokens for (an imported chat, another model)
is rendered and tokenized message by message before the engine can take it; for a large
chat that takes long. These tests hold the fake engine's tokenizer on an event and check
that ``snapshot`` and tree gestures answer meanwhile, and that the branch computed is the
one read when the job began, as it was when the lock was held throughout.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from itertools import accumulate

import pytest

from sessions.api.chat import SessionController
from sessions.controller.branch_tokens import freeze_all
from sessions.sampling import SamplingSettings
from tests.tui.fake_engine import FakeEngineFactory

WAIT = 30  # seconds: only reached when something is stuck


@pytest.fixture
def controller(tmp_path, store):
    """A chat of a few turns written with one model, then another model loaded."""
    ctl = SessionController(store, engine_factory=FakeEngineFactory(), sampling=SamplingSettings(temperature=0.0))
    ctl.load_model(tmp_path / "first.gguf")
    ctl.new_session(system_prompt="Be brief.")
    for question in ("one", "two", "three"):
        ctl.send(question)
        ctl.generate_reply()
    ctl.load_model(tmp_path / "second.gguf")  # none of the messages has tokens for it yet
    return ctl


class HeldTokenizer:
    """Makes the engine's ``tokenize`` wait until ``release`` is set."""

    def __init__(self, engine) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self._tokenize = engine.tokenize
        engine.tokenize = self

    def __call__(self, text: str, add_bos: bool) -> list[int]:
        self.entered.set()
        assert self.release.wait(WAIT), "the tokenizer was never released"
        return self._tokenize(text, add_bos)


def in_thread(work: Callable[[], object]) -> tuple[threading.Thread, list[object]]:
    """Run ``work`` in a thread; the list gets its result or the exception it raised."""
    out: list[object] = []

    def run() -> None:
        try:
            out.append(work())
        except BaseException as error:  # noqa: BLE001 - handed to the test to check
            out.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def answers_meanwhile(work: Callable[[], object]) -> object:
    """``work`` on another thread must finish while the tokenizer is held."""
    thread, out = in_thread(work)
    thread.join(WAIT)
    assert not thread.is_alive(), "it waited for the tokenizer: the tree lock was held"
    assert out and not isinstance(out[0], BaseException), out
    return out[0]


def expected(engine, path) -> tuple[list[int], list[int]]:
    """The branch's tokens and message ends, computed afresh (what the locked code gave)."""
    per_message = freeze_all(engine, path)
    return [t for tokens in per_message for t in tokens], list(accumulate(len(t) for t in per_message))


def held_job(controller, work: Callable[[], object], path) -> object:
    """``work``'s result, run on a worker while the tokenizer is held; meanwhile a snapshot
    must answer, showing the branch ``path`` read when the job began."""
    held = HeldTokenizer(controller.engine)
    worker, out = in_thread(work)
    assert held.entered.wait(WAIT)
    shown = answers_meanwhile(controller.snapshot)
    assert [m.id for m in shown.path] == [m.id for m in path]
    held.release.set()
    worker.join(WAIT)
    assert not worker.is_alive() and out and not isinstance(out[0], BaseException), out
    return out[0]


@pytest.mark.parametrize("job", ["plan_for", "plan_choice", "warm", "generate_reply"])
def test_a_snapshot_answers_while_a_worker_tokenizes_a_branch(controller, store, job):
    if job == "generate_reply":
        controller.send("four")
    engine = controller.engine
    path = list(controller.snapshot().path)
    tokens, ends = expected(engine, path)
    jobs = {"plan_for": controller.routes.plan_for, "plan_choice": lambda: controller.routes.plan_choice(path[-1].id),
            "warm": controller.warm, "generate_reply": controller.generate_reply}
    work = jobs[job]
    result = held_job(controller, work, path)
    if job in ("plan_for", "plan_choice"):
        assert result.target_len == len(tokens)
    elif job == "warm":
        assert engine.live == tokens
    else:
        assert result.parent_id == path[-1].id and controller.snapshot().head.id == result.id
        assert engine.live[:len(tokens)] == tokens
    fingerprint = engine.info.fingerprint
    frozen = [store.get_tokens(m.id, fingerprint) for m in path]
    assert frozen == freeze_all(engine, path) and list(accumulate(map(len, frozen))) == ends


def warm_while(controller, gestures) -> None:
    """Warm the head's branch while ``gestures(path)`` runs with the tokenizer held; the
    warm must succeed and make exactly the branch it read live."""
    engine = controller.engine
    path = list(controller.snapshot().path)
    tokens, _ = expected(engine, path)
    held = HeldTokenizer(engine)
    worker, out = in_thread(controller.warm)
    assert held.entered.wait(WAIT)
    gestures(path)
    held.release.set()
    worker.join(WAIT)
    assert not worker.is_alive() and out and not isinstance(out[0], BaseException), out
    assert engine.live == tokens  # the branch the job read, whole


def test_a_gesture_meanwhile_leaves_the_branch_read_to_the_worker(controller):
    def gestures(path) -> None:
        answers_meanwhile(lambda: controller.rewind(path[2].id))  # the head moves back meanwhile
        answers_meanwhile(lambda: controller.send("elsewhere"))  # and a new branch starts there

    warm_while(controller, gestures)
    assert controller.snapshot().head.text == "elsewhere"


def test_a_message_deleted_meanwhile_does_not_fail_the_branch(controller, store):
    def gestures(path) -> None:
        assert answers_meanwhile(lambda: controller.delete_subtree(path[-2].id)) == 2

    path = list(controller.snapshot().path)
    warm_while(controller, gestures)
    engine = controller.engine
    fingerprint = engine.info.fingerprint
    assert store.get_tokens(path[1].id, fingerprint) == freeze_all(engine, path)[1]


def test_a_trim_tokenizes_the_turns_it_keeps_without_the_tree_lock(controller):
    controller.send("four")
    path = list(controller.snapshot().path)
    head = held_job(controller, controller.trim_to_fit, path)
    kept = controller.snapshot().tree.path_to(head.id)
    assert head.id != path[-1].id and kept[0].id != path[0].id  # a new root beside the old branch
    assert [m.text for m in kept] == [path[0].text, *(m.text for m in path[3:])]  # the oldest turn left out


def test_a_trim_whose_question_is_deleted_meanwhile_adds_nothing(controller):
    from sessions.errors import ControllerError

    controller.send("four")
    path = list(controller.snapshot().path)
    before = len(controller.snapshot().tree)
    held = HeldTokenizer(controller.engine)
    worker, out = in_thread(controller.trim_to_fit)
    assert held.entered.wait(WAIT)
    assert answers_meanwhile(lambda: controller.delete_subtree(path[-1].id)) == 1
    held.release.set()
    worker.join(WAIT)
    assert not worker.is_alive() and out and isinstance(out[0], ControllerError), out
    assert "deleted meanwhile" in str(out[0])
    assert len(controller.snapshot().tree) == before - 1


# -- the engine lock is the one rule that keeps jobs apart --------------------------------


def test_the_saved_marks_are_not_asked_of_an_engine_a_job_holds(controller):
    """The question goes to the engine (in another process it would wait for the whole
    job): while a job holds the engine the controller answers None at once, whoever asks."""
    held = HeldTokenizer(controller.engine)
    worker, out = in_thread(controller.warm)
    assert held.entered.wait(WAIT)
    assert controller.routes.saved_message_ids() is None
    held.release.set()
    worker.join(WAIT)
    assert not worker.is_alive() and out and not isinstance(out[0], BaseException), out
    head = controller.snapshot().head
    assert head is not None and head.id in controller.routes.saved_message_ids()  # warmed: its state is saved


def test_a_plan_asked_while_a_job_holds_the_engine_waits_for_it(controller):
    """A plan reads the live state a job changes: asked meanwhile, it is made once the job
    has ended, whichever thread asks (the app's workers are no guard)."""
    engine = controller.engine
    path = list(controller.snapshot().path)
    tokens, _ = expected(engine, path)
    held = HeldTokenizer(engine)
    worker, out = in_thread(controller.warm)
    assert held.entered.wait(WAIT)
    planner, planned = in_thread(controller.routes.plan_for)
    held.release.set()
    for thread in (worker, planner):
        thread.join(WAIT)
        assert not thread.is_alive()
    assert out and not isinstance(out[0], BaseException), out
    assert planned and not isinstance(planned[0], BaseException), planned
    assert planned[0].keep == len(tokens)  # planned on the branch the warm-up made live
