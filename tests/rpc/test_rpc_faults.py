"""A server that dies or hangs mid-reply: one line, nothing committed lost, an exact next reply.

The session runs as the app runs it: ``SessionController`` with the real factory, which
puts the RPC engine in a child process. A server killed with SIGKILL while the reply
streams (or while the prompt is read) makes llama.cpp abort the child; the controller's
call raises ``EngineLost`` whose one-line message names that server, the messages
committed before stay, the partial reply is dropped, and every checkpoint file on disk
verifies. Then the session goes on: after the server restarts (the engine reloads in a
new child), or locally without RPC, and its next reply equals a recompute from scratch.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sessions.api.chat import SessionController
from sessions.checkpoints import CheckpointStore
from sessions.controller.branch_tokens import branch_tokens
from sessions.engine.factory import llama_engine_factory
from sessions.engine.process import EngineProcess
from sessions.engine.settings import EngineSettings
from sessions.events import PromptProgressed, TextStreamed
from sessions.rpc.errors import EngineLost
from sessions.sampling import SamplingSettings
from sessions.store import SessionStore
from tests.trials.crash_checks import CheckpointScanner

from .conftest import split_settings, tiny_model

pytestmark = [pytest.mark.rpc, pytest.mark.engine]

GREEDY = SamplingSettings(temperature=0.0, max_tokens=1500)
SYSTEM = "You are a helpful assistant who answers briefly."
LONG_QUESTION = " ".join(["Tell me about the sea and the boats that sail on it at night."] * 12)


class Session:
    """A store, a checkpoint store and a controller on them, as the app builds them."""

    def __init__(self, root, settings: EngineSettings, kill_on=None):
        self.kill_on = kill_on
        self.store = SessionStore.open(root / "sessions.sqlite3")
        self.checkpoints = CheckpointStore(root / "ck", ram_bytes=64 << 20, disk_bytes=1 << 30)
        self.ctl = SessionController(self.store, engine_factory=llama_engine_factory(self.checkpoints),
                                     settings=settings, sampling=GREEDY, listener=self.listen)

    def listen(self, event) -> None:
        if self.kill_on is not None and self.kill_on(event):
            self.kill_on = None

    def close(self) -> None:
        if self.ctl.engine is not None:
            self.ctl.engine.close()
        self.checkpoints.close()
        self.store.close()


def kill_at(server, kind, count: int):
    seen = [0]

    def check(event) -> bool:
        if isinstance(event, kind):
            seen[0] += 1
            if seen[0] == count:
                server.kill()
                return True
        return False

    return check


def from_scratch(path, settings: EngineSettings, store, messages):
    """Logits after the branch ``messages`` and a 24-token greedy reply, from token 0,
    on the split ``settings`` describe (a new engine with no checkpoints)."""
    ref = llama_engine_factory(None)(path, settings, lambda _f: None)
    try:
        tokens, ends, stepped = branch_tokens(store, ref, messages)
        result = ref.prepare(tokens, ends, stepped)
        assert result.tokens_evaluated == len(tokens)
        return result.logits, ref.generate(result.logits, GREEDY, max_tokens=24).tokens
    finally:
        ref.close()


def committed(store, session_id: int) -> list[tuple[str, str]]:
    return [(m.role, m.text) for m in store.messages(session_id)]


def one_line_naming(error: BaseException, named: str, other: str) -> str:
    message = str(error)
    assert "\n" not in message and named in message and other not in message, message
    return message


def test_server_killed_mid_reply_then_back(pair, tmp_path):
    arch = "llama"
    path, settings = tiny_model(arch), split_settings(arch, pair.endpoints)
    a, b = pair.servers
    s = Session(tmp_path, settings)
    try:
        s.ctl.load_model(path)
        s.ctl.new_session(system_prompt=SYSTEM)
        s.ctl.send("Tell me about the sea.")
        s.ctl.generate_reply(max_tokens=24)
        question = s.ctl.send("And the stars above the water?")
        before = committed(s.store, question.session_id)
        s.kill_on = kill_at(b, TextStreamed, 3)
        with pytest.raises(EngineLost) as lost:
            s.ctl.generate_reply()
        assert s.kill_on is None, "the server was not killed during the reply"
        message = one_line_naming(lost.value, b.endpoint, a.endpoint)
        assert "dropped" in message
        assert committed(s.store, question.session_id) == before  # the partial reply is dropped
        assert s.ctl.snapshot().head.id == question.id
        scan = CheckpointScanner(tmp_path / "ck").scan()
        assert scan.bad == [] and scan.problems == []

        b.restart()
        warm = s.ctl.warm()  # a new engine process, the same split
        reply = s.ctl.generate_reply(max_tokens=24)
        reply_tokens = s.store.get_tokens(reply.id, s.ctl.engine.info.fingerprint)
        branch = s.ctl.snapshot().tree.path_to(question.id)
        s.ctl.engine.close()  # a server serves one client at a time
        s.ctl.engine = None
        logits, greedy = from_scratch(path, settings, s.store, branch)
        assert np.array_equal(warm.logits, logits), f"max diff {np.abs(warm.logits - logits).max()}"
        assert reply_tokens == greedy
    finally:
        s.close()


def test_server_killed_mid_prompt_then_reopened_locally(pair, tmp_path):
    arch = "lfm2"
    path, settings = tiny_model(arch), split_settings(arch, pair.endpoints)
    a, b = pair.servers
    s = Session(tmp_path, settings)
    try:
        s.ctl.load_model(path)
        s.ctl.new_session(system_prompt=SYSTEM)
        s.ctl.send("Tell me about the sea.")
        s.ctl.generate_reply(max_tokens=24)
        question = s.ctl.send(LONG_QUESTION)
        session_id = question.session_id
        before = committed(s.store, session_id)
        s.kill_on = kill_at(a, PromptProgressed, 1)
        with pytest.raises(EngineLost) as lost:
            s.ctl.generate_reply()
        assert s.kill_on is None, "the server was not killed while the prompt was read"
        one_line_naming(lost.value, a.endpoint, b.endpoint)
        assert committed(s.store, session_id) == before
    finally:
        s.close()
    scan = CheckpointScanner(tmp_path / "ck").scan()
    assert scan.bad == [] and scan.problems == []

    local = EngineSettings(n_ctx=2048, n_batch=64, threads=1)
    s = Session(tmp_path, local)  # a new run of the program, without --rpc
    try:
        s.ctl.load_model(path)
        s.ctl.open_session(session_id)
        warm = s.ctl.warm()
        reply = s.ctl.generate_reply(max_tokens=24)
        reply_tokens = s.store.get_tokens(reply.id, s.ctl.engine.info.fingerprint)
        logits, greedy = from_scratch(path, local, s.store, s.ctl.snapshot().tree.path_to(question.id))
        assert np.array_equal(warm.logits, logits)
        assert reply_tokens == greedy
        assert committed(s.store, session_id)[:len(before)] == before
    finally:
        s.close()


def test_hung_server_is_named_after_the_stop_grace(pair, tmp_path):
    """A server that stops answering (SIGSTOP: the connection stays open) cannot abort the
    child; a stop that is not answered within the grace ends the child instead."""
    arch = "gemma3"
    a, b = pair.servers
    engine = EngineProcess(tiny_model(arch), split_settings(arch, pair.endpoints),
                           checkpoint_dir=tmp_path / "ck", stop_grace=1.0)
    try:
        tokens = engine.tokenize(SYSTEM, True)
        prep = engine.prepare(tokens, [len(tokens)])
        b.pause()  # the reply's first decode needs it, and it will never answer
        port = int(b.endpoint.rsplit(":", 1)[1])

        # Stop once the child is stuck in that decode: its request waits, unread, in the
        # stopped server's socket (a stop sent sooner is honoured before the decode).
        with pytest.raises(EngineLost) as lost:
            engine.generate(prep.logits, GREEDY, max_tokens=1500, should_stop=lambda: unread_bytes(port) > 0)
        message = one_line_naming(lost.value, b.endpoint, a.endpoint)
        assert "did not stop within" in message
    finally:
        b.resume()
        engine.close()


def unread_bytes(port: int) -> int:
    """Bytes waiting, unread, in the receive queues of the connections a local server
    accepted on ``port`` (Linux's /proc/net/tcp: local address, then tx:rx queues)."""
    waiting = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            local, state, queues = fields[1], fields[3], fields[4]
            if state == "01" and int(local.rsplit(":", 1)[1], 16) == port:  # established
                waiting += int(queues.split(":")[1], 16)
    return waiting
