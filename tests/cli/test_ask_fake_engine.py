"""``llamachat ask`` in-process over the fake engine: which model, template refusals, stops.

The command runs as a user runs it (``main``, config file, store, signal handlers); only
the llama.cpp engine is the fake one, so the rules are checked in milliseconds:

- the model is chosen as the app chooses it: the demo model with ``--demo`` (made where
  the app makes it), else ``-m``, else the session's own model while its file is there,
  else ``model`` of config.toml; and the model used becomes the chat's own (an imported
  chat answered with ``-m`` reopens with that model next time);
- a chat template that refuses the conversation is an error in one sentence, not an
  "unexpected" one;
- a Ctrl+C that arrives while ``--trim`` makes the shorter branch stops there: no reply
  is written after it.
"""

from __future__ import annotations

import functools
import os
import signal
from pathlib import Path

import pytest

from sessions import paths
from sessions.api import runtime
from sessions.cli import main
from sessions.store import SessionStore
from sessions.templates.chat_template import ChatTemplate
from tests.cli_support import long_turns
from tests.tui.fake_engine import HOLD_LIMIT_SECONDS, FakeEngineFactory, FakeScript

REFUSING = (
    "{% for m in messages %}{% if 'forbidden' in m['content'] %}"
    "{{ raise_exception('this template refuses forbidden words') }}{% endif %}"
    "<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@pytest.fixture
def factory(monkeypatch) -> FakeEngineFactory:
    """The engines ``ask`` makes are fake ones, kept here to look at."""
    made = FakeEngineFactory(FakeScript())
    monkeypatch.setattr(runtime, "open_runtime", functools.partial(runtime.open_runtime, engine_factory=made))
    monkeypatch.delenv("LLAMACHAT_DEBUG", raising=False)
    return made


@pytest.fixture
def models(tmp_path) -> dict[str, Path]:
    """Three model files (the fake engine reads none of them; the choice looks for them)."""
    folder = tmp_path / "models"
    folder.mkdir()
    found = {}
    for name in ("own", "configured", "given"):
        found[name] = folder / f"{name}.gguf"
        found[name].write_bytes(b"GGUF")
    return found


def configure(model: Path) -> None:
    paths.config_file().parent.mkdir(parents=True, exist_ok=True)
    paths.config_file().write_text(f'model = "{model}"\n')


def ask(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["ask", "--temp", "0", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def saved_session(model: Path | None = None, *, imported: bool = False) -> int:
    """A session of one question and its answer that used ``model`` (imported: names it only)."""
    with SessionStore.open() as store:
        fingerprint = None if imported or model is None else f"fake-{model.name}"
        session = store.create_session(model_path=str(model) if model else None, model_fingerprint=fingerprint)
        question = store.add_message(session.id, None, "user", "hello")
        reply = store.add_message(session.id, question.id, "assistant", "hi there")
        store.set_active_leaf(session.id, reply.id)
        return session.id


def model_of(session_id: int) -> tuple[str | None, str | None]:
    with SessionStore.open() as store:
        session = store.get_session(session_id)
        return session.model_path, session.model_to_reopen


# --- which model -------------------------------------------------------------------------


def test_a_session_is_answered_with_its_own_model_not_the_configured_one(capsys, factory, models):
    configure(models["configured"])
    session = saved_session(models["own"])
    code, out, err = ask(capsys, "--session", str(session), "and now?")
    assert code == 0, err
    assert [e.info.path.name for e in factory.engines] == ["own.gguf"]
    assert model_of(session) == (str(models["own"]), str(models["own"]))


def test_a_session_whose_model_is_gone_falls_back_to_the_configured_one_and_keeps_it(capsys, factory, models):
    configure(models["configured"])
    session = saved_session(models["own"])
    models["own"].unlink()
    code, _, err = ask(capsys, "--session", str(session), "and now?")
    assert code == 0, err
    assert [e.info.path.name for e in factory.engines] == ["configured.gguf"]
    assert model_of(session)[1] == str(models["configured"])


def test_dash_m_wins_and_becomes_the_chat_model(capsys, factory, models):
    configure(models["configured"])
    session = saved_session(models["own"])
    code, _, err = ask(capsys, "-m", str(models["given"]), "--session", str(session), "and now?")
    assert code == 0, err
    assert [e.info.path.name for e in factory.engines] == ["given.gguf"]
    assert model_of(session) == (str(models["given"]), str(models["given"]))
    code, _, err = ask(capsys, "--session", str(session), "and then?")  # reopened: the chat's model now
    assert code == 0, err
    assert [e.info.path.name for e in factory.engines] == ["given.gguf", "given.gguf"]


def test_an_imported_chat_answered_with_dash_m_reopens_with_that_model(capsys, factory, models):
    session = saved_session(Path("/elsewhere/named-by-the-file.gguf"), imported=True)
    code, _, err = ask(capsys, "--session", str(session), "hello?")
    assert code == 1 and "was imported" in err and "pass -m PATH" in err
    code, _, err = ask(capsys, "-m", str(models["given"]), "--session", str(session), "hello?")
    assert code == 0, err
    assert model_of(session) == (str(models["given"]), str(models["given"]))


def test_a_gone_model_without_another_is_said_in_one_line(capsys, factory, models):
    session = saved_session(models["own"])
    models["own"].unlink()
    code, out, err = ask(capsys, "--session", str(session), "and now?")
    assert (code, out) == (1, "")
    assert err == (f"llamachat: error: the model of session {session}, {models['own']}, is not there any "
                   "more; pass -m PATH\n")
    assert factory.engines == []


def test_demo_answers_with_the_demo_model_the_app_uses(capsys, factory):
    from sessions.api.chat import ModelCatalogue

    code, _, err = ask(capsys, "--demo", "hello?")
    assert code == 0, err
    assert [e.info.path for e in factory.engines] == [ModelCatalogue().demo_model()]


def test_a_demo_model_that_cannot_be_made_is_said_in_one_line(capsys, factory, monkeypatch):
    import sessions.synth

    def disk_full(*_args, **_kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(sessions.synth, "make_model", disk_full)
    code, out, err = ask(capsys, "--demo", "hello?")
    assert (code, out) == (1, "")
    assert err.startswith("llamachat: error: the demo model could not be made: ") and err.count("\n") == 1
    assert "No space left on device" in err and factory.engines == []


# --- a template that refuses ------------------------------------------------------------


def test_a_template_refusal_is_one_sentence_not_an_unexpected_error(capsys, factory, models):
    factory.script.template = ChatTemplate.compile(REFUSING)
    code, out, err = ask(capsys, "-m", str(models["given"]), "a forbidden question")
    assert (code, out) == (1, "")
    assert err.startswith("llamachat: error: the model's chat template ") and err.count("\n") == 1
    assert "refuses forbidden words" in err and "unexpected" not in err and "LLAMACHAT_DEBUG" not in err


# --- a stop while --trim makes the shorter branch ----------------------------------------

TURN = "The quick brown fox jumps over the lazy dog near the river bank. " * 3


def test_a_ctrl_c_while_trimming_writes_no_reply(capsys, factory, models, monkeypatch):
    """The stop arrives inside the trim job: the trim's template renders stop with it (nothing
    is trimmed), and no reply follows; the message stays where it was sent."""
    from sessions.controller import context_fit

    factory.script.n_ctx = 512
    with SessionStore.open() as store:  # about 1,200 tokens (bytes) for a 512-token context
        session_id = long_turns(store, TURN)
    fit = context_fit.fit_branch

    def interrupted_fit(store, engine, *args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)  # reaches the main thread: the work thread blocks it
        assert engine._abort.wait(HOLD_LIMIT_SECONDS)  # the handler ran: ask's stop is set
        return fit(store, engine, *args, **kwargs)

    monkeypatch.setattr(context_fit, "fit_branch", interrupted_fit)
    code, out, err = ask(capsys, "-m", str(models["given"]), "--session", str(session_id), "--trim", "short")
    with SessionStore.open() as stored:
        messages = stored.messages(session_id)
        head = stored.get_session(session_id).active_leaf_id
    assert code == 130, err
    assert [m.role for m in messages].count("assistant") == 3  # the three stored before: no new reply
    new_head = messages[-1]
    assert new_head.id == head and new_head.role == "user" and new_head.text == "short"
    assert err.splitlines()[-1] == ("llamachat: stopped by SIGINT before the reply started: "
                                    f"your message is saved (message {head})")
    assert out == "" and factory.script.made == 0  # the fake wrote no reply at all
