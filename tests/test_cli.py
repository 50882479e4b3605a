"""The command line: every subcommand in-process, exit codes, and a real subprocess run."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import types
from datetime import datetime
from pathlib import Path

import pytest

import sessions
from sessions import paths
from sessions.cli import build_parser, main
from sessions.cli import commands as command_registry
from sessions.config import Config, config_template
from sessions.exchange import export_json
from sessions.store import SessionStore

REPO = Path(__file__).resolve().parent.parent
LONG = "Tell me a story about a dragon who liked tea and lived in a castle by the cold grey sea"


@pytest.fixture
def store():
    with SessionStore.open() as opened:
        yield opened


@pytest.fixture
def chat(store):
    """A session with a regenerated reply: #1 user, #2 and #3 assistant, #4 user under #3."""
    session = store.create_session()
    first = store.add_message(session.id, None, "user", LONG)
    store.add_message(session.id, first.id, "assistant", "Once upon a time\nthere was")
    chosen = store.add_message(session.id, first.id, "assistant", "A dragon named Earl Grey")
    last = store.add_message(session.id, chosen.id, "user", "more please")
    store.set_active_leaf(session.id, last.id)
    return store.get_session(session.id)


def run(capsys, *argv: str, run_app=None) -> tuple[int, str, str]:
    code = main(list(argv), run_app=run_app)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_one_line_error(code: int, out: str, err: str, words: str = "") -> None:
    assert code == 1
    assert out == ""
    assert err.startswith("llamachat: error: ") and err.endswith("\n")
    assert err.count("\n") == 1, err
    assert "Traceback" not in err
    assert words in err


# --- global flags, errors, the app door ----------------------------------------------


def test_version(capsys):
    code, out, _ = run(capsys, "--version")
    assert code == 0
    assert out.strip() == f"llamachat {sessions.__version__}"


def test_help_lists_every_subcommand(capsys):
    code, out, _ = run(capsys, "--help")
    assert code == 0
    for name in ("sessions", "show", "export", "import", "rename", "delete", "models", "config"):
        assert name in out
    assert "-ngl" in out and "--ctx-size" in out


