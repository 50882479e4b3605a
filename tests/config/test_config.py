"""config.toml: loading field by field, problems with lines, atomic and in-place writes."""

from __future__ import annotations

import os
import re
import stat
from dataclasses import fields
from pathlib import Path

import pytest

from sessions import paths
from sessions.config import (
    CheckpointConfig,
    Config,
    ConfigError,
    config_template,
    load_config,
    save_config,
    update_config,
)
from sessions.config.validate import rules_cover_every_field
from sessions.sampling import SamplingSettings


def write(text: str) -> Path:
    path = paths.config_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def test_missing_file_gives_defaults_without_problems():
    loaded = load_config()
    assert not paths.config_file().exists()
    assert loaded.config == Config()
    assert loaded.problems == []
    assert loaded.path == paths.config_file()


def test_every_field_is_read_with_its_type():
    write("""
model = "~/models/a.gguf"
model_dirs = ["/m1", "/m2"]
n_ctx = 4096
n_batch = 256
n_gpu_layers = -1
threads = 6
seed = 7
system_prompt = "Be brief."
theme = "nord"

[sampling]
temperature = 0      # an integer is accepted for a float
top_k = 10
top_p = 0.5
min_p = 0.1
repeat_penalty = 1.1
repeat_last_n = 32
seed = 3
max_tokens = 99

[keys]
regenerate = "ctrl+r"

[checkpoints]
ram_mb = 100
disk_mb = 200
interval = 64
enabled = false
""")
    loaded = load_config()
    assert loaded.problems == []
    assert loaded.config == Config(
        model="~/models/a.gguf", model_dirs=["/m1", "/m2"], n_ctx=4096, n_batch=256,
        n_gpu_layers=-1, threads=6, seed=7, system_prompt="Be brief.", theme="nord",
        sampling=SamplingSettings(temperature=0.0, top_k=10, top_p=0.5, min_p=0.1,
                                  repeat_penalty=1.1, repeat_last_n=32, seed=3, max_tokens=99),
        keys={"regenerate": "ctrl+r"},
        checkpoints=CheckpointConfig(ram_mb=100, max_disk=200 << 20, interval=64, enabled=False),
    )
    assert isinstance(loaded.config.sampling.temperature, float)
    assert loaded.config.sampling.greedy


def test_syntax_error_gives_all_defaults_and_the_line():
    text = 'theme = "nord"\nn_ctx = 4096\nn_batch = = 3\n'
    write(text)
    loaded = load_config()
    assert loaded.config == Config()
    [problem] = loaded.problems
    assert problem.fatal
    assert problem.line == 3
    assert "syntax" in problem.message
    assert str(problem).startswith("line 3: ")


def test_wrong_type_costs_only_that_field():
    text = 'theme = "nord"\n\nn_ctx = "big"\nn_batch = 128\n'
    write(text)
    loaded = load_config()
    assert loaded.config.n_ctx == Config().n_ctx
    assert loaded.config.theme == "nord"
    assert loaded.config.n_batch == 128
    [problem] = loaded.problems
    assert problem.field == "n_ctx"
    assert problem.line == 3
    assert not problem.fatal
    assert "n_ctx" in problem.message and "whole number" in problem.message
    assert "8192" in problem.message


def test_out_of_range_in_a_table_keeps_the_rest_of_the_table():
    text = ('[sampling]\ntemperature = 0.2\ntop_p = 1.5\n\n'
            '[checkpoints]\nram_mb = -5\ndisk_mb = 10\n')
    write(text)
    loaded = load_config()
    config = loaded.config
    assert config.sampling.temperature == 0.2
    assert config.sampling.top_p == SamplingSettings().top_p
    assert config.checkpoints.ram_mb == CheckpointConfig().ram_mb
    assert config.checkpoints.max_disk == 10 << 20
    by_field = {p.field: p for p in loaded.problems}
    assert set(by_field) == {"sampling.top_p", "checkpoints.ram_mb"}
    assert by_field["sampling.top_p"].line == line_of(text, "top_p")
    assert by_field["checkpoints.ram_mb"].line == line_of(text, "ram_mb")
    assert "at most 1" in by_field["sampling.top_p"].message


def test_same_key_name_in_two_tables_points_at_the_right_line():
    text = 'seed = 5\n\n[sampling]\nseed = "x"\n'
    write(text)
    loaded = load_config()
    assert loaded.config.seed == 5
    [problem] = loaded.problems
    assert problem.field == "sampling.seed"
    assert problem.line == 4


def test_dotted_and_inline_keys_are_located():
    text = 'theme = "x"\nsampling.top_k = "many"\ncheckpoints = { ram_mb = true }\n'
    write(text)
    lines = {p.field: p.line for p in load_config().problems}
    assert lines == {"sampling.top_k": 2, "checkpoints.ram_mb": 3}


