"""Replayed client traces, the server restarted before every second request, on every memory kind.

The requests of a SillyTavern-shaped and an Open WebUI-shaped trace (``traces``) go to
servers that each serve two of them: the first after a start, so everything it reuses
comes from the store and the checkpoints on disk; the second to the same process, which
may reuse what it holds in RAM. The pairs are shifted by one on every other memory kind, so
each step of a trace is served from disk on some and from a running server on others.
Each response must say what it re-processed truthfully
(``cached_tokens`` and ``timings.prompt_n`` add up to the prompt) and re-process at most
the tokens of the messages the request added, plus the one token a plain-attention model
decodes again for its logits. The messages it finds stored must be those a client that
knows the rules would count (``ClientView``): every message an earlier request sent in
the same place, and a reply the server wrote, sent back, when its text reads back as the
tokens the model sampled (a random-weight model often samples a word in pieces the
tokenizer would not cut it into, and then the request's own tokens are the truth). Then
every reply the server wrote, at temperature 0, must be the reply a fresh engine without
checkpoints writes after evaluating the same branch from token 0.
"""

from __future__ import annotations

from contextlib import ExitStack

import pytest

from sessions.controller.branch_tokens import branch_tokens
from sessions.engine.factory import llama_engine_factory
from sessions.engine.settings import EngineSettings
from sessions.sampling import SamplingSettings
from sessions.stop_reason import StopReason
from sessions.store import SessionStore
from sessions.synth import make_model
from tests.serve.server_process import ServeProcess
from tests.serve.traces import TRACES

pytestmark = pytest.mark.engine

ARCHS = ("llama", "gemma3", "lfm2", "mamba", "qwen35")
"""The memory kinds the suite makes models of: plain attention, sliding window, hybrid, recurrent."""
SWA_WINDOW = 32
"""Gemma 3's window in the made model: shorter than a message, so restores cross it."""
N_CTX = 2048
REPLY_TOKENS = 24
SETTINGS = EngineSettings(n_ctx=N_CTX, threads=1, n_gpu_layers=0)
FLAGS = ("-c", str(N_CTX), "-t", "1", "-ngl", "0", "--temp", "0", "--max-tokens", str(REPLY_TOKENS))


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("trace", sorted(TRACES))
def test_a_replayed_trace_is_exact_and_reprocesses_only_its_new_tokens(arch, trace):
    model = make_model(arch, "tiny", swa_window=SWA_WINDOW)
    view = ClientView(model)
    replies: dict[str, str] = {}
    written: list[tuple[int, str | None]] = []
    reused = 0
    with ExitStack() as servers:
        for index, step in enumerate(TRACES[trace]):
            messages = step.messages(replies)
            expected = view.stored(messages)
            if index == 0 or restarts_before(index, ARCHS.index(arch)):
                servers.close()  # SIGTERM, and the status checked, as a service manager stops it
                server = servers.enter_context(ServeProcess(model, *FLAGS))
                client = server.client()
            answer = client.chat.completions.create(model=client.models.list().data[0].id, messages=messages,
                                                    **step.options).model_dump()
            replies[step.name] = answer["choices"][0]["message"]["content"]
            stored = answer["llamachat"]
            gone_on = messages[-1]["content"] if messages[-1]["role"] == "assistant" else None
            written.extend((reply_id, gone_on) for reply_id in stored["messages"])
            view.record(messages, replies[step.name], stored["messages"][0])
            usage, timings = answer["usage"], answer["timings"]
            assert usage["prompt_tokens_details"]["cached_tokens"] == usage["prompt_tokens"] - timings["prompt_n"]
            assert stored["reused_messages"] == expected, step.name
            reused += expected
            new = new_tokens(stored["messages"][0], stored["reused_messages"], len(messages),
                             usage["completion_tokens"])
            assert usage["prompt_tokens"] >= new, step.name
            assert timings["prompt_n"] <= new + 1, (step.name, timings["prompt_n"], new)
    view.close()
    assert reused >= len(TRACES[trace])  # swipes, regenerates and later turns found what they resend
    assert_exact(model, written)


def restarts_before(step: int, shift: int) -> bool:
    """Whether the server is started anew for the request of ``step``: before every second
    one, the pairs shifted by ``shift``."""
    return (step + shift) % 2 == 0


