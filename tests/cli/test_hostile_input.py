"""Hostile input to the core and the command line: nothing runs, nothing is lost.

A chat template that reaches for Python internals, model text full of terminal escapes,
a conversation longer than the context, broken model files and a model replaced on disk
under its checkpoints. Real tiny models and real ``llamachat`` processes where the
behaviour depends on llama.cpp; the command line in-process where it does not.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from sessions import cli
from sessions.api.chat import EngineSettings, SessionController
from sessions.errors import ContextOverflow
from sessions.events import NoticeRaised
from sessions.sampling import SamplingSettings
from sessions.store import SessionStore
from sessions.synth import make_model
from sessions.text_safety import InertStream, inert, json_for_terminal

MARKER = Path(tempfile.gettempdir()) / f"llamachat-template-escape-{os.getuid()}"
HOSTILE_TEMPLATE = "{{ cycler.__init__.__globals__.os.popen('touch " + str(MARKER) + "').read() }}"
EVIL = "Hi \x1b]0;pwned\x07 \x1b]52;c;SGVsbG8=\x07 \x1b[2J\x1b[H \x9b31m bell\x07 \x85 over\rwrite"
RAW = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def run_cli(*argv: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sessions.cli", *argv], capture_output=True, text=True,
                          env=env or os.environ.copy(), timeout=180)


def ask(*argv: str, env: dict | None = None) -> tuple[str, dict]:
    done = run_cli("ask", "--temp", "0", "--stats", *argv, env=env)
    assert done.returncode == 0, done.stderr
    assert not RAW.search(done.stdout)  # the reply is printed inert, whatever the model wrote
    return done.stdout, json.loads(done.stderr.strip().splitlines()[-1])


@pytest.fixture
def real_controller():
    """``real_controller(n_ctx, max_tokens, listener)``: a controller over llama.cpp, closed after the test."""
    from sessions.engine.factory import llama_engine_factory

    made: list[tuple[SessionController, SessionStore]] = []

    def make(n_ctx: int, max_tokens: int, listener=lambda event: None) -> SessionController:
        store = SessionStore.open()
        controller = SessionController(store, engine_factory=llama_engine_factory(None),
                                       settings=EngineSettings(n_ctx=n_ctx, n_batch=64, threads=1),
                                       sampling=SamplingSettings(temperature=0.0, max_tokens=max_tokens),
                                       listener=listener)
        made.append((controller, store))
        return controller

    yield make
    for controller, store in made:
        controller.close()
        store.close()


# -- terminal escapes ----------------------------------------------------------------------------

def test_text_safety_helpers():
    assert inert(EVIL) == ("Hi ␛]0;pwned␇ ␛]52;c;SGVsbG8=␇ ␛[2J␛[H \ufffd31m bell␇ \ufffd over␍write")
    document = json.dumps({"text": EVIL}, ensure_ascii=False)
    assert RAW.search(document)  # json.dumps leaves C1 controls raw...
    safe = json_for_terminal(document)
    assert not RAW.search(safe) and json.loads(safe) == {"text": EVIL}  # ...escaped, the same value
    stream = InertStream()
    assert stream.push("one\r") + stream.push("\ntwo\r") + stream.push("three\x1b") + stream.finish() \
        == "one\ntwo␍three␛"


def test_show_sessions_and_export_keep_escapes_off_the_terminal(capsys, tmp_path):
    with SessionStore.open() as store:
        session = store.create_session(title="Title\x1b]0;pwned\x07 chat")
        user = store.add_message(session.id, None, "user", "Title\x1b]0;pwned\x07 " + EVIL)
        store.add_message(session.id, user.id, "assistant", EVIL)
    for argv in (["show", str(session.id)], ["sessions"], ["show", str(session.id), "--json"],
                 ["export", str(session.id), "--format", "json"]):
        assert cli.main(argv) == 0
        out = capsys.readouterr().out
        assert not RAW.search(out), (argv, RAW.findall(out)[:5])
        assert "␛]0;pwned" in out or "\\u001b]0;pwned" in out
    assert cli.main(["show", str(session.id), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["messages"][1]["text"] == EVIL  # data stays exact
    assert cli.main(["export", str(session.id), "-o", str(tmp_path / "chat.md")]) == 0
    assert EVIL in (tmp_path / "chat.md").read_bytes().decode()  # a file is not a terminal
    assert cli.main(["export", str(session.id)]) == 0
    assert EVIL in capsys.readouterr().out  # nor is a pipe...


BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"


def test_bidi_overrides_never_reach_the_terminal(capsys):
    """U+202E makes what follows read backwards: the screen would show another text than the
    one stored ("Trojan Source"). Titles and messages show them as U+FFFD."""
    spoof = "access granted \u202e\u2066 // check later\u2069 \u2066"
    with SessionStore.open() as store:
        session = store.create_session(title="pay \u202eteg.exe")
        store.add_message(session.id, None, "user", spoof + BIDI)
    for argv in (["show", str(session.id)], ["sessions"], ["sessions", "--json"],
                 ["show", str(session.id), "--json"]):
        assert cli.main(argv) == 0
        out = capsys.readouterr().out
        assert not any(char in out for char in BIDI), argv
    assert cli.main(["show", str(session.id), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["messages"][0]["text"] == spoof + BIDI  # data stays exact
    assert inert("a\u202eb\u200fc") == "a\ufffdb\u200fc"  # marks only place punctuation: kept


def test_markdown_exported_to_a_terminal_is_inert(capsys, monkeypatch):
    with SessionStore.open() as store:
        session = store.create_session(title="chat")
        store.add_message(session.id, None, "user", EVIL)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)  # ...but a terminal is
    assert cli.main(["export", str(session.id)]) == 0
    out = capsys.readouterr().out
    assert not RAW.search(out) and inert(EVIL) in out


# -- a hostile chat template ---------------------------------------------------------------------

@pytest.mark.engine
def test_a_template_reaching_for_python_internals_is_refused_and_the_chat_goes_on(real_controller):
    MARKER.unlink(missing_ok=True)
    model = make_model("llama", "tiny", chat_template=HOSTILE_TEMPLATE)
    notices: list[NoticeRaised] = []
    controller = real_controller(512, 8, lambda e: notices.append(e) if isinstance(e, NoticeRaised) else None)
    controller.load_model(model)
    assert controller.engine.info.chat_template == HOSTILE_TEMPLATE
    assert len(notices) == 1 and "forbidden" in notices[0].text and "ChatML" in notices[0].text
    controller.new_session()
    controller.send("Hello there")
    assert controller.generate_reply().stats.tokens_generated > 0

    done = run_cli("ask", "-m", str(model), "--max-tokens", "8", "Hello there")
    assert done.returncode == 0 and done.stdout.strip()
    warning = [line for line in done.stderr.splitlines() if "warning" in line]
    assert len(warning) == 1 and "forbidden" in warning[0] and "ChatML template instead" in warning[0]
    assert not MARKER.exists()


# -- longer than the context ---------------------------------------------------------------------

@pytest.mark.engine
def test_a_reply_reaching_n_ctx_is_kept_and_the_next_turn_continues_in_a_trimmed_branch(real_controller):
    controller = real_controller(256, 1000)
    controller.load_model(make_model("llama", "tiny"))
    controller.new_session(system_prompt="Be brief.")
    controller.send(" ".join(["word"] * 95))
    reply = controller.generate_reply()
    assert reply.stats.stop_reason == "context_full"
    assert reply.stats.tokens_evaluated + reply.stats.tokens_generated == 256  # stopped exactly at the end
    assert controller.snapshot().head.id == reply.id and reply.text  # kept and stored
    old = controller.send("And then?")
    old_ids = [m.id for m in controller.snapshot().path]
    with pytest.raises(ContextOverflow, match="context holds 256") as overflow:
        controller.generate_reply()
    assert overflow.value.tokens > 256 and overflow.value.n_ctx == 256

    head = controller.trim_to_fit()
    tree = controller.snapshot().tree
    new_path = tree.path_to(head.id)
    assert [(m.role, m.text) for m in new_path] == [("system", "Be brief."), ("user", "And then?")]
    assert new_path[0].parent_id is None and len(tree.roots()) == 2
    assert [m.id for m in tree.path_to(old.id)] == old_ids  # the old branch is untouched
    second = controller.generate_reply()
    assert second.parent_id == head.id and second.stats.tokens_generated > 0


@pytest.mark.engine
def test_trimming_keeps_the_latest_turns_that_fit_and_refuses_a_message_alone_too_long(real_controller):
    controller = real_controller(256, 24)
    controller.load_model(make_model("llama", "tiny"))
    controller.new_session(system_prompt="Be brief.")
    texts = []
    for n in range(20):
        texts.append(f"Question {n}: tell me about the sea.")
        controller.send(texts[-1])
        try:
            controller.generate_reply()
        except ContextOverflow:
            break
    else:
        pytest.fail("the conversation never outgrew the context")
    old_path = list(controller.snapshot().path)
    head = controller.trim_to_fit()
    new_path = controller.snapshot().tree.path_to(head.id)
    assert new_path[0].role == "system" and head.text == texts[-1]
    assert [m.text for m in new_path[1:]] == [m.text for m in old_path[len(old_path) - len(new_path) + 1:]]
    assert 2 < len(new_path) < len(old_path)
    assert controller.routes.plan_for(head.id).target_len <= 256 - 24  # room for a whole reply
    controller.generate_reply()

    controller.new_session()
    controller.send(" ".join(["word"] * 200))
    with pytest.raises(ContextOverflow):
        controller.generate_reply()
    with pytest.raises(ContextOverflow, match=r"this message alone is \d+ tokens; the context holds 256"):
        controller.trim_to_fit()


@pytest.mark.engine
def test_ask_reports_an_overflow_in_one_line_and_trims_when_asked():
    model = str(make_model("llama", "tiny"))
    _, first = ask("-m", model, "-c", "256", "--max-tokens", "1000", " ".join(["word"] * 95))
    assert first["stop_reason"] == "context_full"
    session = str(first["session"])
    done = run_cli("ask", "-m", model, "-c", "256", "--session", session, "And then?")
    assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1
    assert "context holds 256" in done.stderr and f"ask --session {session} --trim" in done.stderr
    text, trimmed = ask("-m", model, "-c", "256", "--max-tokens", "8", "--session", session, "--trim")
    assert text.strip() and trimmed["tokens_generated"] > 0
    with SessionStore.open() as store:
        tree = store.load_tree(int(session))
    answered = tree.get(trimmed["parent"])
    assert answered.text == "And then?" and answered.parent_id is None  # a copy, in a new branch
    assert len(tree.roots()) == 2 and len(tree) == 5  # the first branch keeps its 3 messages


# -- broken model files --------------------------------------------------------------------------

@pytest.fixture
def bad_models(tmp_path) -> dict[str, Path]:
    text = tmp_path / "notes.gguf"
    text.write_text("not a model at all\n")
    truncated = tmp_path / "half.gguf"
    model = make_model("llama", "tiny").read_bytes()
    truncated.write_bytes(model[: len(model) // 2])
    return {"not GGUF": text, "truncated": truncated, "missing": tmp_path / "gone.gguf"}


@pytest.mark.engine
@pytest.mark.parametrize("kind", ["not GGUF", "truncated", "missing"])
def test_a_bad_model_file_is_one_plain_line_and_exit_1(bad_models, kind, capsys):
    path = str(bad_models[kind])
    words = {"not GGUF": "not a GGUF file", "truncated": "incomplete file", "missing": "not found"}[kind]
    assert cli.run(["-m", path]) == 1  # a status, not the options the app would start with
    assert cli.main(["ask", "-m", path, "hello"]) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 2 and all(line.startswith("llamachat: error: ") for line in lines)
    assert all(words in line or "no such model file" in line for line in lines), lines


# -- a model replaced on disk under its checkpoints ----------------------------------------------

def test_a_file_rewritten_in_place_with_its_old_mtime_gets_a_new_fingerprint(tmp_path):
    from sessions.llama.fingerprint import model_fingerprint

    path = tmp_path / "model.gguf"
    path.write_bytes(b"A" * 4096)
    before = path.stat()
    first = model_fingerprint(path)
    with open(path, "r+b") as handle:  # same inode, same size...
        handle.write(b"B" * 4096)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # ...and the old mtime (cp -p)
    assert (path.stat().st_ino, path.stat().st_size, path.stat().st_mtime_ns) == \
        (before.st_ino, before.st_size, before.st_mtime_ns)
    assert model_fingerprint(path) != first


@pytest.mark.engine
def test_checkpoints_and_frozen_tokens_of_a_replaced_model_are_never_used(tmp_path):
    path = tmp_path / "model.gguf"
    old, new = make_model("llama", "tiny", seed=0), make_model("llama", "tiny", seed=1)
    assert old.stat().st_size == new.stat().st_size
    shutil.copyfile(old, path)
    _, first = ask("-m", str(path), "--max-tokens", "12", "Hello there, how are you?")
    session = str(first["session"])
    _, second = ask("--session", session, "--max-tokens", "12", "Tell me more.")
    assert second["tokens_restored"] > 0  # the checkpoints work while the file is the same
    inode = path.stat().st_ino
    with open(path, "r+b") as handle:  # overwritten in place: same name, size and inode
        handle.write(new.read_bytes())
    assert path.stat().st_ino == inode

    text, third = ask("--session", session, "--max-tokens", "12", "And then?")
    assert third["tokens_restored"] == 0
    no_checkpoints = tmp_path / "plain.toml"
    no_checkpoints.write_text("[checkpoints]\nenabled = false\n")
    env = {**os.environ, "LLAMACHAT_CONFIG": str(no_checkpoints)}
    fresh, again = ask("--session", session, "--max-tokens", "12", "--regenerate", str(third["message"]), env=env)
    assert again["tokens_restored"] == 0 and again["tokens_evaluated"] == third["tokens_evaluated"]
    assert fresh == text  # the same reply as a from-scratch computation with the new model

    with SessionStore.open() as store:
        frozen = store.session_tokens(int(session))
        prints = {fp for by_model in frozen.values() for fp in by_model}
        assert len(prints) == 2  # every message was tokenized again for the new file
        path_ids = [m.id for m in store.load_tree(int(session)).path_to(third["message"])]
        assert all(len(frozen[mid]) == 2 for mid in path_ids[:-2])  # the turns from before the swap
        assert all(len(frozen[mid]) == 1 for mid in path_ids[-2:])  # the turn after it
