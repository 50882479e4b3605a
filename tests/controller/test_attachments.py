"""Text files attached to a message: the fenced block, and every file refused in one sentence.

The controller's part counts the block's tokens with a real tiny model and refuses a file
longer than the context; the rest is the core's, without a model.
"""

from __future__ import annotations

import os
import threading

import pytest

from sessions.api.chat import EngineSettings, SessionController
from sessions.attachments import (
    MAX_ATTACHMENT_BYTES,
    Attachment,
    AttachmentError,
    appended,
    compose_message,
    fenced,
    read_attachment,
)
from sessions.sampling import SamplingSettings
from sessions.store import SessionStore
from sessions.synth import make_model


def test_the_block_is_fenced_and_named_after_the_file(tmp_path):
    (tmp_path / "notes.txt").write_text("first line\nsecond line\n")
    attachment = read_attachment(tmp_path / "notes.txt")
    assert attachment == Attachment("notes.txt", "first line\nsecond line\n")
    assert attachment.block == "```notes.txt\nfirst line\nsecond line\n```"


def test_the_fence_is_longer_than_any_backtick_run_in_the_file():
    readme = "Run:\n\n```sh\nmake\n```\n\nand ````` five in a row."
    block = fenced("README.md", readme)
    assert block.startswith("``````README.md\n") and block.endswith("\n``````")
    assert block.count("``````") == 2
    assert fenced("a.txt", "no newline at the end") == "```a.txt\nno newline at the end\n```"
    assert fenced("empty.txt", "") == "```empty.txt\n```"


def test_a_name_a_fence_cannot_hold_is_made_safe(tmp_path):
    odd = tmp_path / "my `notes`\x1b[31m v2.txt"
    odd.write_text("x")
    name = read_attachment(odd).name
    assert name == "my__notes__[31m_v2.txt"
    assert "`" not in name and "\x1b" not in name and " " not in name


def test_the_message_is_the_text_then_each_file(tmp_path):
    one, two = Attachment("a.py", "print(1)\n"), Attachment("b.md", "# B\n")
    assert compose_message("  Compare these.\n", [one, two]) == (
        "Compare these.\n\n```a.py\nprint(1)\n```\n\n```b.md\n# B\n```")
    assert compose_message("", [one]) == "```a.py\nprint(1)\n```"
    assert appended("draft  \n\n", one) == "draft\n\n```a.py\nprint(1)\n```"
    assert appended("", one) == one.block


def test_a_utf8_bom_and_windows_line_endings_are_not_part_of_the_text(tmp_path):
    (tmp_path / "bom.txt").write_bytes("\ufeffhello\r\nworld\r\n".encode())
    assert read_attachment(tmp_path / "bom.txt").text == "hello\nworld\n"


def _refusal(path, **kwargs) -> str:
    with pytest.raises(AttachmentError) as caught:
        read_attachment(path, **kwargs)
    words = str(caught.value)
    assert "\n" not in words and words.startswith("cannot attach ")
    return words


def test_binary_files_are_refused(tmp_path):
    (tmp_path / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR")
    assert _refusal(tmp_path / "image.png") == "cannot attach image.png: it holds NUL bytes, so it is not text"
    (tmp_path / "latin1.txt").write_bytes("café".encode("latin-1"))
    assert _refusal(tmp_path / "latin1.txt") == (
        "cannot attach latin1.txt: it is not UTF-8 text (byte 0xe9 at offset 3)")


def test_a_file_over_the_limit_is_refused_unread(tmp_path):
    big = tmp_path / "big.log"
    big.write_text("x" * 2001)
    assert _refusal(big, limit=2000) == (
        "cannot attach big.log: it is 2,001 bytes, more than the 2,000 bytes an attachment may be")
    assert read_attachment(big, limit=2001).text == "x" * 2001
    big.write_text("x" * 3500)
    assert _refusal(big, limit=2000) == "cannot attach big.log: it is 3.5 KB, more than the 2.0 KB an attachment may be"
    assert MAX_ATTACHMENT_BYTES >= 1_000_000  # a long source file or a paper fits


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)
    result: list[str] = []
    reader = threading.Thread(target=lambda: result.append(_refusal(fifo)), daemon=True)
    reader.start()
    reader.join(timeout=30)
    assert result == ["cannot attach pipe.txt: it is not a regular file (a pipe or a device)"]


def test_folders_devices_and_missing_files_are_refused(tmp_path):
    assert _refusal(tmp_path) == f"cannot attach {tmp_path.name}: it is a folder"
    assert _refusal("/dev/zero") == "cannot attach zero: it is not a regular file (a pipe or a device)"
    assert _refusal(tmp_path / "gone.txt") == f"cannot attach {tmp_path / 'gone.txt'}: there is no such file"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_an_unreadable_file_is_refused(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("x")
    secret.chmod(0)
    assert "Permission denied" in _refusal(secret)


@pytest.mark.engine
def test_the_controller_counts_the_blocks_tokens_and_refuses_a_file_longer_than_the_context(tmp_path):
    from sessions.engine.factory import llama_engine_factory

    (tmp_path / "short.txt").write_text("A llama is a domesticated South American camelid.\n")
    (tmp_path / "long.txt").write_text("llama " * 600)
    with SessionStore.open() as store:
        controller = SessionController(store, engine_factory=llama_engine_factory(None),
                                       settings=EngineSettings(n_ctx=256, n_batch=64, threads=1),
                                       sampling=SamplingSettings(temperature=0.0, max_tokens=4))
        try:
            unloaded = controller.attach_file(tmp_path / "short.txt")
            assert unloaded.tokens is None  # no model yet: counted once one is loaded
            controller.new_session()
            controller.load_model(make_model("llama", "tiny"))
            short = controller.attach_file(tmp_path / "short.txt")
            assert short.tokens == len(controller.engine.tokenize(short.block, add_bos=False)) > 10
            with pytest.raises(AttachmentError, match=r"^cannot attach long\.txt: its [\d,]+ tokens are more "
                                                      r"than the model's context of 256$"):
                controller.attach_file(tmp_path / "long.txt")
        finally:
            controller.close()
