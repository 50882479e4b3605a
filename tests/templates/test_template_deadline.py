"""A chat template is bounded in processor time, and can be stopped from another thread.

Steps bound how many template lines run, not what each costs: a template that builds a
string of sixteen million characters and then tests ``'ab' in x`` sixty thousand times ran
for about forty minutes within its step budget. The deadline ends it after one second of the
rendering thread's processor time, and a stop set from another thread ends it at once.
"""

from __future__ import annotations

import threading
import time

import pytest

from sessions.controller.job_control import JobControl
from sessions.templates import sandbox
from sessions.templates.chat_template import ChatMessage, ChatTemplate, TemplateError, TemplateStopped
from sessions.templates.choice import choose_template
from sessions.templates.override import TemplateOverride
from sessions.templates.sandbox import (
    BoundedSandbox,
    RenderLimitError,
    RenderStopped,
    render_bounded,
    rendering_in,
    stop_renders_with,
)

CHATML = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
SCAN = ("{% set x = 'a' * 4000000 %}{% for i in range(60000) %}{% if 'ab' in x %}{% endif %}"
        "{% endfor %}")
"""Each test scans four million characters: about twenty minutes for the whole loop."""
SLOW = SCAN + CHATML
LIMIT = "went past a safety limit: it ran for more than 1 second of processor time"
CONVERSATION = [ChatMessage("user", "Hello"), ChatMessage("assistant", "Hi"), ChatMessage("user", "Bye")]


def _refused_in_time(call, error: type[Exception], match: str) -> Exception:
    started = time.monotonic()
    with pytest.raises(error, match=match) as refused:
        call()
    assert time.monotonic() - started < 10  # one second of processor time, on a busy machine
    return refused.value


def test_a_template_scanning_a_long_string_in_a_loop_is_refused_after_a_second():
    env = BoundedSandbox()
    started = time.thread_time()
    _refused_in_time(lambda: render_bounded(env.compile_template(SCAN), {}), RenderLimitError,
                     "^it ran for more than 1 second of processor time")
    assert time.thread_time() - started < 1.5  # interrupted inside the loop, not at its end


def test_the_model_template_is_refused_in_one_sentence_naming_it_and_the_limit():
    started = time.monotonic()
    chosen = choose_template(SLOW, ["<|im_start|>", "<|im_end|>"])
    assert time.monotonic() - started < 10
    assert chosen.name == "chatml" and chosen.fallback_reason.count(".") == 0
    assert chosen.fallback_reason.startswith(f"the model's chat template {LIMIT}")
    assert chosen.fallback_reason.endswith("(its vocabulary has <|im_start|>, <|im_end|>)")


def test_a_template_file_that_runs_long_is_named_in_the_reason(tmp_path):
    path = tmp_path / "slow.jinja"
    path.write_text(SLOW)
    chosen = choose_template(CHATML, [], override=TemplateOverride("--chat-template-file", file=path))
    assert chosen.name == "model"  # the model's own stands in
    assert chosen.fallback_reason.startswith(f"the chat template in {path} {LIMIT}")


def test_a_render_that_runs_long_only_on_a_real_conversation_names_the_template():
    late = "{% if messages | length > 4 %}" + SCAN + "{% endif %}" + CHATML
    template = ChatTemplate.load(late)
    assert not template.is_fallback
    long_chat = CONVERSATION + [ChatMessage("assistant", "Wait"), ChatMessage("user", "Yes?")]
    _refused_in_time(lambda: template.render(long_chat, add_generation_prompt=True), TemplateError,
                     f"^the model's chat template {LIMIT}")


def test_the_deadline_counts_the_rendering_threads_processor_time_not_the_clock():
    env = BoundedSandbox()
    env.add_filter("nap", lambda value: time.sleep(0.3) or value)  # waits, as for the GIL
    source = "{% for i in range(4) %}{{ i | nap }}{% endfor %}"
    started = time.monotonic()
    assert render_bounded(env.compile_template(source), {}, cpu_seconds=0.5) == "0123"
    assert time.monotonic() - started > 1.0  # past the deadline on the clock, not in processor time


def _render_in_thread(render) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            render()
        except BaseException as error:  # what the render ended with
            errors.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not rendering_in(thread.ident):  # wait until the render runs
        assert thread.is_alive() and time.monotonic() < deadline, errors
        time.sleep(0.001)
    return thread, errors


def test_a_render_stops_at_once_when_another_thread_sets_its_stop():
    env = BoundedSandbox()
    stop = threading.Event()
    thread, errors = _render_in_thread(
        lambda: render_bounded(env.compile_template(SCAN), {}, cpu_seconds=600, stop=stop))
    started = time.monotonic()
    stop.set()
    thread.join(10)
    assert not thread.is_alive() and time.monotonic() - started < 5
    assert len(errors) == 1 and isinstance(errors[0], RenderStopped)
    assert not rendering_in(thread.ident)


