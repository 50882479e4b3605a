"""The sandbox refuses text-building calls *before* they allocate, and template files are
read within bounds: each hostile case below once built tens or hundreds of millions of
characters (or hung on a pipe) before any limit was checked."""

from __future__ import annotations

import json
import os
import time
import tracemalloc
from pathlib import Path

import pytest

from sessions.templates import chat_template
from sessions.templates.chat_template import ChatMessage, ChatTemplate, TemplateError
from sessions.templates.override import MAX_FILE_BYTES, OverrideUnreadable, TemplateOverride
from sessions.templates.sandbox import BoundedSandbox, RenderLimitError, render_bounded
from tests.conftest import SHARED
from tests.templates.test_chat_template import stock_environment

REAL = sorted(p.stem for p in (SHARED / "templates").glob("*.jinja"))
NESTED_200 = ("{% set ns = namespace(v=[]) %}{% for i in range(200) %}{% set ns.v = [ns.v] %}"
              "{% endfor %}")
CONVERSATION = [ChatMessage("user", "Name a colour."), ChatMessage("assistant", "Teal."),
                ChatMessage("user", "Another one?")]
CHATML_BODY = "{% for m in messages %}{{ m.role + ': ' + m.content }}{% endfor %}"
PEAK_BYTES = 8 * 1024 * 1024
"""Far under what each hostile template would have built (40M characters or more)."""


def _render(source: str, steps: int = 200_000, cpu_seconds: float = 1.0, **variables: object) -> str:
    env = BoundedSandbox()
    env.add_filter("tojson", chat_template._tojson)  # the one chat templates really get
    return render_bounded(env.compile_template(source), variables, steps=steps, cpu_seconds=cpu_seconds)


def _refused_within_bounds(source: str, complaint: str, **variables: object) -> None:
    tracemalloc.start()
    started = time.monotonic()
    try:
        with pytest.raises(RenderLimitError, match=complaint):
            _render(source, **variables)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.monotonic() - started < 5
    assert peak < PEAK_BYTES, f"built {peak:,} bytes before refusing"


@pytest.mark.parametrize("source", [
    "{{ '{:{}}'.format(1, w) }}",
    "{{ '{:{w}}'.format(1, w=w) }}",
    "{{ '{:{w}}'.format_map({'w': w}) }}",
    "{{ '{:{0[n]}}'.format({'n': w}) }}",
    "{{ '{:{}{}}'.format(1, '2000', '00000') }}",  # two fields spliced into one width
    "{{ '{:.{}}'.format('x' * 1000, w) ~ '{:{}.3}'.format(1.5, w) }}",
], ids=["positional", "keyword", "format_map", "indexed", "spliced", "precision"])
def test_a_width_passed_as_an_argument_is_refused_before_formatting(source):
    _refused_within_bounds(source, "calling 'format(_map)?' would build about", w="200000000")


@pytest.mark.parametrize("source", [
    "{{ range(500) | map('string') | join('x' * 100000) }}",
    "{{ range(500) | map('string') | join(d='x' * 100000) }}",
    "{{ range(500) | select | join('x' * 100000, attribute='real') }}",
    "{{ ('x' * 100000).join(range(500) | map('string')) }}",
], ids=["filter", "keyword", "attribute", "method"])
def test_a_long_separator_between_the_items_of_an_iterator_is_refused(source):
    _refused_within_bounds(source, "join' (filter )?would build about")


def test_joining_more_than_a_million_items_from_an_iterator_is_refused():
    # ``reverse`` hands a list over as a C iterator, which costs no steps per item.
    assert _render("{{ (range(5) | list) | reverse | join('-') }}") == "4-3-2-1-0"
    many = "{{ ((range(100000) | list) * 11) | reverse | join }}"
    with pytest.raises(RenderLimitError, match="join of more than 1,048,576 items"):
        _render(many, steps=10**8, cpu_seconds=60)  # the default budgets would stop it sooner


