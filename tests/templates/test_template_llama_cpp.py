"""llamachat renders what llama.cpp's Jinja path renders, case by case from llama.cpp's tests.

Two sets, read from the llama-cpp-python sdist the project pins (``tests.llama_cpp_cases``):

- every case of llama.cpp's ``tests/test-chat-template.cpp``: a real template, the
  six-message conversation it renders, and the text llama.cpp states for its Jinja path;
- every template of llama.cpp's ``models/templates/``, rendered with that conversation and
  compared with a transformers-style reference: plain Jinja2 in its
  ``ImmutableSandboxedEnvironment`` with ``trim_blocks``/``lstrip_blocks``,
  ``raise_exception``, ``strftime_now``, ``tojson`` and the ``generation`` tag as
  transformers sets them up, given what llama.cpp gives a template (``tools`` left
  undefined, today's ``date_string`` and ``datetime``, the system prompt folded into the
  first user turn when the template has no system role). That checks that the sandbox's
  bounds change nothing a real template renders.

Each case is its own test. Without the sdist (``pack_cache``), the ``llama_cpp_folder``
fixture downloads it as ``tests/bench/gpu_pack.sh`` does, and one test runs every case;
where that cannot be done, it skips saying why.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import jinja2
import pytest
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

from sessions.templates import chat_template
from sessions.templates.chat_template import SYSTEM_FOLD, ChatMessage, ChatTemplate, TemplateError
from tests import llama_cpp_cases
from tests.llama_cpp_cases import Case

FOLDER = llama_cpp_cases.extracted(llama_cpp_cases.sdist_path())
"""The sdist's test file and templates, when the sdist is in the cache at collection."""
BOS, EOS = "<s>", "</s>"
"""The special tokens ``test-chat-template.cpp`` gives a template that names none."""

NOT_RENDERED_BY_LLAMA_CPP = {
    "ai-sage/GigaChat-20B-A3B-instruct":
        "llama.cpp marks it supported_with_jinja = false (it needs additional_special_tokens as extra "
        "context), so its Jinja path states no text to match",
}
"""Cases llama.cpp's own test leaves out of its Jinja path, with its reason."""
REFUSED_BY_BOTH = {
    "fireworks-ai-llama-3-firefunction-v2.jinja":
        "it reads a `functions` variable that neither transformers nor a chat without tools gives it; "
        "plain Jinja fails on it as llamachat's sandbox does, and llamachat then uses a built-in template",
}
"""Templates the reference cannot render either: llamachat must refuse them too."""


@pytest.fixture(scope="session")
def llama_cpp_folder() -> Path:
    """The extracted cases, downloading the sdist into the pack cache if it is missing."""
    sdist = llama_cpp_cases.sdist_path()
    folder = llama_cpp_cases.extracted(sdist)
    if folder is not None:
        return folder
    pin = f"llama-cpp-python=={llama_cpp_cases.llama_cpp_version()}"
    sdist.parent.mkdir(parents=True, exist_ok=True)
    try:
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
                        pin, "-d", str(sdist.parent)], check=True, capture_output=True, text=True, timeout=900)
    except subprocess.CalledProcessError as error:
        lines = (error.stderr or "").strip().splitlines()
        said = next((line for line in lines if line.startswith("ERROR")), lines[-1] if lines else "no message")
        pytest.skip(f"the {pin} sdist is not in {sdist.parent} and pip could not download it: {said}")
    except (OSError, subprocess.TimeoutExpired) as error:
        pytest.skip(f"the {pin} sdist is not in {sdist.parent} and could not be downloaded ({error})")
    folder = llama_cpp_cases.extracted(sdist)
    if folder is None:
        pytest.skip(f"pip downloaded no {sdist.name} into {sdist.parent}")
    return folder


def _source(folder: Path) -> str:
    return (folder / "test-chat-template.cpp").read_text(encoding="utf-8")


def _messages(pairs) -> list[ChatMessage]:
    return [ChatMessage(role, content) for role, content in pairs]


# -- what llama.cpp does, without the sdist ------------------------------------------------------

