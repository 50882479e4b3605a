"""Several clients of one server, clients that leave, and the other processes on its data dir.

Requests are answered one at a time, the others waiting in a bounded queue; one over
its bound is refused at once in OpenAI's shape. A client that leaves mid-stream stops its
reply, which is kept as a stopped reply, and the server goes on. ``ask`` keeps working on
the same data dir, in the server's chats too; a server stopped mid-reply keeps it.
"""

from __future__ import annotations

import http.client
import json
import signal
import subprocess
import sys
import threading

import pytest

from sessions.stop_reason import StopReason
from sessions.store import SessionStore
from sessions.synth import make_model
from tests.serve.server_process import REPO, ServeProcess

pytestmark = pytest.mark.engine

LONG_REPLY = 3000
"""Tokens asked of a reply that a test stops: the tiny model writes for seconds."""


@pytest.fixture(scope="module")
def model():
    return make_model("llama", "tiny")


def body(text: str, **fields) -> bytes:
    return json.dumps({"messages": [{"role": "user", "content": text}], **fields}).encode()


def open_stream(server: ServeProcess, text: str,
                **fields) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
    """A streamed chat request; the connection and its response, read up to its first text."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
    connection.request("POST", "/v1/chat/completions", body(text, stream=True, **fields),
                       {"Content-Type": "application/json"})
    response = connection.getresponse()
    assert response.status == 200
    while True:
        line = response.readline()
        assert line, "the stream ended before any text"
        if line.startswith(b"data: ") and b'"content": ""' not in line:
            return connection, response


def test_a_client_that_leaves_mid_stream_stops_its_reply_which_is_kept(model):
    with ServeProcess(model, "-c", "4096", "--temp", "0") as server:
        connection, _ = open_stream(server, "Tell me a long story.", max_tokens=LONG_REPLY)
        connection.sock.shutdown(2)  # the client goes
        connection.close()
        server.wait_for_log("the client left; the reply so far is kept as a stopped reply")
        client = server.client()
        answer = client.chat.completions.create(model=client.models.list().data[0].id,
                                                messages=[{"role": "user", "content": "Still there?"}], max_tokens=4)
        assert answer.choices[0].message.content is not None
    with SessionStore.open() as store:
        (stopped,) = [m for s in store.list_sessions() for m in store.messages(s.id)
                      if m.role == "assistant" and m.stats and m.stats.stop_reason == StopReason.CANCELLED]
    assert 0 < stopped.stats.tokens_generated < LONG_REPLY
    assert stopped.text


def test_fifty_requests_at_once_are_answered_in_turn_or_refused_in_shape(model):
    with ServeProcess(model, "-c", "1024", "--temp", "0", "--queue", "8") as server:
        results: list[tuple[int, dict]] = []
        lock = threading.Lock()

        def ask(k: int) -> None:
            connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
            connection.request("POST", "/v1/chat/completions", body(f"Question number {k}", max_tokens=8),
                               {"Content-Type": "application/json"})
            response = connection.getresponse()
            answer = (response.status, json.loads(response.read()))
            connection.close()
            with lock:
                results.append(answer)

        threads = [threading.Thread(target=ask, args=(k,)) for k in range(50)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    answered = [answer for status, answer in results if status == 200]
    refused = [answer for status, answer in results if status != 200]
    assert len(answered) + len(refused) == 50 and len(answered) >= 8  # at least the eight the queue holds
    assert {status for status, _ in results} <= {200, 503}
    for answer in refused:
        assert answer["error"]["type"] == "unavailable_error" and "busy" in answer["error"]["message"]
    with SessionStore.open() as store:
        chats = store.list_sessions()
        assert len(chats) == len(answered)  # a refused request stored nothing; an answered one all of it
        stored = {m.id: m.text for s in chats for m in store.messages(s.id) if m.role == "assistant"}
    for answer in answered:
        (message,) = answer["llamachat"]["messages"]
        assert stored[message] == answer["choices"][0]["message"]["content"]


def test_ask_keeps_working_on_the_same_data_dir_in_the_servers_chats_too(model):
    with ServeProcess(model, "-c", "1024", "--temp", "0", "--max-tokens", "6") as server:
        client = server.client()
        name = client.models.list().data[0].id
        first = client.chat.completions.create(model=name, messages=[{"role": "user", "content": "Hello"}])
        session = first.model_dump()["llamachat"]["session"]
        asked = subprocess.run([sys.executable, "-m", "sessions.cli", "ask", "-m", str(model), "-c", "1024",
                                "--max-tokens", "6", "--session", str(session), "--stats", "And you?"],
                               cwd=REPO, capture_output=True, text=True, timeout=120)
        assert asked.returncode == 0, asked.stderr
        stats = json.loads(asked.stderr.strip().splitlines()[-1])
        assert stats["tokens_evaluated"] < stats["tokens_restored"] + stats["tokens_evaluated"]
        again = client.chat.completions.create(model=name, messages=[
            {"role": "user", "content": "Hello"}, {"role": "assistant", "content": first.choices[0].message.content},
            {"role": "user", "content": "And you?"}])
        found = again.model_dump()["llamachat"]
        assert found["session"] == session and found["reused_messages"] == 3  # ask's question, found stored


def test_a_server_stopped_mid_reply_keeps_it_as_stopped_and_exits_cleanly(model):
    server = ServeProcess(model, "-c", "4096", "--temp", "0")
    connection, response = open_stream(server, "Tell me a long story.", max_tokens=LONG_REPLY)
    assert server.stop(signal.SIGTERM) == 0
    rest = response.read().decode()
    connection.close()
    assert "[DONE]" not in rest and "shutting down" in rest  # ended by an error event, its reply unfinished
    assert "stopped by SIGTERM" in server.stderr
    with SessionStore.open() as store:
        replies = [m for s in store.list_sessions() for m in store.messages(s.id) if m.role == "assistant"]
    assert [r.stats.stop_reason for r in replies] == [StopReason.CANCELLED]
    assert 0 < replies[0].stats.tokens_generated < LONG_REPLY


def test_a_request_for_a_chat_another_process_answers_in_waits_then_is_refused(model):
    import fcntl

    with ServeProcess(model, "-c", "1024", "--temp", "0", "--max-tokens", "4", "--timeout", "1") as server:
        client = server.client()
        name = client.models.list().data[0].id
        first = client.chat.completions.create(model=name, messages=[{"role": "user", "content": "Hello"}])
        session = first.model_dump()["llamachat"]["session"]
        with SessionStore.open() as store:
            lock_file = store.path.with_name(store.path.name + ".replies") / f"{session}.lock"
            before = len(store.messages(session))
        with open(lock_file, "a") as held:  # another llamachat writing a reply there
            fcntl.flock(held, fcntl.LOCK_EX)
            status, answer = post(server, json.dumps({"max_tokens": 4, "messages": [
                {"role": "user", "content": "Hello"}, {"role": "assistant", "content": "x"},
                {"role": "user", "content": "More?"}]}).encode())
        assert status == 503 and "another llamachat is writing a reply" in answer["error"]["message"]
        with SessionStore.open() as store:
            assert len(store.messages(session)) == before  # nothing of the refused request stored
        again = client.chat.completions.create(model=name, messages=[{"role": "user", "content": "Hello"}])
        assert again.model_dump()["llamachat"]["session"] == session


def post(server: ServeProcess, data: bytes) -> tuple[int, dict]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
    connection.request("POST", "/v1/chat/completions", data, {"Content-Type": "application/json"})
    response = connection.getresponse()
    answer = (response.status, json.loads(response.read()))
    connection.close()
    return answer