class ClientView:
    """The messages of a request the server holds, as a client that knows the rules counts them.

    A message is stored in the place a request puts it once an earlier request sent it
    there: the same messages before it, and the same kind of message after it (a
    message answered by a reply ends with the reply's header; one followed by an
    instruction does not). A reply sent back is stored if the server wrote it there and
    its text reads back as the tokens the model sampled.
    """

    def __init__(self, model) -> None:
        from sessions.llama.model import LlamaModel

        self._model = LlamaModel(model)
        self._seen: set[tuple] = set()
        self._written: dict[tuple, list[tuple[str, int]]] = {}

    @staticmethod
    def _key(messages: list[dict[str, str]], index: int) -> tuple:
        before = tuple((m["role"], m["content"]) for m in messages[:index + 1])
        if messages[index]["role"] == "assistant":
            return before, None
        last = index == len(messages) - 1
        answered = messages[-1]["role"] != "assistant" if last else messages[index + 1]["role"] == "assistant"
        return before, answered

    def stored(self, messages: list[dict[str, str]]) -> int:
        for index, message in enumerate(messages):
            if self._key(messages, index) in self._seen:
                continue
            prefix = tuple((m["role"], m["content"]) for m in messages[:index])
            if message["role"] == "assistant" and index < len(messages) - 1 and any(
                    text == message["content"] and self._reads_back(text, reply)
                    for text, reply in self._written.get(prefix, [])):
                continue
            return index
        return len(messages)

    def _reads_back(self, text: str, reply_id: int) -> bool:
        with SessionStore.open() as store:
            sampled = store.get_tokens(reply_id, self._model.info.fingerprint)
        return self._model.tokenize(text) == sampled

    def record(self, messages: list[dict[str, str]], reply: str, reply_id: int) -> None:
        for index in range(len(messages)):
            self._seen.add(self._key(messages, index))
        if messages[-1]["role"] != "assistant":
            prefix = tuple((m["role"], m["content"]) for m in messages)
            self._written.setdefault(prefix, []).append((reply, reply_id))

    def close(self) -> None:
        self._model.close()


def new_tokens(reply_id: int, reused: int, request_length: int, generated: int) -> int:
    """The tokens of the messages a request added: those of its branch after the ``reused``
    first. A reply gone on from is stored beside the reply written from it, which holds
    its tokens, then the ``generated`` ones."""
    with SessionStore.open() as store:
        reply = store.get_message(reply_id)
        path = store.load_tree(reply.session_id).path_to(reply.parent_id)
        fingerprint = reply.stats.sampled_by
        lengths = [len(store.get_tokens(m.id, fingerprint) or []) for m in path]
        if request_length > len(path):
            lengths.append(len(store.get_tokens(reply.id, fingerprint) or []) - generated)
        return sum(lengths[reused:request_length])


def assert_exact(model, written: list[tuple[int, str | None]]) -> None:
    """Every reply in ``written`` is what a fresh engine writes after its branch, from token 0;
    a reply gone on from a partial one (its text given) after the partial one's branch."""
    greedy = SamplingSettings(temperature=0.0)
    with SessionStore.open() as store:
        for reply_id, partial in written:
            reply = store.get_message(reply_id)
            tree = store.load_tree(reply.session_id)
            path = tree.path_to(reply.parent_id)
            gone_on = partial is not None
            if gone_on:  # the version it was written from: a sibling with the client's text
                path.append(next(m for m in tree.siblings(reply.id) if m.text == partial and m.stats is None))
            engine = llama_engine_factory(None)(model, SETTINGS, lambda fraction: None)
            try:
                tokens, ends, stepped = branch_tokens(store, engine, path)
                stored = store.get_tokens(reply.id, engine.info.fingerprint)
                assert stored is not None
                wanted = stored[len(tokens) - ends[-2]:] if gone_on else stored
                prep = engine.prepare(tokens, ends, stepped)
                assert prep.tokens_evaluated == len(tokens)  # nothing restored: a recompute
                if gone_on and not stepped[-1]:  # gone on the batch way (``continuation``)
                    (result,) = engine.generate_versions(prep.logits, [greedy], max_tokens=len(wanted))
                else:
                    result = engine.generate(prep.logits, greedy, max_tokens=len(wanted))
            finally:
                engine.close()
            if reply.stats.stop_reason == StopReason.CANCELLED:
                wanted, got = wanted, result.tokens[:len(wanted)]
            else:
                got = result.tokens
            assert got == wanted, f"reply {reply.id} differs from a recompute"