def test_the_generation_tag_renders_its_body():
    source = ("{% for m in messages %}{{ m.role }}: {% if m.role == 'assistant' %}{%- generation -%}"
              "{{ m.content }}{%- endgeneration -%}{% else %}{{ m.content }}{% endif %}{{ '\\n' }}{% endfor %}")
    template = ChatTemplate.compile(source)
    assert template.render(_messages([("user", "Hi"), ("assistant", "Hello")]),
                           add_generation_prompt=False) == "user: Hi\nassistant: Hello\n"


def test_templates_get_todays_date_as_llama_cpp_gives_it(monkeypatch):
    monkeypatch.setattr(chat_template, "current_time", lambda: datetime(2026, 3, 4, 9, 0))
    source = ("{% if not date_string is defined %}{% set date_string = '26 Jul 2024' %}{% endif %}"
              "Today Date: {{ date_string }} ({{ datetime }}){% for m in messages %}{{ m.content }}{% endfor %}")
    text = ChatTemplate.compile(source).render(_messages([("user", "Hi")]), add_generation_prompt=True)
    assert text == "Today Date: 04 Mar 2026 (Mar 04 2026)Hi"
    kept = ChatTemplate.compile(source, variables={"date_string": "1 Jan 2000"})
    assert kept.render(_messages([("user", "Hi")]), add_generation_prompt=True).startswith("Today Date: 1 Jan 2000")


def test_no_tools_means_tools_left_undefined():
    source = ("{% if tools is defined %}TOOLS {{ tools }}{% endif %}{% if documents is defined %}DOCS{% endif %}"
              "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}")
    text = ChatTemplate.compile(source).render(_messages([("user", "Hi")]), add_generation_prompt=True)
    assert text == "user: Hi\n"


def test_a_template_without_a_system_role_gets_the_system_prompt_on_the_first_user_line():
    source = ("{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('no system role') }}{% endif %}"
              "[{{ m.role }}] {{ m.content }}\n{% endfor %}")
    template = ChatTemplate.compile(source)
    assert template.merges_system
    text = template.render(_messages([("system", "Be brief."), ("user", "Hi")]), add_generation_prompt=True)
    assert text == "[user] Be brief.\nHi\n"


# -- test-chat-template.cpp ----------------------------------------------------------------------

def check_case(case: Case, conversation: list[tuple[str, str]]) -> None:
    """llamachat's rendering of ``case`` is the text llama.cpp's Jinja path states."""
    if case.name in NOT_RENDERED_BY_LLAMA_CPP or not case.supported_with_jinja:
        return
    template = ChatTemplate.compile(case.template_str, bos_token=case.bos_token, eos_token=case.eos_token)
    text = template.render(_messages([*conversation, *case.extra_conversation]), add_generation_prompt=True)
    assert text == case.expected, f"{case.name}: llamachat renders {text!r}, llama.cpp {case.expected!r}"


def _case_params() -> list:
    if FOLDER is None:
        return [pytest.param(None, id="sdist-not-cached")]
    return [pytest.param(case, id=case.name) for case in llama_cpp_cases.cases(_source(FOLDER))]


@pytest.mark.parametrize("case", _case_params())
def test_a_llama_cpp_case_renders_as_llama_cpp_states(case: Case | None, llama_cpp_folder: Path):
    source = _source(llama_cpp_folder)
    conversation = llama_cpp_cases.conversation(source)
    if case is None:  # downloaded just now: every case in this one test
        for each in llama_cpp_cases.cases(source):
            check_case(each, conversation)
        return
    if case.name in NOT_RENDERED_BY_LLAMA_CPP:
        assert not case.supported_with_jinja  # llama.cpp still says so
        pytest.skip(NOT_RENDERED_BY_LLAMA_CPP[case.name])
    check_case(case, conversation)


def test_the_cases_are_read_as_a_compiler_reads_them(llama_cpp_folder: Path):
    source = _source(llama_cpp_folder)
    found = llama_cpp_cases.cases(source)
    assert len(found) >= 30 and len({case.name for case in found}) == len(found)
    assert all(case.template_str and case.expected for case in found)
    assert llama_cpp_cases.conversation(source)[0] == ("system", "You are a helpful assistant")
    assert source.count("/* .name= */") == len(found)


