"""Settings that pass a naive range check but crash or silently break llama.cpp.

``n_batch = 4294967297`` aborted the process, ``threads = 100000`` crashed it with
SIGSEGV, and ``n_ctx = 4294967296`` wrapped to 0 (the model's own context) without a
word. Each field is bounded by what llama.cpp keeps it in and by this machine: the config
file reports the field and its line and uses the default, the command line refuses the
flag in one line, and ``ask`` with such a file still answers (real model, real process).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from sessions import paths
from sessions.cli.runner import apply_flags
from sessions.config import Config, load_config
from sessions.config.validate import MAX_BATCH, MAX_CONTEXT, max_threads
from sessions.synth import make_model
from tests.cli_support import assert_one_line_error, run
from tests.store_child import REPO


def write(text: str) -> None:
    path = paths.config_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


@pytest.mark.parametrize(("line", "field", "words"), [
    ("n_batch = 4294967297", "n_batch", f"must be at most {MAX_BATCH}"),
    ("threads = 100000", "threads", f"must be at most {max_threads()}"),
    ("n_ctx = 4294967296", "n_ctx", f"must be at most {MAX_CONTEXT}"),
    ("n_gpu_layers = 4294967295", "n_gpu_layers", "must be at most 2147483647"),
    ("[sampling]\ntop_k = 99999999999", "sampling.top_k", "must be at most 2147483647"),
    ("[sampling]\ntemperature = nan", "sampling.temperature", "must be a finite number"),
    ("[sampling]\nrepeat_penalty = inf", "sampling.repeat_penalty", "must be a finite number"),
])
def test_values_llama_cpp_cannot_take_are_reported_with_field_and_line(line, field, words):
    write("# my settings\n" + line + "\n")
    loaded = load_config()
    [problem] = loaded.problems
    assert problem.field == field and problem.line == line.count("\n") + 2
    assert words in problem.message and "using the default" in problem.message
    assert loaded.config == Config()


def test_threads_are_bounded_by_this_machine():
    assert max_threads(2) == 8 and max_threads(16) == 64 and max_threads(1024) == 512


def test_a_batch_larger_than_a_fixed_context_is_brought_down():
    write("n_ctx = 256\nn_batch = 1024\n")
    loaded = load_config()
    [problem] = loaded.problems
    assert problem.field == "n_batch" and problem.line == 2
    assert "must not be larger than n_ctx (256); using 256" in problem.message
    assert (loaded.config.n_ctx, loaded.config.n_batch) == (256, 256)
    write("n_ctx = 256\n")  # the default batch follows a small context without a word
    loaded = load_config()
    assert loaded.problems == [] and loaded.config.n_batch == 256
    write("n_ctx = 0\nn_batch = 4096\n")  # the model's own context: nothing to compare with
    assert load_config().config.n_batch == 4096


@pytest.mark.parametrize(("argv", "words"), [
    (["-c", "4294967296"], "context size must be at most 16777216"),
    (["-t", "100000"], f"threads must be at most {max_threads()}"),
    (["-ngl", "2147483648"], "GPU layers must be at most 2147483647"),
    (["--seed", "4294967296"], "seed must be at most 4294967295"),
    (["show", "9223372036854775808"], "session id must be at most 9223372036854775807"),
])
def test_out_of_range_flags_are_one_line(capsys, argv, words):
    assert_one_line_error(*run(capsys, *argv), words)


def test_a_small_context_flag_brings_the_batch_down_and_a_relative_model_is_made_absolute(tmp_path,
                                                                                       monkeypatch):
    monkeypatch.chdir(tmp_path)

    class Flags:
        model = "models/tiny.gguf"
        ctx_size = 128

    config = apply_flags(Config(), Flags())
    assert (config.n_ctx, config.n_batch) == (128, 128)
    assert config.model == str(tmp_path / "models" / "tiny.gguf")


@pytest.mark.engine
@pytest.mark.parametrize("line", ["n_batch = 4294967297", "threads = 100000", "n_ctx = 4294967296"])
def test_ask_with_such_a_config_warns_and_answers(tmp_path, line):
    write(line + "\n")
    model = str(make_model("llama", "tiny"))
    done = subprocess.run(
        [sys.executable, "-m", "sessions.cli", "ask", "-m", model, "--temp", "0", "--max-tokens", "3",
         "--stats", "hello"],
        cwd=REPO, env=os.environ.copy(), capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    warning = f"llamachat: warning: {paths.config_file()}: line 1: {line.split()[0]} must be at most"
    assert warning in done.stderr
    assert json.loads(done.stderr.strip().splitlines()[-1])["tokens_generated"] > 0


def test_a_context_llama_cpp_cannot_allocate_is_a_plain_error(capsys, monkeypatch):
    """Within the bounds, a context can still be too large for this machine's memory:
    llama.cpp then refuses it, and the engine's sentence is shown as it is."""
    import types

    from sessions.cli import commands as command_registry
    from sessions.llama.context import DecodeError

    def add_parser(subparsers):
        return subparsers.add_parser("big")

    def run_big(args, ctx):
        raise DecodeError(f"llama.cpp could not create a context of {ctx.config.n_ctx} tokens (out of memory?)")

    module = types.SimpleNamespace(add_parser=add_parser, run=run_big)
    monkeypatch.setattr(command_registry, "COMMANDS", [*command_registry.COMMANDS, module])
    code, out, err = run(capsys, "-c", str(MAX_CONTEXT), "big")
    assert_one_line_error(code, out, err, f"could not create a context of {MAX_CONTEXT} tokens (out of memory?)")
    assert "unexpected" not in err


