"""``llamachat serve`` driven by OpenAI's own Python client, as the front ends drive it.

A real server process over a real (made) model: a chat, a swipe, an edit of an early
turn and a continue land as branches of one served chat, which then opens through the
controller as the app opens it; streaming, ``n``, stop strings, the raw completions
endpoint, the model list and the API key behave as the client expects.
"""

from __future__ import annotations

import json
import subprocess
import sys

import openai
import pytest

from sessions.api.chat import EngineSettings, SessionController
from sessions.engine.factory import llama_engine_factory
from sessions.stop_reason import StopReason
from sessions.store import SessionStore
from sessions.synth import make_model
from tests.serve.server_process import REPO, ServeProcess

pytestmark = pytest.mark.engine

SYSTEM = {"role": "system", "content": "You answer briefly."}
FIRST = {"role": "user", "content": "Tell me about the sea and the boats on it."}


@pytest.fixture(scope="module")
def model():
    return make_model("llama", "tiny")


@pytest.fixture
def server(model):
    with ServeProcess(model, "-c", "1024", "--temp", "0", "--max-tokens", "12") as running:
        yield running


def chat(client, messages, **options):
    answer = client.chat.completions.create(model=client.models.list().data[0].id, messages=messages, **options)
    return answer.model_dump()


def reply_of(answer) -> str:
    return answer["choices"][0]["message"]["content"]


def check_counts(answer) -> None:
    """What a response says it re-processed adds up."""
    usage, timings = answer["usage"], answer["timings"]
    assert usage["prompt_tokens_details"]["cached_tokens"] == usage["prompt_tokens"] - timings["prompt_n"]
    assert timings["cache_n"] == usage["prompt_tokens"] - timings["prompt_n"]
    assert timings["predicted_n"] == usage["completion_tokens"]


def test_a_client_chats_swipes_edits_and_continues_and_the_chat_opens_with_its_branches(server):
    client = server.client()
    first = chat(client, [SYSTEM, FIRST])
    check_counts(first)
    assert first["timings"]["prompt_n"] == first["usage"]["prompt_tokens"]  # nothing stored yet
    session = first["llamachat"]["session"]
    history = [SYSTEM, FIRST, {"role": "assistant", "content": reply_of(first)},
               {"role": "user", "content": "And what about the stars above them?"}]
    second = chat(client, history)
    check_counts(second)
    assert second["llamachat"]["session"] == session
    assert second["llamachat"]["reused_messages"] == 3  # the reply came back as the model wrote it
    assert second["timings"]["prompt_n"] < second["usage"]["prompt_tokens"] - first["usage"]["prompt_tokens"]

    swipe = chat(client, history)  # the same request again: a new version of its reply
    check_counts(swipe)
    assert swipe["llamachat"]["reused_messages"] == 4
    assert swipe["timings"]["prompt_n"] <= 1  # at most the last token again, for its logits

    edited = [SYSTEM, {"role": "user", "content": "Tell me about the mountains instead."}]
    edit = chat(client, edited)
    check_counts(edit)
    assert edit["llamachat"]["session"] == session
    assert edit["llamachat"]["reused_messages"] == 1  # the system prompt

    partial = reply_of(second)[:8]
    going_on = chat(client, [*history[:3], history[3], {"role": "assistant", "content": partial}])
    check_counts(going_on)
    assert going_on["llamachat"]["reused_messages"] == 4
    server.stop()

    with SessionStore.open() as store:
        assert [s.served for s in store.list_sessions()] == [True]
        controller = SessionController(store, engine_factory=llama_engine_factory(None),
                                       settings=EngineSettings(n_ctx=1024, threads=1, n_gpu_layers=0))
        try:
            controller.open_session(session)
            tree = controller.snapshot().tree
        finally:
            controller.close()
    system = tree.roots()
    assert [m.text for m in system] == [SYSTEM["content"]]
    firsts = tree.children(system[0].id)
    assert [m.text for m in firsts] == [FIRST["content"], edited[1]["content"]]  # the edit, a sibling
    question = tree.children(tree.children(firsts[0].id)[0].id)
    assert [m.text for m in question] == [history[3]["content"]]
    replies = tree.children(question[0].id)
    assert [m.id for m in replies[:2]] == [second["llamachat"]["messages"][0], swipe["llamachat"]["messages"][0]]
    assert replies[0].text == reply_of(second) and replies[1].text == reply_of(swipe)
    written = tree.get(going_on["llamachat"]["messages"][0])
    assert written.parent_id == question[0].id  # the continue: a longer version beside them
    assert written.text == partial + reply_of(going_on)


def test_a_stream_sends_the_reply_in_pieces_then_the_usage(server):
    client = server.client()
    pieces, finish, usage = [], [], None
    for chunk in client.chat.completions.create(model=client.models.list().data[0].id, messages=[SYSTEM, FIRST],
                                                stream=True, stream_options={"include_usage": True}):
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            pieces.append(choice.delta.content or "")
            finish.append(choice.finish_reason)
    whole = chat(client, [SYSTEM, FIRST])  # the same question answered again, not streamed
    assert "".join(pieces) == reply_of(whole)
    assert finish[-1] == whole["choices"][0]["finish_reason"] and set(finish[:-1]) == {None}
    assert usage is not None and usage.prompt_tokens == whole["usage"]["prompt_tokens"]
    assert usage.completion_tokens == whole["usage"]["completion_tokens"]


