"""``chat_template_kwargs``: variables for the chat template, from the config and the flag.

Reasoning models read a switch from their template's variables (``enable_thinking`` for
Qwen3, Qwen3.5 and Gemma 4, ``reasoning_effort`` for gpt-oss), and llama.cpp users set it
with ``--chat-template-kwargs``. The config takes a table at the top level and one per
model; a model's own values win over the top-level ones; the flag replaces the top-level
table for one run, and its values win over a model's own too. The real engine's template
is given them, so the generation prompt changes with them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sessions.cli import apply_flags, build_parser
from sessions.cli.errors import UsageError
from sessions.config import Config, load_config
from sessions.engine.factory import llama_engine_factory
from sessions.engine.settings import EngineSettings
from sessions.synth import make_model
from sessions.templates.chat_template import ChatMessage
from sessions.templates.message_tokens import reply_opens_in_reasoning
from tests.config.test_config import line_of, write
from tests.conftest import SHARED

CONFIG = """\
chat_template_kwargs = { enable_thinking = false, reasoning_effort = "low" }

[models."qwen-*.gguf"]
chat_template_kwargs = { enable_thinking = true }

[models."qwen-exact.gguf"]
chat_template_kwargs = { reasoning_effort = "high" }
"""


def settings_of(text: str) -> EngineSettings:
    loaded = load_config(write(text))
    assert loaded.problems == []
    return EngineSettings.from_config(loaded.config)


def test_a_models_own_values_win_over_the_top_level_ones():
    settings = settings_of(CONFIG)
    assert settings.template_variables(Path("/m/other.gguf")) == {"enable_thinking": False,
                                                                    "reasoning_effort": "low"}
    assert settings.template_variables(Path("/m/qwen-3.gguf")) == {"enable_thinking": True,
                                                                     "reasoning_effort": "low"}
    # the table naming the file itself ranks above a pattern, as for templates
    assert settings.template_variables(Path("/m/qwen-exact.gguf")) == {"enable_thinking": False,
                                                                         "reasoning_effort": "high"}


@pytest.mark.parametrize(("text", "field", "needle", "words"), [
    ("chat_template_kwargs = 3\n", "chat_template_kwargs", "chat_template_kwargs = 3",
     "chat_template_kwargs must be a table of strings, numbers and true or false, not a whole number; "
     "using the default ({})"),
    ("chat_template_kwargs = { a = [1] }\n", "chat_template_kwargs", "chat_template_kwargs =",
     "chat_template_kwargs must be a table of strings, numbers and true or false; 'a' is a list ([1]); "
     "using the default ({})"),
    ('[models."a.gguf"]\nchat_template_kwargs = { t = nan }\n', "models.a.gguf.chat_template_kwargs",
     "chat_template_kwargs =", 'models."a.gguf".chat_template_kwargs must be a table of strings, numbers '
     "and true or false; 't' is a number (nan); ignoring it"),
])
def test_a_bad_table_is_named_with_its_line_and_ignored(text, field, needle, words):
    loaded = load_config(write("n_ctx = 1024\n" + text))
    assert loaded.config.n_ctx == 1024 and loaded.config.chat_template_kwargs == {}
    (problem,) = loaded.problems
    assert problem.message == words and problem.field == field
    assert problem.line == line_of("n_ctx = 1024\n" + text, needle)


def test_the_flag_replaces_the_configs_table_for_one_run():
    config = Config(chat_template_kwargs={"enable_thinking": True, "reasoning_effort": "low"})
    args = build_parser().parse_args(["--chat-template-kwargs", '{"enable_thinking": false}', "sessions"])
    assert apply_flags(config, args).chat_template_kwargs == {"enable_thinking": False}
    assert apply_flags(config, build_parser().parse_args(["sessions"])) == config


def test_the_flag_wins_over_a_models_own_values_too():
    """A table naming the model wins over the top-level table, not over a flag given for
    this run: ``--chat-template-kwargs '{"enable_thinking": false}'`` turns Qwen3's
    reasoning off even where the config turns it on for Qwen3 (its other values stay)."""
    loaded = load_config(write(CONFIG))
    args = build_parser().parse_args(["--chat-template-kwargs", '{"enable_thinking": false}', "sessions"])
    settings = EngineSettings.from_config(apply_flags(loaded.config, args))
    assert settings.template_variables(Path("/m/qwen-3.gguf")) == {"enable_thinking": False}
    assert settings.template_variables(Path("/m/qwen-exact.gguf")) == {"enable_thinking": False,
                                                                         "reasoning_effort": "high"}


@pytest.mark.parametrize(("flag", "words"), [
    ('{"enable_thinking": tru}', "must be a JSON object, not"),
    ("[1]", "must be an object of strings, numbers and true or false, not a list"),
    ('{"a": {"b": 1}}', "'a' is an object"),
])
def test_a_bad_flag_is_refused_in_words(flag, words):
    with pytest.raises(UsageError, match="argument --chat-template-kwargs: chat template kwargs ") as refused:
        build_parser().parse_args(["--chat-template-kwargs", flag, "sessions"])
    assert words in str(refused.value)


@pytest.mark.engine
def test_the_engine_renders_with_them(tmp_path):
    """A Qwen3.5 template over a real tiny model: its prompt opens the reasoning block,
    unless ``enable_thinking = false`` reaches the template."""
    template = SHARED / "templates" / "Qwen3.5-4B.jinja"
    model = make_model("llama", "tiny")
    history = [ChatMessage("user", "Hello there.")]
    opens = {}
    for kwargs in ("", "chat_template_kwargs = { enable_thinking = false }\n"):
        text = f'[models."{model.name}"]\nchat_template_file = "{template}"\n{kwargs}'
        engine = llama_engine_factory(None)(model, settings_of(text), lambda _: None)
        try:
            opens[kwargs] = (engine.template.variables, reply_opens_in_reasoning(engine.template, history))
        finally:
            engine.close()
    assert opens[""] == ({}, True)
    assert opens["chat_template_kwargs = { enable_thinking = false }\n"] == ({"enable_thinking": False}, False)


def test_the_tables_survive_a_save(tmp_path):
    from sessions.config import save_config
    from sessions.config.model import ModelSettings

    config = Config(chat_template_kwargs={"enable_thinking": False, "budget": 2, "temperature": 0.5},
                    models={"a.gguf": ModelSettings(chat_template_kwargs={"enable_thinking": True})})
    loaded = load_config(save_config(config, tmp_path / "saved.toml"))
    assert loaded.problems == [] and loaded.config == config
