"""A template that refuses a message at message time: the failed ``ask``, retried, stores
its question once (the branch stays answerable, nothing piles up)."""

from __future__ import annotations

import pytest

from sessions.store import SessionStore
from sessions.synth import make_model
from tests.ask_process import AskProcess

pytestmark = pytest.mark.engine

TEMPLATE = (
    "{% for m in messages %}{% if 'forbidden' in m['content'] %}"
    "{{ raise_exception('this template refuses forbidden words') }}{% endif %}"
    "<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def test_a_template_error_retried_stores_the_question_once(tmp_path):
    model = str(make_model("llama", "tiny"))
    template = tmp_path / "strict.jinja"
    template.write_text(TEMPLATE)

    def ask(*argv: str) -> tuple[int, str]:
        process = AskProcess("-m", model, "--chat-template-file", str(template), "--temp", "0",
                             "--max-tokens", "5", *argv)
        status = process.drain()
        assert "Traceback" not in process.stderr
        return status, process.stderr

    assert ask("a fine question")[0] == 0
    for _ in range(3):
        status, err = ask("--session", "1", "a forbidden question")
        assert status == 1 and "refuses forbidden words" in err and len(err.splitlines()) == 1
    with SessionStore.open() as store:
        users = [m.text for m in store.messages(1) if m.role == "user"]
    assert users == ["a fine question", "a forbidden question"]
    status, err = ask("--session", "1", "--edit", "3", "a fine one again")  # the branch is still answerable
    assert status == 0, err