def test_a_chat_template_stopped_by_the_stop_of_its_thread_says_so(monkeypatch):
    monkeypatch.setattr(sandbox, "CPU_SECONDS", 600.0)
    template = ChatTemplate.load("{% if messages | length > 4 %}" + SCAN + "{% endif %}" + CHATML)
    stop = threading.Event()
    long_chat = CONVERSATION * 2

    def render() -> None:
        with stop_renders_with(stop):
            template.render(long_chat, add_generation_prompt=True)

    thread, errors = _render_in_thread(render)
    stop.set()
    thread.join(10)
    assert len(errors) == 1 and isinstance(errors[0], TemplateStopped)
    assert str(errors[0]) == "the model's chat template was stopped before it finished"


def test_a_stopped_test_render_refuses_the_template_for_a_built_in_one(monkeypatch):
    monkeypatch.setattr(sandbox, "CPU_SECONDS", 600.0)
    stop = threading.Event()
    chosen: list[ChatTemplate] = []

    def choose() -> None:
        with stop_renders_with(stop):
            chosen.append(choose_template(SLOW, ["<start_of_turn>", "<end_of_turn>"]))

    thread, errors = _render_in_thread(choose)
    stop.set()
    thread.join(10)
    assert not errors and chosen[0].name == "gemma"
    assert chosen[0].fallback_reason.startswith(
        "the model's chat template was stopped before it finished rendering a test conversation; "
        "using the Gemma template instead")


def test_the_job_stop_reaches_a_render_only_while_one_runs(monkeypatch):
    """Esc while a model loads stops its template's test render, and is not kept for later:
    a stop remembered for a render to come would refuse a sound template."""
    monkeypatch.setattr(sandbox, "CPU_SECONDS", 600.0)
    jobs = JobControl(lambda: None)
    assert not jobs.stop_render() and not jobs.stop_requested  # nothing renders: nothing kept
    env = BoundedSandbox()

    def job() -> None:
        with jobs.job():
            render_bounded(env.compile_template(SCAN), {})

    thread, errors = _render_in_thread(job)
    assert jobs.stop_render()
    thread.join(10)
    assert len(errors) == 1 and isinstance(errors[0], RenderStopped)
    assert not jobs.stop_requested  # used up when the job ended


def test_a_job_stopped_before_its_render_began_stops_the_render_at_its_first_step():
    """Ctrl+C on ``ask`` while llama.cpp loads: the template's test render that follows stops."""
    jobs = JobControl(lambda: None)
    jobs.cancel()
    with jobs.job(), pytest.raises(RenderStopped):
        render_bounded(BoundedSandbox().compile_template(SCAN), {})


# -- what one operation may cost -----------------------------------------------------------------

@pytest.mark.parametrize("source", [
    "{{ ('a' * 16000000).split('a') | length }}",
    "{{ ('a b' * 5000000).split() | length }}",
    "{{ ('a' * 16000000) | list | length }}",
    "{{ ('\\n' * 8000000).splitlines() | length }}",
], ids=["split", "split-words", "list", "splitlines"])
def test_splitting_a_long_string_into_millions_of_pieces_is_refused_before_it_runs(source):
    env = BoundedSandbox()
    started = time.monotonic()
    with pytest.raises(RenderLimitError, match="would build about"):
        render_bounded(env.compile_template(source), {})
    assert time.monotonic() - started < 0.5  # the building of the string itself, not the split


def test_ordinary_splits_still_work():
    env = BoundedSandbox()
    source = ("{{ 'a,b,,c'.split(',') }}|{{ 'x y  z'.split() }}|{{ 'a,b,c'.rsplit(',', 1) }}|"
              "{{ 'l1\\nl2'.splitlines() }}|{{ 'ab' | list }}")
    assert render_bounded(env.compile_template(source), {}) == (
        "['a', 'b', '', 'c']|['x', 'y', 'z']|['a,b', 'c']|['l1', 'l2']|['a', 'b']")


def test_a_reply_whose_prompt_renders_long_stops_before_it_starts(tmp_path, monkeypatch):
    """Esc while a reply's prompt renders: the reply stops as it does while llama.cpp reads it."""
    from sessions.api.chat import SessionController
    from sessions.errors import GenerationCancelled
    from sessions.store import SessionStore
    from tests.tui.fake_engine import FakeEngineFactory, FakeScript

    monkeypatch.setattr(sandbox, "CPU_SECONDS", 600.0)
    template = ChatTemplate.load("{% if slow is defined %}" + SCAN + "{% endif %}" + CHATML)
    model = tmp_path / "fake-model.gguf"
    model.write_bytes(b"GGUF")
    with SessionStore.open() as store:
        controller = SessionController(store, engine_factory=FakeEngineFactory(FakeScript(template=template)))
        controller.load_model(model)
        controller.new_session()
        controller.send("Hello")
        template.variables["slow"] = True  # from here on every render runs long
        thread, errors = _render_in_thread(controller.generate_reply)
        controller.cancel()
        thread.join(10)
        controller.close()
    assert not thread.is_alive() and len(errors) == 1 and isinstance(errors[0], GenerationCancelled)
