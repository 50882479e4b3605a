"""Fixtures and helpers shared by the command-line tests."""

from __future__ import annotations

import pytest

from sessions.cli import main
from sessions.store import SessionStore
from tui import entry

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
    """``llamachat ARGV`` through the entry point, ``run_app`` standing in for the app;
    without it, ``python -m sessions.cli ARGV`` (the subcommands alone)."""
    if run_app is None:
        code = main(list(argv))
    else:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(entry, "run_app", lambda options: run_app(options) or 0)
            code = entry.main(list(argv))
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


def long_turns(store: SessionStore, turn: str, count: int = 3) -> int:
    """A session of ``count`` exchanges of ``turn``, the head at its last reply; its id.

    For the tests of a branch longer than the context (``ask --trim``, retries)."""
    session = store.create_session()
    parent = None
    for n in range(count):
        parent = store.add_message(session.id, parent, "user", f"{n}. {turn}").id
        parent = store.add_message(session.id, parent, "assistant", f"Noted {n}. {turn}").id
    store.set_active_leaf(session.id, parent)
    return session.id


def models_home(tmp_path, monkeypatch):
    """A home folder whose ``~/models`` is the only place ``llamachat models`` searches (the
    download tools' caches moved out of reach, a config naming the folder); returns that folder."""
    from pathlib import Path

    from sessions import paths

    folder = Path(tmp_path) / "home" / "models"
    folder.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(folder.parent))
    for name in ("HF_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME", "LMSTUDIO_MODELS_DIR", "LLAMA_CACHE"):
        monkeypatch.delenv(name, raising=False)
    paths.config_file().parent.mkdir(parents=True, exist_ok=True)
    paths.config_file().write_text('model_dirs = ["~/models"]\n')
    return folder
