"""Choosing the template: the user's, the model's, then one the vocabulary points to."""

from __future__ import annotations

from pathlib import Path

import pytest

from sessions import paths
from sessions.config import Config
from sessions.config.model import ModelSettings
from sessions.engine.settings import EngineSettings
from sessions.templates.chat_template import ChatMessage, ChatTemplate
from sessions.templates.choice import BASE_MODEL, choose_template
from sessions.templates.families import BY_NAME
from sessions.templates.override import (
    MAX_FILE_BYTES,
    ModelTemplateRule,
    TemplateOverride,
    override_for,
    rules_from_config,
)
from tests.conftest import SHARED
from tests.templates.test_chat_template import HOSTILE, HOSTILE_CASES

GEMMA = frozenset({"<start_of_turn>", "<end_of_turn>", "<bos>"})
LLAMA3 = frozenset({"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"})
CHAT = [ChatMessage("system", "Be brief."), ChatMessage("user", "Hi there")]
OWN = (SHARED / "templates" / "google-gemma-2-2b-it.jinja").read_text()
MINE = ("{% for m in messages %}{{ '<start_of_turn>' + m.role + '\\n' + m.content + '<end_of_turn>\\n' }}"
        "{% endfor %}{% if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{% endif %}")


def file_override(tmp_path: Path, text: str, name: str = "mine.jinja") -> TemplateOverride:
    path = tmp_path / name
    path.write_text(text)
    return TemplateOverride("--chat-template-file", file=path)


def test_the_model_template_is_used_when_nothing_else_is_asked():
    template = choose_template(OWN, GEMMA, bos_token="<bos>")
    assert template.name == "model" and not template.is_fallback
    assert template.origin == "the model file"


@pytest.mark.parametrize(("special", "family", "title"), [
    (GEMMA, "gemma", "Gemma"), (LLAMA3, "llama3", "Llama 3"),
    ({"<|im_start|>", "<|im_end|>", "<|endoftext|>"}, "chatml", "ChatML"),
])
def test_no_template_gets_the_built_in_its_vocabulary_points_to(special, family, title):
    template = choose_template(None, special)
    assert template.name == family and template.origin == f"the built-in {title} template"
    markers = ", ".join(BY_NAME[family].markers)
    assert template.fallback_reason == (
        f"the model has no chat template; using the {title} template instead (its vocabulary has {markers})")


def test_a_vocabulary_without_chat_markers_is_called_a_base_model_and_still_chats():
    template = choose_template("   ", {"<|endoftext|>"})
    assert template.name == "plain"
    assert template.fallback_reason.startswith(f"the model has no chat template, and {BASE_MODEL}")
    assert "looks like a base model" in template.fallback_reason
    assert template.render(CHAT, add_generation_prompt=True) == "Be brief.\n\nUser: Hi there\n\nAssistant:"


@pytest.mark.parametrize("name", sorted(HOSTILE_CASES))
def test_a_hostile_model_template_gives_way_to_the_detected_built_in(name):
    template = choose_template((HOSTILE / f"{name}.jinja").read_text(), LLAMA3)
    assert template.name == "llama3"
    reason = template.fallback_reason
    assert reason.startswith("the model's chat template ") and HOSTILE_CASES[name] in reason
    assert "; using the Llama 3 template instead (its vocabulary has " in reason


def test_a_user_template_file_comes_before_the_model_template(tmp_path):
    override = file_override(tmp_path, MINE)
    template = choose_template(OWN, GEMMA, override=override)
    assert template.name == "override" and not template.is_fallback
    assert template.origin == str(override.file)
    assert template.render(CHAT, add_generation_prompt=True).startswith("<start_of_turn>system\nBe brief.")


@pytest.mark.parametrize("name", sorted(HOSTILE_CASES))
def test_a_hostile_user_template_is_refused_in_one_sentence(name, tmp_path):
    override = TemplateOverride("--chat-template-file", file=HOSTILE / f"{name}.jinja")
    template = choose_template(OWN, GEMMA, override=override)
    assert template.name == "model"  # the chat goes on with the model's own template
    reason = template.fallback_reason
    assert reason.startswith(f"the chat template in {override.file} ") and HOSTILE_CASES[name] in reason
    assert reason.endswith("; using the model's own template instead") and "\n" not in reason


def test_a_refused_user_template_and_no_model_template_fall_to_the_vocabulary(tmp_path):
    override = file_override(tmp_path, "{{ ''.__class__ }}")
    template = choose_template(None, GEMMA, override=override)
    assert template.name == "gemma"
    assert template.fallback_reason.startswith(f"the chat template in {override.file} tried to access a forbidden")
    assert ", and the model has no chat template; using the Gemma template instead" in template.fallback_reason


