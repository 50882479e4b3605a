"""The engine in a child process talks with the template the in-process engine chooses.

With RPC servers the app runs the engine in a child (``EngineProcess``); the user's
template (``--chat-template-file``, a ``[models."NAME"]`` table) and the vocabulary-based
fallback must hold there as in-process. The child starts without any RPC server when the
settings name none, so these tests need no server.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from sessions.engine.factory import llama_engine_factory
from sessions.engine.process import EngineProcess
from sessions.engine.settings import EngineSettings
from sessions.synth import make_model
from sessions.templates.chat_template import ChatMessage, ChatTemplate
from sessions.templates.override import ModelTemplateRule, TemplateOverride
from tests.threads import TEST_THREADS

SETTINGS = EngineSettings(n_ctx=256, n_batch=64, n_gpu_layers=0, threads=TEST_THREADS)
MINE = ("{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}"
        "{% if add_generation_prompt %}[assistant] {% endif %}")
TALK = [ChatMessage("system", "Be brief."), ChatMessage("user", "Hello."),
        ChatMessage("assistant", "Hi."), ChatMessage("user", "Bye?")]


def described(template: ChatTemplate) -> tuple:
    """What the app sees of a template: where it came from, why, and what it renders."""
    return (template.name, template.origin, template.fallback_reason, template.merges_system,
            template.bos_token, template.eos_token, dict(template.variables), template.source,
            template.render(TALK, add_generation_prompt=True))


def in_process(path: Path, settings: EngineSettings) -> ChatTemplate:
    engine = llama_engine_factory(None)(path, settings, lambda fraction: None)
    try:
        return engine.template
    finally:
        engine.close()


def in_child(path: Path, settings: EngineSettings) -> ChatTemplate:
    engine = EngineProcess(path, settings, checkpoint_dir=None)
    try:
        return engine.template
    finally:
        engine.close()


def _cases(tmp_path: Path) -> dict[str, tuple[Path, EngineSettings, str]]:
    """The model file, the settings, and the name of the template they lead to."""
    chatml = make_model("llama", "tiny")
    template_file = tmp_path / "mine.jinja"
    template_file.write_text(MINE)
    rule = ModelTemplateRule(chatml.name, TemplateOverride(f'[models."{chatml.name}"]', text="llama3"))
    return {
        "chat-template-file": (chatml, replace(SETTINGS, chat_template_file=template_file), "override"),
        "per-model-table": (chatml, replace(SETTINGS, model_templates=(rule,)), "llama3"),
        "unreadable-file": (chatml, replace(SETTINGS, chat_template_file=tmp_path / "gone.jinja"), "model"),
        "no-template-in-the-file": (make_model("llama", "tiny", markers="gemma"), SETTINGS, "gemma"),
    }


@pytest.mark.parametrize("case", ["chat-template-file", "per-model-table", "unreadable-file",
                                  "no-template-in-the-file"])
def test_the_child_chooses_the_template_the_engine_in_process_does(tmp_path, case):
    path, settings, name = _cases(tmp_path)[case]
    child = in_child(path, settings)
    assert child.name == name
    assert described(child) == described(in_process(path, settings))