def test_unknown_keys_are_reported_but_not_fatal():
    text = 'them = "nord"\nn_ctx = 1024\n[sampling]\ntemprature = 0.1\n[colours]\na = 1\n'
    write(text)
    loaded = load_config()
    assert loaded.config.n_ctx == 1024
    assert loaded.config.theme == Config().theme
    by_field = {p.field: p for p in loaded.problems}
    assert set(by_field) == {"them", "sampling.temprature", "colours"}
    assert by_field["them"].line == 1
    assert by_field["sampling.temprature"].line == 4
    assert by_field["colours"].line == 5
    assert all("unknown" in p.message and not p.fatal for p in loaded.problems)
    assert "did you mean 'theme'?" in by_field["them"].message
    assert "did you mean 'temperature'?" in by_field["sampling.temprature"].message


def test_table_given_as_a_value_is_rejected():
    write("sampling = 3\n")
    loaded = load_config()
    assert loaded.config.sampling == SamplingSettings()
    [problem] = loaded.problems
    assert problem.field == "sampling" and problem.line == 1


def test_keys_and_lists_must_hold_strings():
    write('model_dirs = ["/a", 3]\n[keys]\nquit = 5\n')
    loaded = load_config()
    assert loaded.config.model_dirs == []
    assert loaded.config.keys == {}
    assert {p.field for p in loaded.problems} == {"model_dirs", "keys"}


def test_empty_model_means_unset():
    write('model = ""\n')
    assert load_config().config.model is None


def test_unreadable_file_is_a_problem_not_a_crash():
    paths.config_file().mkdir(parents=True)
    loaded = load_config()
    assert loaded.config == Config()
    assert loaded.problems[0].fatal
    write_bad = paths.config_file().parent / "bad.toml"
    write_bad.write_bytes(b'theme = "\xff"\n')
    loaded = load_config(write_bad)
    assert loaded.config == Config() and loaded.problems[0].fatal


def test_save_writes_only_non_default_values_atomically_and_privately():
    config = Config(theme="nord", n_ctx=2048, sampling=SamplingSettings(top_k=5),
                    keys={"quit": "ctrl+q"}, model_dirs=["/x"])
    path = save_config(config)
    assert path == paths.config_file()
    text = path.read_text()
    assert "n_batch" not in text and "temperature" not in text and "[checkpoints]" not in text
    assert "top_k = 5" in text
    loaded = load_config()
    assert loaded.problems == [] and loaded.config == config
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert os.listdir(path.parent) == ["config.toml"]
    save_config(Config())
    assert path.read_text().strip() == ""


def test_update_keeps_comments_and_unknown_keys():
    original = (
        "# my settings\n"
        'theme = "nord"  \n'
        "favourite_colour = 'green'   # unknown, but mine\n"
        "\n"
        "[sampling]\n"
        "# careful with this\n"
        "top_k = 5\n"
        "\n"
        "[extras]\n"
        "x = 1\n"
    )
    write(original)
    config = update_config(theme="gruvbox", sampling=SamplingSettings(top_k=5, temperature=0.3))
    text = paths.config_file().read_text()
    assert config.theme == "gruvbox" and config.sampling.temperature == 0.3
    for kept in ("# my settings", "favourite_colour = 'green'   # unknown, but mine",
                 "# careful with this", "[extras]", "x = 1"):
        assert kept in text
    assert 'theme = "gruvbox"' in text and "nord" not in text
    sampling_block = text.split("[sampling]")[1].split("[extras]")[0]
    assert "temperature = 0.3" in sampling_block
    assert load_config().config == config


def test_update_accepts_a_partial_table_as_a_mapping():
    write("[sampling]\ntop_k = 5\n")
    config = update_config(sampling={"min_p": 0.2})
    assert config.sampling.top_k == 5 and config.sampling.min_p == 0.2
    assert load_config().config.sampling == config.sampling
    assert update_config(sampling=None).sampling == SamplingSettings()
    assert load_config().config.sampling == SamplingSettings()
    assert "top_k" not in paths.config_file().read_text()  # back to defaults: lines removed


def test_setting_a_default_removes_the_line():
    path = write('theme = "nord"\nn_ctx = 100\n')
    config = update_config(theme=Config().theme)
    assert config.theme == Config().theme
    assert path.read_text() == "n_ctx = 100\n"


def test_update_creates_missing_file_and_tables():
    assert not paths.config_file().exists()
    update_config(theme="nord", checkpoints=CheckpointConfig(enabled=False))
    loaded = load_config()
    assert loaded.problems == []
    assert loaded.config.theme == "nord" and not loaded.config.checkpoints.enabled
    assert "[checkpoints]" in paths.config_file().read_text()


