"""llama.cpp's continuation lines keep the level of the line they continue.

``GGML_LOG_LEVEL_CONT`` (5) is not a severity: the loader's progress dots come that way
after debug lines, and a long error arrives in pieces. Read as "above WARN" the dots
became warnings on the terminal, and an error's tail escaped ``held_errors``, which is
where a failure's reason is read from. The real ctypes callback is called, as llama.cpp
calls it.
"""

from __future__ import annotations

import gc
import logging
import subprocess
import sys

from sessions.llama import native
from tests.store_child import REPO


def send(*lines: tuple[int, bytes]) -> None:
    """Call the callback with ``lines`` and nothing between them: a context an earlier test
    left to the garbage collector, freed meanwhile, would log lines of its own."""
    native.lib()
    assert native._log_callback is not None
    gc.collect()
    gc.disable()
    try:
        for level, text in lines:
            native._log_callback(level, text, None)
    finally:
        gc.enable()


def test_continuations_take_the_level_of_the_line_before(caplog):
    caplog.set_level(logging.DEBUG, logger=native.log.name)
    with native.held_errors() as errors:
        send((2, b"llama_model_load: loading"), (5, b"....."), (5, b".....\n"),
             (3, b"careful: this"), (5, b" is a warning\n"),
             (4, b"failed: the reason"), (5, b" continues here\n"),
             (1, b"debug chatter"), (5, b"...\n"))
    assert errors == ["failed: the reason", " continues here"]
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.WARNING, "careful: this"), (logging.WARNING, " is a warning"),
        (logging.ERROR, "failed: the reason"), (logging.ERROR, " continues here"),
    ]


FIRST_OF_ALL = """
import logging
from sessions.llama import native

before_any_line = native._last_level  # what the module starts with, before llama.cpp said anything
native.lib()
native._last_level = before_any_line  # whatever loading the library logged, nothing was heard yet
records = []
handler = logging.Handler()
handler.emit = records.append
native.log.addHandler(handler)
native.log.setLevel(logging.DEBUG)
native._log_callback(5, b".....", None)
native._log_callback(5, b"more of nothing\\n", None)
print([(r.levelname, r.getMessage()) for r in records])
"""


def test_a_continuation_first_of_all_is_not_a_warning():
    """The very first line may be a continuation: it continues no line, so it must not take
    a warning's level. Only a fresh interpreter has heard no line yet (this one has)."""
    done = subprocess.run([sys.executable, "-c", FIRST_OF_ALL], cwd=REPO, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stdout
