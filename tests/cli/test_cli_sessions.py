"""The session subcommands in-process: sessions, show, export, import, rename, delete, models, config."""

from __future__ import annotations

import json
import os
import shutil
import stat
from datetime import datetime
from pathlib import Path

import pytest

from sessions import paths
from sessions.config import config_template
from sessions.exchange import export_json
from tests.cli_support import assert_one_line_error, models_home, run

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
    assert set(entry) == {"id", "title", "updated_at", "message_count", "served"}
    assert entry["id"] == chat.id and entry["title"] == chat.title
    assert entry["message_count"] == 4 and entry["served"] is False
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
    code, out, _ = run(capsys, "import", str(target), "--ids")
    assert code == 0
    [new_id] = [int(line) for line in out.split()]
    code, out, _ = run(capsys, "import", str(target))
    [line] = out.splitlines()
    assert code == 0 and line == f"Imported session {new_id + 1}: “{chat.title}”."
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
    folder = models_home(tmp_path, monkeypatch)
    shutil.copy(shared_dir / "models" / "stories260K.gguf", folder / "stories.gguf")
    (folder / "junk.gguf").write_bytes(b"junk")
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


def test_an_imported_chat_takes_the_configured_settings_its_file_does_not_name(capsys, store, tmp_path):
    config = Path(os.environ["LLAMACHAT_CONFIG"])
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("[sampling]\nmax_tokens = 321\ntemperature = 0.5\n")
    data = Path(__file__).resolve().parents[1] / "data" / "exchange"
    code, out, _ = run(capsys, "import", str(data / "llamacpp_webui_single.json"), "--ids")
    assert code == 0
    [from_webui] = [int(word) for word in out.split()]
    assert store.get_session(from_webui).sampling.max_tokens == 321
    ours = {"format": "llamachat-session", "format_version": 1,
            "session": {"title": "some named", "sampling": {"temperature": 0.2}, "created_at": 1.0, "active": 1},
            "messages": [{"id": 1, "parent": None, "role": "user", "text": "hi", "created_at": 1.0}]}
    path = tmp_path / "ours.json"
    path.write_text(json.dumps(ours))
    code, out, _ = run(capsys, "import", str(path), "--ids")
    assert code == 0
    [from_ours] = [int(word) for word in out.split()]
    sampling = store.get_session(from_ours).sampling
    assert (sampling.max_tokens, sampling.temperature) == (321, 0.2)  # the file's own value wins


def test_config_alone_shows_the_file_and_its_path(capsys):
    code, out, err = run(capsys, "config")
    assert code == 0 and err == ""
    assert str(paths.config_file()) in out and "no config file" in out and "--init" in out
    paths.config_file().parent.mkdir(parents=True)
    paths.config_file().write_text('model_dirs = ["~/models"]\n')
    code, out, err = run(capsys, "config")
    assert code == 0 and err == ""
    assert out.splitlines() == [f"# {paths.config_file()} (settings not written here have their defaults)",
                                'model_dirs = ["~/models"]']
