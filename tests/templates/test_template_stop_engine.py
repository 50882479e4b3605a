"""A chat template that runs long never hangs a model load, and a stop ends it: real models.

A model file is untrusted input, and its template is rendered when the model loads (the
test render that decides whether it can be trusted). One that computes for minutes once
held the app at "loading the model: 100%"; ``llamachat ask`` ignored the first Ctrl+C.
Now the render's deadline refuses it after a second and a built-in template stands in, and
a stop (Esc in the app, Ctrl+C on ``ask``) ends it at once.
"""

from __future__ import annotations

import signal
import threading
import time

import pytest

from sessions.api.chat import EngineSettings, SessionController
from sessions.engine.factory import llama_engine_factory
from sessions.events import NoticeRaised
from sessions.sampling import SamplingSettings
from sessions.store import SessionStore
from sessions.synth import make_model
from sessions.templates import sandbox
from tests.ask_process import AskProcess
from tests.slow_render_cli import RENDERING
from tests.templates.test_template_deadline import LIMIT, SLOW

pytestmark = pytest.mark.engine


@pytest.fixture
def controller():
    """A controller over llama.cpp and the notices it raised."""
    notices: list[str] = []
    store = SessionStore.open()
    made = SessionController(store, engine_factory=llama_engine_factory(None),
                             settings=EngineSettings(n_ctx=256, n_batch=64, threads=1),
                             sampling=SamplingSettings(temperature=0.0, max_tokens=4),
                             listener=lambda e: notices.append(e.text) if isinstance(e, NoticeRaised) else None)
    made.notices = notices  # type: ignore[attr-defined]
    yield made
    made.close()
    store.close()


@pytest.fixture(scope="module")
def slow_model():
    return make_model("llama", "tiny", markers="chatml", chat_template=SLOW)


def test_a_model_whose_template_runs_long_loads_with_a_built_in_one(controller, slow_model):
    started = time.monotonic()
    controller.load_model(slow_model)
    assert time.monotonic() - started < 60  # the load itself, and one second of the template
    assert controller.engine.info.chat_template == SLOW
    assert controller.engine.template.name == "chatml"
    assert controller.notices == [  # type: ignore[attr-defined]
        f"the model's chat template {LIMIT} (a chat template takes milliseconds); using the ChatML template "
        "instead (its vocabulary has <|im_start|>, <|im_end|>)"]
    controller.new_session()
    controller.send("Hello there")
    assert controller.generate_reply().stats.tokens_generated > 0


def test_the_stop_ends_the_test_render_of_a_model_loading(controller, slow_model, monkeypatch):
    """What Esc does while the app loads a model (``stop_template_render``)."""
    monkeypatch.setattr(sandbox, "CPU_SECONDS", 600.0)  # only the stop can end it now
    errors: list[BaseException] = []

    def load() -> None:
        try:
            controller.load_model(slow_model)
        except BaseException as error:
            errors.append(error)

    loading = threading.Thread(target=load, daemon=True)
    loading.start()
    deadline = time.monotonic() + 60
    while not controller.stop_template_render():  # false until the load reaches the template
        assert loading.is_alive() and time.monotonic() < deadline, errors
        time.sleep(0.005)
    loading.join(30)
    assert not loading.is_alive() and not errors
    assert controller.engine.template.name == "chatml"
    assert controller.notices[0].startswith(  # type: ignore[attr-defined]
        "the model's chat template was stopped before it finished rendering a test conversation; "
        "using the ChatML template instead")
    assert not controller.stop_template_render()  # nothing renders now: nothing is kept


def test_ctrl_c_on_ask_stops_a_template_file_that_runs_long(tmp_path):
    template = tmp_path / "slow.jinja"
    template.write_text(SLOW)
    process = AskProcess("-m", str(make_model("llama", "tiny")), "--chat-template-file", str(template),
                         "--max-tokens", "4", "Hello", runner="tests.slow_render_cli")
    try:
        process.read_until(lambda p: RENDERING in p.stderr, "the template's test render", stream="err")
        started = time.monotonic()
        process.proc.send_signal(signal.SIGINT)
        status = process.drain()
    finally:
        process.kill()
    assert time.monotonic() - started < 60  # the render's deadline is ten minutes
    assert status == 130, process.stderr
    assert "llamachat: stopped by SIGINT before anything was sent: nothing was saved" in process.stderr_lines()