@pytest.mark.parametrize(("line", "value"), [
    ('n_gpu_layers = "auto"', "auto"), ('n_gpu_layers = "All"', "all"), ("n_gpu_layers = 12", 12),
    ("n_gpu_layers = -1", -1), ("", "auto"),
])
def test_gpu_layers_take_a_number_auto_or_all(line, value):
    write(line + "\n")
    loaded = load_config()
    assert loaded.problems == [] and loaded.config.n_gpu_layers == value


@pytest.mark.parametrize(("line", "words"), [
    ('n_gpu_layers = "most"', 'must be a number of layers, "auto" or "all", not a string'),
    ("n_gpu_layers = -2", "must be at least -1"),
    ("n_gpu_layers = 1.5", 'must be a number of layers, "auto" or "all", not a number'),
])
def test_other_gpu_layers_are_reported_and_auto_is_used(line, words):
    write(line + "\n")
    [problem] = load_config().problems
    assert problem.field == "n_gpu_layers" and words in problem.message
    assert "using the default ('auto')" in problem.message


@pytest.mark.parametrize(("flag", "value"), [("auto", "auto"), ("ALL", "all"), ("-1", -1), ("40", 40)])
def test_the_gpu_layers_flag_takes_llama_cpp_words(flag, value):
    from sessions.cli.parser import build_parser

    assert build_parser().parse_args(["-ngl", flag, "sessions"]).n_gpu_layers == value


def test_a_wrong_gpu_layers_flag_is_one_line(capsys):
    assert_one_line_error(*run(capsys, "-ngl", "lots"), 'GPU layers must be a number, "auto" or "all", not \'lots\'')
    assert_one_line_error(*run(capsys, "-ngl", "-2"), "GPU layers must be at least -1, not -2")


def test_cache_types_are_read_in_any_case_and_reach_the_context():
    from sessions.engine.settings import EngineSettings

    write('cache_type_k = "Q8_0"\ncache_type_v = "q4_0"\n')
    loaded = load_config()
    assert loaded.problems == [] and (loaded.config.cache_type_k, loaded.config.cache_type_v) == ("q8_0", "q4_0")
    params = EngineSettings.from_config(loaded.config).context_params()
    assert (params.type_k, params.type_v) == (8, 2)
    assert params.compat() != EngineSettings().context_params().compat()  # checkpoints never cross types


@pytest.mark.parametrize(("line", "words"), [
    ('cache_type_v = "q3_k"', "must be one of f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1, not 'q3_k'"),
    ("cache_type_k = 8", "must be a string, not a whole number"),
])
def test_other_cache_types_are_reported_and_f16_is_used(line, words):
    write(line + "\n")
    [problem] = load_config().problems
    assert words in problem.message and "using the default ('f16')" in problem.message


def test_the_cache_type_flags_take_llama_cpp_names(capsys):
    from sessions.cli.parser import build_parser

    args = build_parser().parse_args(["-ctk", "q8_0", "--cache-type-v", "Q5_1", "sessions"])
    assert (args.cache_type_k, args.cache_type_v) == ("q8_0", "q5_1")
    assert apply_flags(Config(), args).cache_type_v == "q5_1"
    assert_one_line_error(*run(capsys, "-ctv", "q2"), "cache type must be one of f32, f16, bf16, q8_0")
