"""The ``[models."NAME"]`` tables and ``chat_template_file``: read, checked, written, flagged."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sessions.cli import apply_flags, build_parser
from sessions.config import Config, ConfigError, config_template, load_config, save_config, update_config
from sessions.config.model import ModelSettings
from tests.config.test_config import line_of, write

TABLES = """\
chat_template_file = "every.jinja"

[models."gemma-3-270m-it.gguf"]
chat_template = "gemma"

[models."~/models/own.gguf"]
chat_template_file = "templates/own.jinja"

[models]
"llama-*.gguf" = { chat_template = "{{ messages }}" }
"""


def test_model_tables_are_read_in_the_order_written():
    loaded = load_config(write(TABLES))
    assert loaded.problems == []
    assert loaded.config.chat_template_file == "every.jinja"
    assert loaded.config.models == {
        "gemma-3-270m-it.gguf": ModelSettings(chat_template="gemma"),
        "~/models/own.gguf": ModelSettings(chat_template_file="templates/own.jinja"),
        "llama-*.gguf": ModelSettings(chat_template="{{ messages }}"),
    }
    assert list(loaded.config.models) == ["gemma-3-270m-it.gguf", "~/models/own.gguf", "llama-*.gguf"]


@pytest.mark.parametrize(("text", "field", "needle", "words"), [
    ('[models."a.gguf"]\nchat_template = 3\n', 'models.a.gguf.chat_template', "chat_template = 3",
     'models."a.gguf".chat_template must be a string, not a whole number (3); ignoring it'),
    ('[models."a.gguf"]\nchat_templat = "gemma"\n', "models.a.gguf.chat_templat", "chat_templat =",
     "unknown setting 'models.\"a.gguf\".chat_templat' ignored (did you mean 'chat_template'?)"),
    ('[models."a.gguf"]\nchat_template = ""\n', "models.a.gguf.chat_template", 'chat_template = ""',
     'models."a.gguf".chat_template is empty; ignoring it'),
    ('[models."a.gguf"]\nchat_template = "gemma"\nchat_template_file = "a.jinja"\n',
     "models.a.gguf.chat_template", 'chat_template = "gemma"',
     'models."a.gguf" sets both chat_template and chat_template_file; using chat_template_file'),
    ('models = 3\n', "models", "models = 3",
     'models must be tables such as [models."model.gguf"], not a whole number; ignoring it'),
    ('[models]\n"a.gguf" = "gemma"\n', "models.a.gguf", '"a.gguf" =',
     'models."a.gguf" must be a table of settings, not a string; ignoring it'),
    ('[models]\n"a.gguf" = 2024-05-01\n', "models.a.gguf", '"a.gguf" =',
     'models."a.gguf" must be a table of settings, not a date; ignoring it'),
    ('[models.""]\nchat_template = "gemma"\n', "models.", '[models.""]',
     'models."": a model table needs a file name, a pattern or a path; ignoring it'),
    ("chat_template_file = 5\n", "chat_template_file", "chat_template_file = 5",
     "chat_template_file must be a string, not a whole number (5); using the default (unset)"),
])
def test_a_bad_model_setting_is_named_with_its_line_and_costs_only_itself(text, field, needle, words):
    loaded = load_config(write("n_ctx = 1024\n" + text))
    assert loaded.config.n_ctx == 1024  # everything else is kept
    assert len(loaded.problems) == 1, loaded.problems
    problem = loaded.problems[0]
    assert problem.message == words and problem.field == field and not problem.fatal
    assert problem.line == line_of("n_ctx = 1024\n" + text, needle)


def test_both_keys_keep_the_file():
    loaded = load_config(write('[models."a.gguf"]\nchat_template = "x"\nchat_template_file = "a.jinja"\n'))
    assert loaded.config.models == {"a.gguf": ModelSettings(chat_template_file="a.jinja")}


def test_model_tables_survive_a_save_and_refuse_an_in_place_update(tmp_path):
    config = load_config(write(TABLES)).config
    path = save_config(config, tmp_path / "saved.toml")
    assert load_config(path).config == config
    with pytest.raises(ConfigError, match="edited in the config file itself"):
        update_config(models={})
    assert update_config(theme="nord").models == config.models  # other edits keep the tables


def test_the_commented_examples_are_valid_once_uncommented():
    text = config_template()
    uncommented = re.sub(r'(?m)^# ("[^"]+" = )', r"\1", text)
    uncommented = re.sub(r"(?m)^#   (\[models\.|chat_template = )", r"\1", uncommented)
    loaded = load_config(write(uncommented))
    assert loaded.problems == []
    assert loaded.config.models["gemma-3-*.gguf"] == ModelSettings(chat_template="gemma")
    assert loaded.config.models["gemma-3-270m-it-Q8_0.gguf"] == ModelSettings(chat_template="gemma")
    assert loaded.config.models["~/models/my-finetune.gguf"].chat_template_file == "templates/my-finetune.jinja"


@pytest.mark.parametrize("before", [True, False], ids=["before-command", "after-command"])
def test_chat_template_file_flag_is_global_and_made_absolute(before, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    flag = ["--chat-template-file", "mine.jinja"]
    argv = [*flag, "sessions"] if before else ["sessions", *flag]
    args = build_parser().parse_args(argv)
    config = apply_flags(Config(chat_template_file="from-config.jinja"), args)
    assert config.chat_template_file == str(tmp_path / "mine.jinja")
    assert Path(config.chat_template_file).is_absolute()
    unflagged = apply_flags(Config(chat_template_file="from-config.jinja"), build_parser().parse_args(["sessions"]))
    assert unflagged.chat_template_file == "from-config.jinja"
