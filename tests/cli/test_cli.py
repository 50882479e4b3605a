"""The command line: flags, errors, the door to the app, and a real subprocess run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

import sessions
from sessions import paths
from sessions.bounded_read import NotRegularFile
from sessions.checkpoints import StoreClosedError
from sessions.cli import build_parser, main
from sessions.cli import commands as command_registry
from sessions.cli.launch_options import LaunchOptions
from sessions.config import CheckpointConfig
from sessions.errors import ControllerError
from tests.cli_support import assert_one_line_error, run

REPO = Path(__file__).resolve().parents[2]


def test_version(capsys):
    code, out, _ = run(capsys, "--version")
    assert code == 0
    assert out.strip() == f"llamachat {sessions.__version__}"


def test_help_lists_every_subcommand(capsys):
    code, out, _ = run(capsys, "--help")
    assert code == 0
    for name in ("sessions", "show", "export", "import", "rename", "delete", "models", "cache", "config"):
        assert name in out
    assert "-ngl" in out and "--ctx-size" in out
    lines = out.splitlines()
    at = next(index for index, line in enumerate(lines) if line.strip().startswith("import "))
    import_line = " ".join(lines[at].split() + (lines[at + 1].split() if lines[at + 1].startswith(" " * 8) else []))
    assert "llama.cpp web UI" in import_line and "ChatGPT" in import_line  # not only "a JSON export"


@pytest.mark.parametrize("argv", [
    ["--bogus"],
    ["-c", "abc", "sessions"],
    ["-ngl", "-5", "sessions"],
    ["-t", "0", "sessions"],
    ["show"],
    ["show", "abc"],
    ["export", "1", "--format", "pdf"],
    ["nonsense"],
])
def test_bad_flags_exit_1_with_one_line(capsys, argv):
    assert_one_line_error(*run(capsys, *argv))


def test_flag_messages_are_plain(capsys):
    *_, err = run(capsys, "-c", "abc", "sessions")
    assert "context size must be a whole number, not 'abc'" in err


def test_global_flags_before_or_after_the_command():
    parser = build_parser()
    assert parser.parse_args(["-c", "5", "-ngl", "-1", "sessions"]).ctx_size == 5
    after = parser.parse_args(["sessions", "-c", "7", "--theme", "nord"])
    assert (after.ctx_size, after.theme) == (7, "nord")
    assert parser.parse_args(["-c", "5", "sessions"]).n_gpu_layers is None


def test_no_command_starts_the_app_with_flags_applied(capsys, shared_dir):
    paths.config_file().parent.mkdir(parents=True)
    paths.config_file().write_text('theme = "from-file"\nn_batch = 64\nn_ctx = 100\n')
    model = shared_dir / "models" / "stories260K.gguf"
    calls = []

    def fake_app(options):
        calls.append(options)
        return 0

    code, _, err = run(capsys, "-m", str(model), "-c", "1024", "-ngl", "2", "-t", "3",
                       "--seed", "5", "--demo", "--session", "4", run_app=fake_app)
    assert code == 0 and err == ""
    [options] = calls
    assert isinstance(options, LaunchOptions)
    config = options.config
    assert (config.model, config.n_ctx, config.n_gpu_layers, config.threads, config.seed) == \
        (str(model), 1024, 2, 3, 5)
    assert config.n_batch == 64 and config.theme == "from-file"
    assert config.checkpoints.enabled
    assert options.demo and options.session_id == 4 and options.model_path == model
    assert options.config_problems == () and options.config_path == paths.config_file()


def test_no_checkpoints_turns_the_checkpoint_store_off(capsys):
    calls = []
    assert run(capsys, "--no-checkpoints", run_app=calls.append)[0] == 0
    assert calls[0].config.checkpoints.enabled is False
    assert calls[0].config.checkpoints.ram_mb == CheckpointConfig().ram_mb  # the rest as configured


def test_app_exit_status_is_passed_on(capsys):
    assert run(capsys, "--theme", "x", run_app=lambda options: 3)[0] == 3


def test_missing_model_fails_before_the_app_starts(capsys, tmp_path):
    calls = []
    result = run(capsys, "-m", str(tmp_path / "absent.gguf"), run_app=lambda *a: calls.append(a))
    assert_one_line_error(*result, words="no such model file")
    assert calls == []


def test_no_command_without_an_app_is_an_error(capsys):
    assert_one_line_error(*run(capsys), words="no command given")


def test_config_problems_are_warnings_not_failures(capsys, store, chat):
    paths.config_file().parent.mkdir(parents=True)
    paths.config_file().write_text('n_ctx = "big"\n')
    code, out, err = run(capsys, "sessions")
    assert code == 0
    assert str(chat.id) in out
    assert err.startswith("llamachat: warning: ")
    assert "line 1" in err and "n_ctx" in err


def test_the_app_is_told_the_name_of_the_config_file_that_is_wrong(capsys, monkeypatch, tmp_path):
    mine = tmp_path / "settings" / "my-llamachat.toml"
    mine.parent.mkdir()
    mine.write_text('n_ctx = "big"\n')
    monkeypatch.setenv("LLAMACHAT_CONFIG", str(mine))
    seen = []
    assert run(capsys, run_app=seen.append)[0] == 0
    [problem] = seen[0].config_problems
    assert problem.startswith(f"{mine}: line 1") and "config.toml" not in problem


def test_a_command_is_one_module_with_add_parser_and_run(capsys, monkeypatch):
    seen = {}

    def add_parser(subparsers):
        parser = subparsers.add_parser("echo", help="test command")
        parser.add_argument("words", nargs="*")
        return parser

    def run_echo(args, ctx):
        seen["config"] = ctx.config
        ctx.print(" ".join(args.words))
        if args.words == ["boom"]:
            raise RuntimeError("kaput")
        return 0

    module = types.SimpleNamespace(add_parser=add_parser, run=run_echo)
    monkeypatch.setattr(command_registry, "COMMANDS", [*command_registry.COMMANDS, module])
    code, out, _ = run(capsys, "-c", "333", "echo", "hello", "world")
    assert (code, out) == (0, "hello world\n")
    assert seen["config"].n_ctx == 333
    code, out, err = run(capsys, "echo", "boom")
    assert code == 1 and "unexpected RuntimeError: kaput" in err and "Traceback" not in err
    for command in command_registry.COMMANDS:
        assert callable(command.add_parser) and callable(command.run)




def _cli(*argv: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("LLAMACHAT_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "sessions.cli", *argv], capture_output=True,
                          text=True, env=env, timeout=60, cwd=REPO)


def test_subprocess_exit_codes_and_no_traceback(chat):
    ok = _cli("sessions", "--json")
    assert ok.returncode == 0, ok.stderr
    assert [s["id"] for s in json.loads(ok.stdout)] == [chat.id]
    for argv, words in ((["show", "42"], "no session 42"), (["--bogus"], "--bogus"),
                        (["-c", "x", "show", "1"], "context size")):
        failed = _cli(*argv)
        assert failed.returncode == 1
        assert failed.stdout == ""
        assert failed.stderr.startswith("llamachat: error: ") and words in failed.stderr
        assert failed.stderr.count("\n") == 1 and "Traceback" not in failed.stderr
    version = _cli("--version")
    assert (version.returncode, version.stdout.strip()) == (0, f"llamachat {sessions.__version__}")


def test_cli_never_imports_the_ui():
    code = ("import sys, sessions.cli, sessions.cli.commands; "
            "sessions.cli.build_parser(); "
            "heavy = ('textual', 'tui', 'llama_cpp', 'numpy', 'gguf'); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_the_seed_flag_says_it_seeds_sampling(capsys):
    """``--seed`` only seeds the sampler (``effective_sampling``), not the model context."""
    assert main(["ask", "--help"]) == 0
    help_text = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
    assert "--seed N seed for sampling replies (-1: a new one for every reply)" in help_text
    assert "model context" not in help_text


@pytest.mark.parametrize(("error", "line"), [
    # Any error of the root, whatever its family (a checkpoint store's was not one the
    # command line knew by name): its sentence, not "unexpected".
    (StoreClosedError, "the checkpoint store is closed; no more segments can be saved"),
    (lambda: ControllerError("no model is loaded"), "no model is loaded"),
    # One that is an OSError too: the file, and what is wrong with it.
    (lambda: NotRegularFile("/dev/zero"), "/dev/zero: not a regular file (a pipe or a device)"),
])
def test_every_error_of_the_root_is_one_line_for_the_user(capsys, monkeypatch, error, line):
    def add_parser(subparsers):
        return subparsers.add_parser("fail", help="test command")

    def fail(args, ctx):
        raise error()

    module = types.SimpleNamespace(add_parser=add_parser, run=fail)
    monkeypatch.setattr(command_registry, "COMMANDS", [*command_registry.COMMANDS, module])
    assert run(capsys, "fail") == (1, "", f"llamachat: error: {line}\n")


@pytest.mark.parametrize(("size", "shown"), [
    (0, "0 B"), (999, "999 B"), (1000, "1.0 KB"), (999_949, "999.9 KB"), (999_950, "1.0 MB"),
    (999_999, "1.0 MB"), (5_300_000_000, "5.3 GB"), (999_999_999_999, "1.0 TB"), (10**16, "10000.0 TB"),
])
def test_sizes_never_read_a_thousand_of_a_unit(size, shown):
    """A size just under the next unit rounds up into it: never "1000.0 KB"."""
    from sessions.units import human_size

    assert human_size(size) == shown


def test_a_context_llama_cpp_rounds_up_is_said_not_silently_changed(capsys):
    seen = []
    assert run(capsys, "-c", "128", run_app=seen.append)[0] == 0
    assert seen[0].config.n_ctx == 128
    assert seen[0].config_problems == ("a context of 128 tokens will hold 256: llama.cpp makes contexts "
                                       "in blocks of 256 tokens",)
    seen.clear()
    assert run(capsys, "-c", "512", run_app=seen.append)[0] == 0
    assert seen[0].config_problems == ()
    code, _, err = run(capsys, "ask", "-c", "300", "hello")
    assert err.startswith("llamachat: note: a context of 300 tokens will hold 512: ")
