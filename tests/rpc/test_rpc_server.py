"""``llamachat rpc-server``: serves, stops cleanly on Ctrl+C, refuses what it cannot do."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from sessions.rpc.probe import probe
from tests.signal_state import signal_state

from .servers import REPO, RpcServer

pytestmark = pytest.mark.rpc


def rpc_server(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sessions.cli", "rpc-server", *argv], cwd=REPO,
                          capture_output=True, text=True, timeout=60)


def test_it_serves_and_stops_cleanly_on_ctrl_c():
    server = RpcServer().start()
    try:
        info = probe(server.endpoint)
        assert info.devices and info.devices[0].total_bytes > 0
        assert any("no authentication" in line for line in server.output)
        before = signal_state(server.proc.pid)  # told if Ctrl+C is never seen (once, under load)
        server.proc.send_signal(signal.SIGINT)
        try:
            status = server.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail(f"still running 30 s after SIGINT\nbefore it:\n{before}\nnow:\n{signal_state(server.proc.pid)}")
        assert status == 0
    finally:
        server.kill()
    assert any("stopped" in line for line in server.output), server.output
    assert not any("Traceback" in line for line in server.output)


def test_a_taken_port_is_an_error():
    server = RpcServer().start()
    try:
        done = rpc_server("--port", str(server.port))
        assert done.returncode == 1
        assert done.stderr.strip().splitlines()[-1] == (
            f"llamachat: error: cannot listen on 127.0.0.1:{server.port}: address already in use")
        probe(server.endpoint)  # the first one still serves
    finally:
        server.kill()


@pytest.mark.parametrize("host", ["localhost", "::1", "example.org"])
def test_the_host_must_be_an_ipv4_address(host):
    done = rpc_server("--host", host)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == ("llamachat: error: --host must be an IPv4 address such as 127.0.0.1 or 0.0.0.0, "
                           f"not {host!r}\n")


def test_another_address_than_127_0_0_1_prints_llama_cpp_warning():
    """127.0.0.2 is still this machine (loopback), so the test exposes nothing."""
    server = RpcServer(host="127.0.0.2").start()
    try:
        probe(server.endpoint)
    finally:
        server.kill()
    text = "".join(server.output)
    assert "WARNING: Host ('127.0.0.2') is != '127.0.0.1'" in text
    assert "Never expose the RPC server to an open network!" in text