def test_update_removes_none_and_edits_key_tables():
    write('model = "/a.gguf"\n[keys]\nquit = "ctrl+q"\nhelp = "f1"\n')
    config = update_config(model=None, keys={"help": "f2", "send": "ctrl+j"})
    text = paths.config_file().read_text()
    assert "model" not in text and "quit" not in text
    assert config.model is None and config.keys == {"help": "f2", "send": "ctrl+j"}
    assert load_config().config.keys == config.keys


def test_update_falls_back_to_a_full_rewrite_for_multiline_values():
    write('model_dirs = [\n  "/a",\n  "/b",\n]\nunknown = 1\n')
    config = update_config(model_dirs=["/c"])
    loaded = load_config()
    assert config.model_dirs == ["/c"] and loaded.config.model_dirs == ["/c"]
    assert "unknown = 1" in paths.config_file().read_text()


def test_update_refuses_to_overwrite_a_broken_file():
    broken = 'theme = "nord\n# my notes\n'
    path = write(broken)
    with pytest.raises(ConfigError, match="syntax"):
        update_config(theme="x")
    assert path.read_text() == broken


def test_update_rejects_invalid_values_and_unknown_settings():
    with pytest.raises(ConfigError, match="n_ctx"):
        update_config(n_ctx="large")
    with pytest.raises(ConfigError, match="top_p"):
        update_config(sampling=SamplingSettings(top_p=3.0))
    with pytest.raises(ConfigError, match="colour"):
        update_config(colour="red")
    with pytest.raises(ConfigError, match="sampling"):
        update_config(sampling={"temprature": 0.5})
    assert not paths.config_file().exists()


def test_template_is_valid_and_documents_every_setting():
    template = config_template()
    assert load_config_from_text(template).problems == []
    assert load_config_from_text(template).config == Config()
    uncommented = re.sub(r"(?m)^# (\w+ = )", r"\1", template)
    loaded = load_config_from_text(uncommented)
    assert loaded.problems == []
    config = loaded.config
    examples = {"model", "model_dirs", "threads", "rpc", "tensor_split", "system_prompt", "keys",
                "chat_template_file", "chat_template_kwargs", "undo_minutes", "tree_width", "presets"}
    for f in fields(Config):
        assert re.search(rf"(?m)^(# )?{f.name} = |^\[{f.name}\]", template), f.name
        if f.name not in examples:
            assert getattr(config, f.name) == getattr(Config(), f.name), f.name
    for sub in fields(SamplingSettings):
        assert f"# {sub.name} = " in template


def load_config_from_text(text: str):
    path = write(text)
    return load_config(path)


def test_every_field_has_a_validation_rule():
    assert rules_cover_every_field()


def test_command_line_overrides_skip_flags_not_given():
    config = Config(n_ctx=1000).with_overrides(n_ctx=None, theme="nord", threads=2)
    assert config.n_ctx == 1000 and config.theme == "nord" and config.threads == 2
    with pytest.raises(TypeError):
        Config().with_overrides(ctx=3)


def test_update_of_the_init_template_keeps_it_tidy():
    path = write(config_template())
    update_config(theme="nord", sampling={"temperature": 0.1})
    text = path.read_text()
    assert load_config().problems == []
    assert text.count("#") >= config_template().count("#")
    before_sampling = text.split("[sampling]")[0]
    assert 'theme = "nord"' in before_sampling
    assert "temperature = 0.1" in text.split("[sampling]")[1].split("[checkpoints]")[0]
    # the template's comment introducing [sampling] stays right above it
    assert before_sampling.rstrip().splitlines()[-1].startswith("# Default sampling")


def test_update_keeps_dotted_key_spelling():
    path = write('sampling.top_k = 5\ntheme = "a"\n')
    config = update_config(sampling={"top_k": 9})
    assert config.sampling.top_k == 9
    assert path.read_text().startswith("sampling.top_k = 9\n")


def test_presets_are_named_tables_of_sampling_keys_each_value_checked():
    text = ('[presets.precise]\ntemperature = 0.2\ntop_p = 0.9\n'
            '[presets.loose]\ntemperature = 1.1\ntop_k = 1.5\ntemprature = 2.0\nmin_p = 3.0\n')
    loaded = load_config_from_text(text)
    assert loaded.config.presets == {"precise": {"temperature": 0.2, "top_p": 0.9}, "loose": {"temperature": 1.1}}
    messages = [problem.message for problem in loaded.problems]
    assert any("presets.loose.top_k must be a whole number" in m for m in messages)
    assert any("unknown setting 'presets.loose.temprature'" in m and "temperature" in m for m in messages)
    assert any("presets.loose.min_p is 3.0, outside 0.0..1.0" in m for m in messages)