def test_the_cases_cover_what_llamachat_once_rendered_otherwise(llama_cpp_folder: Path):
    """The folded system prompt, the generation tag and templates asking whether tools are
    defined are all among the cases above (or the sdist's templates below)."""
    found = {case.name: case for case in llama_cpp_cases.cases(_source(llama_cpp_folder))}
    assert f"You are a helpful assistant{SYSTEM_FOLD}Hello" in found["google/gemma-7b-it"].expected
    templates = {path.name: path.read_text(encoding="utf-8") for path in (llama_cpp_folder / "templates").iterdir()}
    assert any(re.search(r"{%-?\s*generation\s*-?%}", text) for text in templates.values())
    assert any("tools is defined" in text for text in templates.values())


# -- models/templates against a transformers-style reference -----------------------------------

class _GenerationTag(Extension):
    """transformers' ``AssistantTracker``, without the mask it records for training."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_generation"), [], [], body).set_lineno(lineno)

    def _generation(self, caller):
        return caller()


def _raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def _tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def reference_environment() -> ImmutableSandboxedEnvironment:
    """What transformers' ``_compile_jinja_template`` sets up."""
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[_GenerationTag, loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = lambda fmt: chat_template.current_time().strftime(fmt)
    return env


def reference_render(source: str, conversation: list[tuple[str, str]]) -> str:
    """Plain Jinja given what llama.cpp gives a template: no ``tools``; and the system
    prompt folded into the next message when the template leaves a system message out
    (llama.cpp's ``supports_system_role`` check renders a system and a user message)."""
    template = reference_environment().from_string(source)
    now = chat_template.current_time()
    variables = {"bos_token": BOS, "eos_token": EOS, "add_generation_prompt": True, "enable_thinking": True,
                 "datetime": now.strftime("%b %d %Y"), "date_string": now.strftime("%d %b %Y")}
    try:
        probe = template.render(messages=[{"role": "system", "content": "System message"},
                                          {"role": "user", "content": "User message"}], **variables)
        system_role = "System message" in probe
    except jinja2.exceptions.TemplateError:
        system_role = False
    messages = [{"role": role, "content": content} for role, content in conversation]
    if not system_role and len(messages) > 1 and messages[0]["role"] == "system":
        first = messages[1] | {"content": messages[0]["content"] + SYSTEM_FOLD + messages[1]["content"]}
        messages = [first, *messages[2:]]
    return template.render(messages=messages, **variables)


def check_template(path: Path, conversation: list[tuple[str, str]]) -> None:
    source = path.read_text(encoding="utf-8")
    if path.name in REFUSED_BY_BOTH:
        with pytest.raises(jinja2.exceptions.TemplateError):
            reference_render(source, conversation)
        with pytest.raises(TemplateError):
            ChatTemplate.compile(source, bos_token=BOS, eos_token=EOS)
        return
    expected = reference_render(source, conversation)
    template = ChatTemplate.compile(source, bos_token=BOS, eos_token=EOS)
    text = template.render(_messages(conversation), add_generation_prompt=True)
    assert text == expected, f"{path.name}: llamachat renders {text!r}, the reference {expected!r}"


def _template_params() -> list:
    if FOLDER is None:
        return [pytest.param(None, id="sdist-not-cached")]
    return [pytest.param(path.name, id=path.name) for path in sorted((FOLDER / "templates").glob("*.jinja"))]


@pytest.fixture
def fixed_clock(monkeypatch):
    """Dated templates read one instant in both renderers."""
    monkeypatch.setattr(chat_template, "current_time", lambda: datetime(2026, 3, 14, 9, 26, 53))


@pytest.mark.parametrize("name", _template_params())
def test_a_llama_cpp_template_renders_as_plain_jinja_does(name: str | None, llama_cpp_folder: Path, fixed_clock):
    conversation = llama_cpp_cases.conversation(_source(llama_cpp_folder))
    if name is None:  # downloaded just now: every template in this one test
        for path in sorted((llama_cpp_folder / "templates").glob("*.jinja")):
            check_template(path, conversation)
        return
    check_template(llama_cpp_folder / "templates" / name, conversation)