@pytest.mark.parametrize("source", [
    NESTED_200 + "{{ ns.v | tojson(indent=1000) }}",
    NESTED_200 + "{{ ns.v | tojson(indent=' ' * 1000) }}",
    "{{ range(1000) | list | tojson(separators=('x' * 100000, ':')) }}",
], ids=["deep-indent", "string-indent", "separators"])
def test_indentation_repeated_at_every_depth_is_refused_before_dumping(source):
    _refused_within_bounds(source, "the 'tojson' filter would build about")


def test_ordinary_uses_of_the_same_calls_still_work():
    assert _render("{{ '{:>{}}|{:.{}f}'.format('a', 3, 2.5, 2) }}") == "  a|2.50"
    assert _render("{{ '{:{w}}|'.format('b', w=w) }}", w="4") == "b   |"
    assert _render("{{ range(3) | map('string') | join(', ') }}") == "0, 1, 2"
    assert _render("{{ '-'.join(['a', 'b'] | map('upper')) }}") == "A-B"
    deep = _render(NESTED_200 + "{{ ns.v | tojson(indent=2) }}")
    assert json.loads(deep) == json.loads("[" * 201 + "]" * 201)
    assert _render("{{ {'a': [1]} | tojson(indent=4) }}") == json.dumps({"a": [1]}, indent=4)


def test_a_refusal_reaches_the_user_as_a_template_error():
    template = ChatTemplate.load(
        "{% if messages | length > 3 %}{{ '{:{}}'.format(1, messages[0].content) }}{% endif %}"
        + CHATML_BODY)
    assert not template.is_fallback
    with pytest.raises(TemplateError, match="^the model.s chat template went past a safety limit: "):
        template.render([ChatMessage("user", "200000000"), *CONVERSATION],
                        add_generation_prompt=False)


TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city.",
    "parameters": {"type": "object", "required": ["city"], "properties": {
        "city": {"type": "string", "description": "A city name, e.g. Zürich"},
        "days": {"type": "integer", "enum": [1, 3, 7]}}}}}]


@pytest.mark.parametrize("name", REAL)
def test_real_templates_with_tools_render_as_without_the_bounds(name, monkeypatch):
    """Tool definitions take the tojson and join paths the estimates above changed."""
    stock = stock_environment(monkeypatch, chat_template._tojson)
    source = (SHARED / "templates" / f"{name}.jinja").read_text()
    variables = {"messages": [{"role": m.role, "content": m.content} for m in CONVERSATION],
                 "add_generation_prompt": True, "bos_token": "<s>", "eos_token": "</s>",
                 "tools": TOOLS, "documents": None}
    expected = stock.from_string(source).render(**variables)
    env = BoundedSandbox()
    env.globals.update(stock.globals)
    env.add_filter("tojson", chat_template._tojson)
    assert render_bounded(env.compile_template(source), variables) == expected


def _override(path: Path) -> TemplateOverride:
    return TemplateOverride("--chat-template-file", file=path)


def test_a_pipe_as_the_template_file_is_refused_at_once(tmp_path):
    fifo = tmp_path / "template.jinja"
    os.mkfifo(fifo)  # no writer: reading it would block for ever
    started = time.monotonic()
    with pytest.raises(OverrideUnreadable, match="^is not a regular file"):
        _override(fifo).read()
    assert time.monotonic() - started < 2


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/null"])
def test_a_device_as_the_template_file_is_refused(device):
    if not os.path.exists(device):
        pytest.skip(f"{device} is missing here")
    with pytest.raises(OverrideUnreadable, match="^is not a regular file"):
        _override(Path(device)).read()


def test_template_files_read_as_before(tmp_path):
    path = tmp_path / "t.jinja"
    path.write_bytes("{{ 'é' }}\r\nline\rend".encode())
    assert _override(path).read() == "{{ 'é' }}\nline\nend"
    path.write_bytes(b"x" * MAX_FILE_BYTES)
    assert len(_override(path).read()) == MAX_FILE_BYTES
    path.write_bytes(b"x" * (MAX_FILE_BYTES + 1))
    with pytest.raises(OverrideUnreadable, match="bytes long"):
        _override(path).read()
