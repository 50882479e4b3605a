"""The smallest context and batch llama.cpp takes, from the config and from the flags alike.

llama.cpp keeps an output per sequence in every batch, and the context has two: a batch of
1 (or a context of 1, which the batch follows down) aborts it inside ``GGML_ASSERT``, the
process killed with a backtrace. Such a value is refused in one sentence, the default used
instead, and ``ask`` answers. ``-c`` replaces the file's context as if the file had said it,
batch included. Real ``ask`` processes for the aborts: an abort cannot be caught in-process.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from sessions import cli, paths
from sessions.config import Config
from sessions.synth import make_model
from tests.cli_support import assert_one_line_error, run
from tests.store_child import REPO


def write(text: str) -> None:
    path = paths.config_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def ask(*argv: str) -> subprocess.CompletedProcess[str]:
    model = str(make_model("llama", "tiny"))
    return subprocess.run([sys.executable, "-m", "sessions.cli", *argv, "ask", "-m", model, "--temp", "0",
                           "--max-tokens", "3", "hello"],
                          cwd=REPO, env=os.environ.copy(), capture_output=True, text=True, timeout=180)


@pytest.mark.engine
@pytest.mark.parametrize(("line", "words"), [
    ("n_ctx = 1", "n_ctx must be 0 (the model's own context) or at least 2, not 1; using 8192"),
    ("n_batch = 1", "n_batch must be at least 2, not 1"),
])
def test_a_config_llama_cpp_would_abort_on_is_one_warning_and_ask_answers(line, words):
    write(line + "\n")
    done = ask()
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    warnings = [text for text in done.stderr.splitlines() if text.startswith("llamachat: warning:")]
    assert len(warnings) == 1 and words in warnings[0], done.stderr
    assert done.stdout.strip()


@pytest.mark.parametrize("value", ["1"])
def test_a_context_flag_llama_cpp_would_abort_on_is_one_line(capsys, value):
    assert_one_line_error(*run(capsys, "-c", value, "sessions"),
                          f"context size must be 0 (the model's own) or at least 2, not {value}")


def launched(*argv: str) -> Config:
    """The config the app would start with, as the command line parsed it."""
    options = cli.run(list(argv))
    assert isinstance(options, cli.LaunchOptions)
    return options.config


def test_a_context_flag_lifts_the_batch_the_files_context_brought_down():
    write("n_ctx = 256\n")  # the default batch of 512 follows it down to 256
    assert (launched().n_ctx, launched().n_batch) == (256, 256)
    config = launched("-c", "4096")
    assert (config.n_ctx, config.n_batch) == (4096, Config().n_batch)


def test_a_context_flag_gives_back_the_batch_the_file_set():
    write("n_ctx = 256\nn_batch = 1024\n")  # reported, and used as 256 with this context
    config = launched("-c", "4096")
    assert (config.n_ctx, config.n_batch) == (4096, 1024)
    assert launched("-c", "128").n_batch == 128


def test_a_config_context_of_1_no_longer_forces_the_batch_under_a_context_flag():
    write("n_ctx = 1\n")
    config = launched("-c", "4096")
    assert (config.n_ctx, config.n_batch) == (4096, Config().n_batch)