def test_n_versions_are_written_in_one_batch_and_stored_as_versions(server):
    client = server.client()
    answer = chat(client, [SYSTEM, FIRST], n=3, temperature=0.9, seed=11)
    check_counts(answer)
    assert [c["index"] for c in answer["choices"]] == [0, 1, 2]
    assert len(set(answer["llamachat"]["messages"])) == 3
    with pytest.raises(openai.BadRequestError, match="same"):  # greedy versions would all be one reply
        chat(client, [SYSTEM, FIRST], n=2, temperature=0)
    server.stop()
    with SessionStore.open() as store:
        replies = [store.get_message(m) for m in answer["llamachat"]["messages"]]
    assert len({r.parent_id for r in replies}) == 1
    assert [r.stats.seed for r in replies] == [11, 12, 13]
    assert [r.text for r in replies] == [c["message"]["content"] for c in answer["choices"]]


def test_a_stop_string_cuts_the_reply_before_it(server):
    client = server.client()
    full = reply_of(chat(client, [SYSTEM, FIRST]))
    stop = full.split()[1]  # a word of the greedy reply, which the next reply writes again
    cut = chat(client, [SYSTEM, FIRST], stop=[stop, "never written"])
    assert reply_of(cut) == full[:full.index(stop)]
    assert cut["choices"][0]["finish_reason"] == "stop"
    streamed = "".join(chunk.choices[0].delta.content or "" for chunk in client.chat.completions.create(
        model=client.models.list().data[0].id, messages=[SYSTEM, FIRST], stream=True, stop=stop) if chunk.choices)
    assert streamed == reply_of(cut)
    server.stop()
    with SessionStore.open() as store:
        stored = store.get_message(cut["llamachat"]["messages"][0])
    assert stored.stats.stop_reason == StopReason.CANCELLED  # the model wrote on past it: kept, as stopped
    assert stored.text.startswith(reply_of(cut) + stop)


def test_raw_completions_go_on_from_their_own_text(server):
    client = server.client()
    name = client.models.list().data[0].id
    first = client.completions.create(model=name, prompt="Once upon a time", max_tokens=8).model_dump()
    text = first["choices"][0]["text"]
    assert first["object"] == "text_completion" and first["timings"]["prompt_n"] == first["usage"]["prompt_tokens"]
    going_on = client.completions.create(model=name, prompt="Once upon a time" + text, max_tokens=8).model_dump()
    assert going_on["llamachat"]["session"] == first["llamachat"]["session"]
    assert going_on["timings"]["prompt_n"] < going_on["usage"]["prompt_tokens"] - first["usage"]["prompt_tokens"]
    tokens = client.completions.create(model=name, prompt=[1, 2, 3], max_tokens=4).model_dump()
    assert tokens["usage"]["prompt_tokens"] == 3


def test_models_health_and_the_refusals_a_client_meets(server):
    client = server.client()
    (model,) = client.models.list().data
    assert model.id.endswith(".gguf") and model.owned_by == "llamachat"
    with pytest.raises(openai.NotFoundError) as missing:
        client.chat.completions.create(model="gpt-4o", messages=[FIRST])
    assert missing.value.body["code"] == "model_not_found" and "gpt-4o" in missing.value.body["message"]
    with pytest.raises(openai.BadRequestError, match="unknown field"):
        client.chat.completions.create(model=model.id, messages=[FIRST], extra_body={"max_tokenz": 3})
    with pytest.raises(openai.BadRequestError, match="context holds 1,024"):
        client.chat.completions.create(model=model.id, messages=[{"role": "user", "content": "word " * 2000}])
    status, body = raw(server.url + "/v1/chat/completions", b'{"messages": [')
    assert status == 400 and "not valid JSON" in body["error"]["message"] and body["error"]["type"]
    big = json.dumps({"messages": [{"role": "user", "content": "x" * (10 << 20)}]}).encode()
    status, body = raw(server.url + "/v1/chat/completions", big)
    assert status == 413 and "8,388,608" in body["error"]["message"]
    status, body = raw(server.url + "/v1/nothing", b"{}")
    assert status == 404 and body["error"]["type"] == "not_found_error"
    status, body = raw(server.url + "/health")
    assert (status, body) == (200, {"status": "ok"})
    assert chat(client, [SYSTEM, FIRST])["choices"]  # and it still answers
    server.stop()
    with SessionStore.open() as store:  # the refused requests stored nothing
        assert len(store.list_sessions()) == 1


def test_an_api_key_is_required_where_one_is_set(model):
    with ServeProcess(model, "-c", "1024", "--max-tokens", "4", "--api-key", "sesame") as server:
        with pytest.raises(openai.AuthenticationError):
            server.client("wrong").models.list()
        status, body = raw(server.url + "/v1/chat/completions", json.dumps({"messages": [FIRST]}).encode())
        assert status == 401 and body["error"]["code"] == "invalid_api_key"
        assert raw(server.url + "/health")[0] == 200  # a health check has no key
        assert chat(server.client("sesame"), [FIRST])["choices"]


def test_the_served_chats_are_listed_as_served(server):
    chat(server.client(), [SYSTEM, FIRST])
    server.stop()
    listed = subprocess.run([sys.executable, "-m", "sessions.cli", "sessions", "--json"], cwd=REPO,
                            capture_output=True, text=True, check=True)
    assert [s["served"] for s in json.loads(listed.stdout)] == [True]


def raw(url: str, body: bytes | None = None) -> tuple[int, dict]:
    """A request without OpenAI's client (which would not send a broken body): status and JSON."""
    import urllib.error
    import urllib.request

    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())
