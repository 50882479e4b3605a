"""``llamachat ask`` says which chat template it fell back to, on stderr, and still answers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sessions import paths
from sessions.synth import make_model
from tests.templates.test_chat_template import HOSTILE

pytestmark = pytest.mark.engine


def ask(*argv: str) -> tuple[str, list[str]]:
    """The reply and the warning lines of one ``ask`` run, in a process of its own."""
    done = subprocess.run([sys.executable, "-m", "sessions.cli", "ask", "--temp", "0", "--max-tokens", "6", *argv],
                          capture_output=True, text=True, env=os.environ.copy(), timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and done.stdout.strip()
    return done.stdout, [line for line in done.stderr.splitlines() if "warning" in line]


def test_a_model_without_a_template_gets_the_one_its_vocabulary_speaks():
    _, warnings = ask("-m", str(make_model("llama", "tiny", markers="gemma")), "Hello there")
    assert warnings == ["llamachat: warning: the model has no chat template; using the Gemma template "
                        "instead (its vocabulary has <start_of_turn>, <end_of_turn>)"]


def test_a_base_model_is_called_one_and_still_answers():
    _, warnings = ask("-m", str(make_model("llama", "tiny", markers="none")), "Once upon a time")
    assert len(warnings) == 1
    assert ("this looks like a base model (its vocabulary has no chat markers): replies will continue your "
            "text rather than answer it") in warnings[0]


def test_a_hostile_template_file_is_refused_in_one_line_and_the_model_template_is_used():
    hostile = HOSTILE / "internals_subclasses.jinja"
    _, warnings = ask("-m", str(make_model("llama", "tiny")), "--chat-template-file", str(hostile), "Hello")
    assert len(warnings) == 1
    assert warnings[0].startswith(f"llamachat: warning: the chat template in {hostile} tried to access a forbidden")
    assert warnings[0].endswith("; using the model's own template instead")


def test_a_config_table_names_the_template_file_relative_to_the_config():
    model = make_model("llama", "tiny", markers="llama3")
    folder = paths.config_dir()
    (folder / "templates").mkdir(parents=True)
    (folder / "templates" / "evil.jinja").write_text("{{ cycler.__init__.__globals__ }}")
    paths.config_file().write_text(f'[models."{model.name}"]\nchat_template_file = "templates/evil.jinja"\n')
    _, warnings = ask("-m", str(model), "Hello")
    evil = Path(folder) / "templates" / "evil.jinja"
    assert len(warnings) == 1
    assert warnings[0].startswith(f"llamachat: warning: the chat template in {evil} tried to access a forbidden")
    assert ", and the model has no chat template; using the Llama 3 template instead" in warnings[0]