@pytest.mark.parametrize("argv", [
    ["--bogus"],
    ["-c", "abc", "sessions"],
    ["-ngl", "-5", "sessions"],
    ["-t", "0", "sessions"],
    ["show"],
    ["show", "abc"],
    ["export", "1", "--format", "pdf"],
    ["nonsense"],
    ["config"],
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

    def fake_app(args, config):
        calls.append((args, config))
        return 0

    code, _, err = run(capsys, "-m", str(model), "-c", "1024", "-ngl", "2", "-t", "3",
                       "--seed", "5", "--demo", "--session", "4", run_app=fake_app)
    assert code == 0 and err == ""
    [(args, config)] = calls
    assert isinstance(config, Config)
    assert (config.model, config.n_ctx, config.n_gpu_layers, config.threads, config.seed) == \
        (str(model), 1024, 2, 3, 5)
    assert config.n_batch == 64 and config.theme == "from-file"
    assert args.demo and args.session == 4 and args.command is None
    assert args.config_problems == [] and args.config_path == paths.config_file()


def test_app_exit_status_is_passed_on(capsys):
    assert run(capsys, "--theme", "x", run_app=lambda args, config: 3)[0] == 3


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


# --- sessions, show ------------------------------------------------------------------


def test_sessions_lists_one_line_each(capsys, store, chat):
    other = store.create_session(title="Second chat")
    store.add_message(other.id, None, "user", "hi")
    code, out, err = run(capsys, "sessions")
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert len(lines) == 2
    assert lines[0].split()[0] == str(other.id)  # most recently updated first
    assert "Second chat" in lines[0] and "1 message" in lines[0]
    assert lines[1].split()[0] == str(chat.id) and "4 messages" in lines[1]
    code, out, _ = run(capsys, "sessions", "--search", "Earl Grey")
    assert [line.split()[0] for line in out.splitlines()] == [str(chat.id)]


def test_sessions_json(capsys, store, chat):
    code, out, _ = run(capsys, "sessions", "--json")
    assert code == 0
    [entry] = json.loads(out)
    assert set(entry) == {"id", "title", "updated_at", "message_count"}
    assert entry["id"] == chat.id and entry["title"] == chat.title
    assert entry["message_count"] == 4
    when = datetime.fromisoformat(entry["updated_at"]).timestamp()
    assert when == pytest.approx(store.get_session(chat.id).updated_at, abs=1)


def test_sessions_empty(capsys):
    code, out, err = run(capsys, "sessions")
    assert (code, out) == (0, "")
    assert "no sessions" in err
    assert json.loads(run(capsys, "sessions", "--json")[1]) == []


def test_show_prints_the_tree_with_the_active_path(capsys, chat):
    code, out, _ = run(capsys, "show", str(chat.id))
    assert code == 0
    header, *lines = out.splitlines()
    assert header.startswith(f"session {chat.id}: ") and "4 messages" in header
    assert len(lines) == 4
    assert lines[0].startswith("* #1 user: Tell me a story")
    assert lines[0].endswith("…") and len(lines[0].split(": ", 1)[1]) == 60
    assert lines[1] == "    [1/2] #2 assistant: Once upon a time there was"
    assert lines[2] == "*   [2/2] #3 assistant: A dragon named Earl Grey"
    assert lines[3] == "*         #4 user: more please"


def test_show_json(capsys, chat):
    code, out, _ = run(capsys, "show", str(chat.id), "--json")
    assert code == 0
    data = json.loads(out)
    assert data["session"]["id"] == chat.id
    assert data["session"]["active_leaf_id"] == 4
    messages = {m["id"]: m for m in data["messages"]}
    assert [(m["parent"], m["role"]) for m in data["messages"]] == \
        [(None, "user"), (1, "assistant"), (1, "assistant"), (3, "user")]
    assert messages[2]["text"] == "Once upon a time\nthere was"
    assert [m["id"] for m in data["messages"] if m["active"]] == [1, 3, 4]


def test_show_missing_session(capsys):
    code, out, err = run(capsys, "show", "42")
    assert_one_line_error(code, out, err)
    assert err == "llamachat: error: no session 42\n"


def test_show_a_long_linear_chat_stays_at_one_level(capsys, store):
    session = store.create_session(title="long")
    parent = None
    for index in range(120):
        parent = store.add_message(session.id, parent, "user" if index % 2 == 0 else "assistant",
                                   f"turn {index}").id
    code, out, _ = run(capsys, "show", str(session.id))
    lines = out.splitlines()[1:]
    assert code == 0 and len(lines) == 120
    assert all(line.startswith("  #") for line in lines)


# --- export, import ------------------------------------------------------------------


def test_export_markdown_active_branch_or_whole_tree(capsys, chat):
    code, active, _ = run(capsys, "export", str(chat.id), "--format", "md")
    assert code == 0
    assert "Earl Grey" in active and "more please" in active
    assert "Once upon a time" not in active
    code, whole, _ = run(capsys, "export", str(chat.id), "--tree")
    assert code == 0 and "Once upon a time" in whole and "Earl Grey" in whole


def test_export_json_to_a_file_and_import_it_back(capsys, store, chat, tmp_path):
    target = tmp_path / "out" / "chat.json"
    target.parent.mkdir()
    code, out, _ = run(capsys, "export", str(chat.id), "-o", str(target))
    assert code == 0 and str(target) in out
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    written = json.loads(target.read_text())
    expected = json.loads(json.dumps(export_json(store, chat.id)))
    written.pop("exported_at", None), expected.pop("exported_at", None)
    assert written == expected
    assert os.listdir(target.parent) == ["chat.json"]
    code, out, _ = run(capsys, "import", str(target))
    assert code == 0
    [new_id] = [int(line) for line in out.split()]
    assert new_id != chat.id
    original = [(m.role, m.text) for m in store.messages(chat.id)]
    assert [(m.role, m.text) for m in store.messages(new_id)] == original


def test_export_json_to_stdout(capsys, chat):
    code, out, _ = run(capsys, "export", str(chat.id), "--format", "json")
    assert code == 0
    assert "Earl Grey" in json.dumps(json.loads(out))


def test_export_errors(capsys, chat, tmp_path):
    assert_one_line_error(*run(capsys, "export", "99"), words="no session 99")
    missing_dir = tmp_path / "nowhere" / "x.md"
    assert_one_line_error(*run(capsys, "export", str(chat.id), "-o", str(missing_dir)),
                          words="does not exist")


def test_import_errors(capsys, tmp_path):
    assert_one_line_error(*run(capsys, "import", str(tmp_path / "absent.json")))
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert_one_line_error(*run(capsys, "import", str(bad)), words="bad.json")


# --- rename, delete ------------------------------------------------------------------


def test_rename(capsys, store, chat):
    code, out, _ = run(capsys, "rename", str(chat.id), "Tea", "dragons")
    assert code == 0 and "Tea dragons" in out
    assert store.get_session(chat.id).title == "Tea dragons"
    assert_one_line_error(*run(capsys, "rename", "77", "x"), words="no session 77")


def test_delete_checks_every_id_first(capsys, store, chat):
    other = store.create_session(title="other")
    assert_one_line_error(*run(capsys, "delete", str(other.id), "123"), words="no session 123")
    assert {s.id for s in store.list_sessions()} == {chat.id, other.id}
    code, out, _ = run(capsys, "delete", str(chat.id), str(other.id))
    assert code == 0
    assert f"deleted session {chat.id}" in out and "4 messages" in out
    assert f"deleted session {other.id}: other" in out
    assert store.list_sessions() == []


# --- models, config ------------------------------------------------------------------


@pytest.fixture
def model_home(tmp_path, monkeypatch, shared_dir):
    home = tmp_path / "home"
    folder = home / "models"
    folder.mkdir(parents=True)
    shutil.copy(shared_dir / "models" / "stories260K.gguf", folder / "stories.gguf")
    (folder / "junk.gguf").write_bytes(b"junk")
    monkeypatch.setenv("HOME", str(home))
    for name in ("HF_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME", "LMSTUDIO_MODELS_DIR", "LLAMA_CACHE"):
        monkeypatch.delenv(name, raising=False)
    paths.config_file().parent.mkdir(parents=True)
    paths.config_file().write_text('model_dirs = ["~/models"]\n')
    return folder


def test_models_lists_cards(capsys, model_home):
    code, out, _ = run(capsys, "models")
    assert code == 0
    header, *rows = out.splitlines()
    assert header.split()[:3] == ["NAME", "ARCH", "PARAMS"]
    stories = next(row for row in rows if "stories.gguf" in row)
    assert "plain" in stories and "1.2 MB" in stories and "F32" in stories
    junk = next(row for row in rows if "junk.gguf" in row)
    assert "not a GGUF file" in junk


def test_models_json(capsys, model_home):
    code, out, _ = run(capsys, "models", "--json")
    assert code == 0
    cards = {Path(c["path"]).name: c for c in json.loads(out)}
    assert cards["stories.gguf"]["memory_kind"] == "plain"
    assert cards["stories.gguf"]["file_size"] == (model_home / "stories.gguf").stat().st_size
    assert cards["stories.gguf"]["context_length"] == 2048
    assert cards["junk.gguf"]["error"]


def test_models_none_found(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "empty-home"))
    for name in ("HF_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME", "LMSTUDIO_MODELS_DIR", "LLAMA_CACHE"):
        monkeypatch.delenv(name, raising=False)
    code, out, err = run(capsys, "models")
    assert (code, out) == (0, "")
    assert "no models found" in err and "huggingface" in err


def test_config_path_and_init(capsys):
    code, out, _ = run(capsys, "config", "--path")
    assert (code, out.strip()) == (0, str(paths.config_file()))
    assert not paths.config_file().exists()
    code, out, _ = run(capsys, "config", "--init")
    assert code == 0
    assert paths.config_file().read_text() == config_template()
    paths.config_file().write_text("# mine\n")
    assert_one_line_error(*run(capsys, "config", "--init"), words="already exists")
    assert paths.config_file().read_text() == "# mine\n"


# --- a real process ------------------------------------------------------------------


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