@pytest.mark.parametrize(("make", "complaint"), [
    (lambda tmp: tmp / "missing.jinja", "does not exist"),
    (lambda tmp: tmp, "is a folder, not a file"),
    (lambda tmp: (tmp / "latin1.jinja", (tmp / "latin1.jinja").write_bytes(b"caf\xe9"))[0], "is not UTF-8 text"),
    (lambda tmp: (tmp / "big.jinja", (tmp / "big.jinja").write_text("x" * (MAX_FILE_BYTES + 1)))[0],
     f"is {MAX_FILE_BYTES + 1:,} bytes long"),
    (lambda tmp: (tmp / "empty.jinja", (tmp / "empty.jinja").write_text(" \n"))[0], "is empty"),
    (lambda tmp: (tmp / "bad.jinja", (tmp / "bad.jinja").write_text("{% for %}"))[0], "is not valid Jinja"),
])
def test_an_unusable_template_file_is_named_with_what_is_wrong(tmp_path, make, complaint):
    path = make(tmp_path)
    template = choose_template(OWN, GEMMA, override=TemplateOverride("--chat-template-file", file=path))
    assert template.name == "model"
    assert template.fallback_reason.startswith(f"the chat template in {path} {complaint}")


def test_a_built_in_name_or_jinja_text_can_be_chosen_by_name():
    by_name = choose_template(OWN, GEMMA, override=TemplateOverride('[models."x.gguf"]', text=" llama3 "))
    assert by_name.name == "llama3" and not by_name.is_fallback
    assert by_name.origin == 'the built-in Llama 3 template (set in [models."x.gguf"])'
    inline = choose_template(OWN, GEMMA, override=TemplateOverride('[models."x.gguf"]', text=MINE))
    assert inline.name == "override" and inline.origin == '[models."x.gguf"]'
    hostile = choose_template(OWN, GEMMA, override=TemplateOverride('[models."x.gguf"]', text="{{ x.__class__ }}"))
    assert hostile.name == "model"
    assert hostile.fallback_reason.startswith('the chat template set in [models."x.gguf"] ')


def test_the_command_line_then_a_path_then_a_name_then_the_first_pattern(tmp_path):
    model = tmp_path / "gemma-3-270m-it.gguf"

    def rule(pattern: str) -> ModelTemplateRule:
        return ModelTemplateRule(pattern, TemplateOverride(pattern, text=pattern))

    pattern, other, name, path = (rule("gemma-3-*.gguf"), rule("*.gguf"), rule("gemma-3-270m-it.gguf"),
                                  rule(str(model)))
    assert override_for(model, everywhere=None, rules=[pattern, other, name, path]) is path.override
    assert override_for(model, everywhere=None, rules=[pattern, other, name]) is name.override
    assert override_for(model, everywhere=None, rules=[other, pattern]) is other.override
    assert override_for(model, everywhere=None, rules=[rule("llama-*.gguf"), rule("/elsewhere/x.gguf")]) is None
    cli = TemplateOverride("--chat-template-file", file=tmp_path / "t.jinja")
    assert override_for(model, everywhere=cli, rules=[path]) is cli
    assert rule("GEMMA-3-*.gguf").matches(model) is False  # the name as written, case and all


def test_config_tables_become_rules_with_files_taken_from_the_config_folder(tmp_path):
    models = {"a.gguf": ModelSettings(chat_template="gemma"),
              "b.gguf": ModelSettings(chat_template_file="templates/b.jinja"),
              "c.gguf": ModelSettings(chat_template_file="/abs/c.jinja"),
              "d.gguf": ModelSettings()}
    rules = rules_from_config(models, tmp_path)
    assert [r.pattern for r in rules] == ["a.gguf", "b.gguf", "c.gguf"]
    assert rules[0].override == TemplateOverride('[models."a.gguf"]', text="gemma")
    assert rules[1].override.file == tmp_path / "templates" / "b.jinja"
    assert rules[2].override.file == Path("/abs/c.jinja")


def test_engine_settings_carry_the_choice_to_the_factory(tmp_path):
    config = Config(chat_template_file="everywhere.jinja",
                    models={"a.gguf": ModelSettings(chat_template_file="a.jinja")})
    settings = EngineSettings.from_config(config)
    assert settings.chat_template_file == paths.config_dir() / "everywhere.jinja"
    assert settings.template_override(tmp_path / "a.gguf").file == paths.config_dir() / "everywhere.jinja"
    per_model = EngineSettings.from_config(Config(models=config.models))
    assert per_model.template_override(tmp_path / "a.gguf").file == paths.config_dir() / "a.jinja"
    assert per_model.template_override(tmp_path / "b.gguf") is None
    assert EngineSettings.from_config(Config()).template_override(tmp_path / "a.gguf") is None


def test_chat_template_load_keeps_its_chatml_fallback():
    assert ChatTemplate.load(None).name == "chatml"
    assert ChatTemplate.load(OWN).name == "model"
