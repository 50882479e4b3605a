"""A request's work on the engine thread: put it in its chat, write the reply, measure it.

The request goes into the tree through the controller (``place_request``, or
``place_prompt`` for a raw prompt), and its reply is written as the app writes one: a
new reply (``generate_reply``), ``n`` versions at once in one batch
(``generate_versions``), or more of a reply the request ends with (``continue_reply``).
Each is stored under its question and streamed as it comes, cut at the request's stop
strings; once every choice has met one, the reply is stopped and kept as a stopped reply.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sessions.api.chat import PlacedRequest, ServedMessage, SessionController
from sessions.errors import GenerationCancelled
from sessions.events import Event, NoticeRaised, TextStreamed
from sessions.sampling import SamplingSettings
from sessions.serve.bodies import ChatRequest, CompletionRequest, Sampling
from sessions.serve.engine_thread import Job, Text
from sessions.serve.errors import ApiError
from sessions.serve.stop_words import StopWatch
from sessions.stop_reason import StopReason
from sessions.tree import Message

log = logging.getLogger("llamachat.serve")


class ClientGone(ApiError):
    """The client left (or the server stops) before its reply was written."""

    def __init__(self) -> None:
        super().__init__("the reply was stopped (the client left, or the server is shutting down); what was "
                         "written of it is kept as a stopped reply", 503)


def _kept_stopped(placed: PlacedRequest, replies: list[Message]) -> None:
    """Say that a request whose client left has its reply so far kept, stopped."""
    ids = ", ".join(str(reply.id) for reply in replies)
    log.info("chat %d: the client left; the reply so far is kept as a stopped reply (message %s)",
             placed.session_id, ids)


@dataclass(frozen=True)
class Choice:
    index: int
    text: str
    """What was sent of the reply: up to its first stop string."""
    finish_reason: str
    """``stop`` (the model ended its turn, or a stop string came) or ``length``."""
    message_id: int


@dataclass(frozen=True)
class Written:
    """A request's replies, and what it cost, as the response reports it."""

    choices: list[Choice]
    session_id: int
    prompt_tokens: int
    completion_tokens: int
    prompt_n: int
    """Tokens of the prompt evaluated (the rest was restored or still live)."""
    prompt_ms: float
    predicted_n: int
    predicted_ms: float
    reused: int
    """The request's messages found stored in the chat."""

    @property
    def cached_tokens(self) -> int:
        return max(0, self.prompt_tokens - self.prompt_n)


class Streaming:
    """The controller's events of one request: each choice's text, cut at the stop strings."""

    def __init__(self, job: Job, controller: SessionController, count: int, stops: Sequence[str]) -> None:
        self.job = job
        self.controller = controller
        self.watches = [StopWatch(stops) for _ in range(count)]
        self.sent: list[list[str]] = [[] for _ in range(count)]

    def listen(self, event: Event) -> None:
        if isinstance(event, TextStreamed):
            index = event.version or 0
            if index < len(self.watches):
                self._send(index, self.watches[index].push(event.text))
                if all(watch.stopped for watch in self.watches):
                    self.controller.cancel()  # every choice met a stop string: nothing more is wanted
        elif isinstance(event, NoticeRaised):
            log.warning("%s", event.text)

    def finish(self, index: int) -> str:
        self._send(index, self.watches[index].finish())
        return "".join(self.sent[index])

    def _send(self, index: int, text: str) -> None:
        if text:
            self.sent[index].append(text)
            self.job.report(Text(index, text))


def chat_work(request: ChatRequest, defaults: SamplingSettings,
              patience: float) -> Callable[[SessionController, Job], Written]:
    """The work of a ``/v1/chat/completions`` request; ``patience``: seconds it may wait for
    another process writing a reply in its chat."""

    def work(controller: SessionController, job: Job) -> Written:
        streaming = Streaming(job, controller, request.n, request.stop)
        job.listener = streaming.listen
        messages = [ServedMessage(role, text) for role, text in request.messages]
        placed = controller.place_request(messages, continue_last=request.continue_last,
                                          should_stop=_give_up(job, patience))
        return _write(controller, job, streaming, placed, _settings(request.sampling, defaults), request.n)

    return work


def completion_work(request: CompletionRequest, defaults: SamplingSettings,
                    patience: float) -> Callable[[SessionController, Job], Written]:
    """The work of a ``/v1/completions`` request (``patience`` as ``chat_work``'s)."""

    def work(controller: SessionController, job: Job) -> Written:
        streaming = Streaming(job, controller, request.n, request.stop)
        job.listener = streaming.listen
        placed = controller.place_prompt(request.prompt, should_stop=_give_up(job, patience))
        if placed.continues and request.n > 1:
            controller.end_turn()
            raise ApiError("n: this prompt ends with a reply, which is gone on from once per request (n must be 1)",
                           400, param="n")
        return _write(controller, job, streaming, placed, _settings(request.sampling, defaults), request.n)

    return work


def _give_up(job: Job, patience: float) -> Callable[[], bool]:
    """When to stop waiting for another process's reply in the chat: the client left, or
    ``patience`` ran out (the chat's turn is then refused, 503)."""
    deadline = time.monotonic() + patience
    return lambda: job.gone.is_set() or time.monotonic() > deadline


def _settings(sampling: Sampling, defaults: SamplingSettings) -> SamplingSettings:
    settings = defaults.with_(**sampling.values)
    return settings.with_(max_tokens=sampling.max_tokens) if sampling.max_tokens else settings


def _write(controller: SessionController, job: Job, streaming: Streaming, placed: PlacedRequest,
           settings: SamplingSettings, n: int) -> Written:
    if job.gone.is_set():
        controller.end_turn()
        raise ClientGone()
    try:
        if placed.continues:
            replies = [controller.continue_reply(placed.last.id, sampling=settings)]
        elif n == 1:
            replies = [controller.generate_reply(sampling=settings, after_system=True)]
        else:
            replies = controller.generate_versions(n, sampling=settings, after_system=True)
    except GenerationCancelled:
        if job.gone.is_set():
            log.info("chat %d: the client left before the reply began; its messages are kept", placed.session_id)
            raise ClientGone() from None
        raise
    if job.gone.is_set():  # stopped by the client's leaving: nobody to answer
        _kept_stopped(placed, replies)
        raise ClientGone()
    return _written(streaming, placed, replies)


def _written(streaming: Streaming, placed: PlacedRequest, replies: list[Message]) -> Written:
    choices = []
    generated = 0
    predicted_ms = 0.0
    for index, reply in enumerate(replies):
        stats = reply.stats
        assert stats is not None  # a reply written here has its stats
        new = stats.tokens_generated - (placed.last_tokens if placed.continues else 0)
        generated += new
        if stats.generation_tps > 0 and new > 1:
            predicted_ms += 1000 * (new - 1) / stats.generation_tps
        stopped = streaming.watches[index].stopped
        reason = "stop" if stopped or stats.stop_reason in (StopReason.EOG, StopReason.CANCELLED) else "length"
        choices.append(Choice(index, streaming.finish(index), reason, reply.id))
    first = replies[0].stats
    assert first is not None
    written = Written(choices, placed.session_id, placed.prompt_tokens, generated, first.tokens_evaluated,
                      1000 * first.prompt_seconds, generated, predicted_ms, placed.reused)
    log.info("chat %d: %d prompt tokens (%d of its messages found stored), %d evaluated in %.2f s, %d generated",
             placed.session_id, written.prompt_tokens, placed.reused, written.prompt_n, written.prompt_ms / 1000,
             generated)
    return written
