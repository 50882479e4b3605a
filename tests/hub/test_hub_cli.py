"""``llamachat pull`` and ``-hf``: a model fetched by name from the command line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from sessions.synth import make_model
from tests.cli_support import assert_one_line_error, run

REPO = "org/tiny-GGUF"


@pytest.fixture
def tiny():
    return make_model("llama", "tiny")


@pytest.fixture
def served(fake_hub, tiny):
    fake_hub.add(REPO, {"tiny-Q8_0.gguf": b"GGUF not this one", "tiny-Q4_K_M.gguf": tiny})
    return fake_hub


def test_pull_prints_the_path_and_the_progress_with_bytes_and_rate(served, tiny, capsys):
    code, out, err = run(capsys, "pull", REPO)
    assert code == 0
    path = out.strip()
    assert path.endswith("/tiny-Q4_K_M.gguf") and "models--org--tiny-GGUF" in path
    size = f"{tiny.stat().st_size / 1e6:.1f} MB"
    lines = err.splitlines()
    assert lines[0] == "llamachat: fetching tiny-Q4_K_M.gguf: 0 B of " + size + " (0%), 0 B/s"
    assert lines[-1].startswith(f"llamachat: fetched tiny-Q4_K_M.gguf: {size} of {size} (100%), ")
    assert lines[-1].endswith("B/s") and lines[-1] != lines[0]


def test_pull_of_a_missing_repository_is_one_line_and_status_1(served, capsys):
    code, out, err = run(capsys, "pull", "org/nothing-here")
    assert_one_line_error(code, out, err, f"no model named org/nothing-here on {served.url}")


def test_pull_of_a_name_that_is_not_one_is_one_line(served, capsys):
    code, out, err = run(capsys, "pull", "just-a-word")
    assert_one_line_error(code, out, err, "'just-a-word' is not a model name: expected user/repo")
    assert served.requests == []


def test_hf_and_m_together_are_refused_before_anything_is_fetched(served, tiny, capsys):
    code, out, err = run(capsys, "-hf", REPO, "-m", str(tiny), "models")
    assert_one_line_error(code, out, err, "-m and -hf both name a model")
    assert served.requests == []


def test_hf_without_a_command_starts_the_app_with_the_fetched_model(served, tiny, capsys):
    launched = []
    code, _out, err = run(capsys, "-hf", f"{REPO}:Q4_K_M", run_app=launched.append)
    assert code == 0 and "fetched tiny-Q4_K_M.gguf" in err
    (options,) = launched
    assert options.model_path.read_bytes() == tiny.read_bytes()
    assert options.config.model == str(options.model_path)


@pytest.mark.engine
def test_hf_then_ask_chats_with_the_fetched_model(served):
    done = subprocess.run(
        [sys.executable, "-m", "sessions.cli", "-hf", REPO, "ask", "--temp", "0", "--max-tokens", "6",
         "Hello there"],
        capture_output=True, text=True, env=os.environ.copy(), timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()
    assert "llamachat: fetched tiny-Q4_K_M.gguf" in done.stderr and "Traceback" not in done.stderr
    assert len(served.gets("tiny-Q4_K_M.gguf")) == 1


def test_on_a_terminal_the_line_is_redrawn_in_place_and_ends_with_the_file():
    import io

    from sessions.cli.download_line import DownloadLine
    from sessions.hub import DownloadProgress

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    screen = Terminal()
    line = DownloadLine(screen)
    line(DownloadProgress("m.gguf", 0, 2_000_000, 0.0))
    line(DownloadProgress("m.gguf", 1_000_000, 2_000_000, 5e6))  # within the redraw interval: skipped
    line(DownloadProgress("m.gguf", 2_000_000, 2_000_000, 4e6, finished=True))
    assert screen.getvalue() == ("\r\x1b[2Kllamachat: m.gguf: 0 B of 2.0 MB (0%), 0 B/s"
                                 "\r\x1b[2Kllamachat: m.gguf: 2.0 MB of 2.0 MB (100%), 4.0 MB/s\n")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_during_pull_deletes_the_partial_file_as_ctrl_c_does(served, tiny, tmp_path, signum):
    """SIGTERM used to end ``pull`` on the spot, leaving the partial file in the cache."""
    size = tiny.stat().st_size
    served.lie("tiny-Q4_K_M.gguf", hang_at=size // 2)
    child = subprocess.Popen([sys.executable, "-m", "sessions.cli", "pull", REPO], env=os.environ.copy(),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    blobs = tmp_path / "hf-home" / "hub" / "models--org--tiny-GGUF" / "blobs"
    deadline = time.monotonic() + 60
    while not any(path.stat().st_size == size // 2 for path in blobs.glob("*.incomplete")):
        assert child.poll() is None and time.monotonic() < deadline, child.communicate()
        time.sleep(0.01)  # polls the condition: half the file written, the rest held by the server
    child.send_signal(signum)
    out, err = child.communicate(timeout=60)
    assert child.returncode == 128 + signum, err
    name = signal.Signals(signum).name
    assert err.splitlines()[-1] == f"llamachat: stopped by {name} before `llamachat pull` finished"
    assert out == "" and list(blobs.iterdir()) == []
