"""The HTTP side: Starlette routes for the endpoints OpenAI clients and llama-server's use.

Handlers run on the event loop and never wait on the model: a completion becomes a job
on the engine thread (``engine_thread``), and its handler reads what the job reports.
A streamed completion begins once the job has written its first text (or failed), so a
request refused on the way (a context too small, a template that cannot render it) gets
its error with its status code; a client that leaves, before or during its reply, stops
its job, and what was written of the reply is kept as a stopped reply.

Every refusal is an ``ApiError`` in OpenAI's error shape: a body that is too large, too
slow to arrive, not JSON, or holds fields the server does not take; a model it does not
serve; a missing or wrong API key; a full queue; a path or method it does not have.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from sse_starlette import EventSourceResponse
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from sessions.api.chat import TemplateError
from sessions.api.library import StoreError
from sessions.errors import (
    ContextOverflow,
    ControllerError,
    GenerationCancelled,
    LlamachatError,
    ReplyNotSaved,
    TurnTaken,
)
from sessions.sampling import SamplingSettings
from sessions.serve.bodies import chat_request, completion_request
from sessions.serve.engine_thread import Done, EngineThread, Failed, Job, Report, Started, Text
from sessions.serve.errors import ApiError
from sessions.serve.responses import Completion
from sessions.serve.writing import Written, chat_work, completion_work

log = logging.getLogger("llamachat.serve")

DRAIN = 8
"""A body over the limit is read and dropped up to this many times the limit, so that its
client gets the refusal; beyond that the connection is closed on it."""

SHUTDOWN_GRACE = 5.0
"""Seconds a stream has to end properly once the server stops: its reply is stopped at
once, and the stream ends with an error event saying so rather than cut off."""

PUBLIC = frozenset({"/health", "/v1/health"})
"""Paths answered without an API key (a load balancer's health check has none), as llama-server."""


@dataclass(frozen=True)
class Limits:
    max_body: int
    """Bytes a request body may hold."""
    body_seconds: float
    """How long a request body may take to arrive."""
    queue_seconds: float
    """How long a request may wait for the model behind others."""


@dataclass(frozen=True)
class ServedModel:
    id: str
    """The name ``/v1/models`` lists and requests name it by."""
    names: frozenset[str]
    """Every name a request may give it by: its id, its file's name, stem and path."""
    n_ctx: int
    created: int
    details: dict[str, Any]


class Api:
    """The endpoints, over one engine thread and one model."""

    def __init__(self, engine: EngineThread, model: ServedModel, *, api_keys: tuple[str, ...], limits: Limits,
                 defaults: SamplingSettings) -> None:
        self.engine = engine
        self.model = model
        self.api_keys = api_keys
        self.limits = limits
        self.defaults = defaults

    def app(self) -> Starlette:
        routes = [
            Route("/health", self.health, methods=["GET"]),
            Route("/v1/health", self.health, methods=["GET"]),
            Route("/v1/models", self.models, methods=["GET"]),
            Route("/models", self.models, methods=["GET"]),
            Route("/v1/chat/completions", self.chat, methods=["POST"]),
            Route("/chat/completions", self.chat, methods=["POST"]),
            Route("/v1/completions", self.completions, methods=["POST"]),
            Route("/completions", self.completions, methods=["POST"]),
        ]
        handlers: dict[Any, Callable[..., Any]] = {HTTPException: _http_error, ApiError: _api_error,
                                                   Exception: _unexpected}
        return Starlette(routes=routes, exception_handlers=handlers)

    # -- the endpoints ------------------------------------------------------------------

    async def health(self, request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def models(self, request: Request) -> Response:
        self._check_key(request)
        entry = {"id": self.model.id, "object": "model", "created": self.model.created, "owned_by": "llamachat",
                 "meta": {"n_ctx": self.model.n_ctx, **self.model.details}}
        return JSONResponse({"object": "list", "data": [entry]})

    async def chat(self, request: Request) -> Response:
        self._check_key(request)
        body = chat_request(await self._body(request))
        self._check_model(body.model)
        job = Job(asyncio.get_running_loop(), chat_work(body, self.defaults, self.limits.queue_seconds))
        return await self._answer(request, job, Completion.new("chat", self.model.id), body.stream,
                                  body.include_usage, body.n)

    async def completions(self, request: Request) -> Response:
        self._check_key(request)
        body = completion_request(await self._body(request))
        self._check_model(body.model)
        job = Job(asyncio.get_running_loop(), completion_work(body, self.defaults, self.limits.queue_seconds))
        return await self._answer(request, job, Completion.new("text", self.model.id), body.stream,
                                  body.include_usage, body.n)

    # -- checks -------------------------------------------------------------------------

    def _check_key(self, request: Request) -> None:
        if not self.api_keys or request.url.path in PUBLIC:
            return
        given = request.headers.get("authorization", "") or request.headers.get("x-api-key", "")
        given = given.removeprefix("Bearer ").strip()
        if not any(hmac.compare_digest(given.encode(), key.encode()) for key in self.api_keys):
            raise ApiError("invalid API key: send it as `Authorization: Bearer KEY` (--api-key of llamachat serve)",
                           401, code="invalid_api_key")

    def _check_model(self, name: str | None) -> None:
        if name is not None and name not in self.model.names:
            raise ApiError(f"the model {name!r} is not served here; this server serves {self.model.id!r} "
                           "(GET /v1/models)", 404, param="model", code="model_not_found")

    async def _body(self, request: Request) -> Any:
        """The request's JSON body, read within the limits of size and time.

        A body over the limit is still read to its end (up to ``DRAIN`` times the limit)
        before the refusal is sent: a client writes its whole body before it reads the
        answer, and would meet a closed connection instead of the sentence that says why.
        """
        limit = self.limits.max_body
        length = request.headers.get("content-length", "")
        declared = int(length) if length.isdigit() else None

        async def read() -> bytes | int:
            chunks: list[bytes] = []
            size = 0
            async for chunk in request.stream():
                size += len(chunk)
                if size <= limit:
                    chunks.append(chunk)
                elif size > DRAIN * limit:
                    break
            return b"".join(chunks) if size <= limit else size

        if declared is not None and declared > DRAIN * limit:
            raise _too_large(declared, limit)
        try:
            raw = await asyncio.wait_for(read(), self.limits.body_seconds)
        except TimeoutError:
            raise ApiError(f"the request body did not arrive within {self.limits.body_seconds:g} s", 408) from None
        if isinstance(raw, int):
            raise _too_large(declared or raw, limit)
        try:
            return json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
        except UnicodeDecodeError:
            raise ApiError("the request body is not UTF-8 text") from None
        except json.JSONDecodeError as error:
            raise ApiError(f"the request body is not valid JSON: {error.msg} (line {error.lineno}, "
                           f"column {error.colno})") from None
        except RecursionError:
            raise ApiError("the request body's JSON is nested too deeply") from None

    # -- answering ----------------------------------------------------------------------

    async def _answer(self, request: Request, job: Job, completion: Completion, stream: bool,
                      include_usage: bool, count: int) -> Response:
        """Queue ``job`` and answer with what it reports: one JSON response, or a stream."""
        self.engine.submit(job)
        disconnected = asyncio.ensure_future(_disconnected(request))
        handed_over = False
        try:
            started = await _next(job, disconnected, self.limits.queue_seconds)
            if started is None and not disconnected.done():
                raise ApiError(f"the model stayed busy with other requests for {self.limits.queue_seconds:g} s "
                               "(--timeout); retry later", 503)
            if not isinstance(started, Started):
                return _gone_or_failed(started)
            first = await _next(job, disconnected)
            if not stream:
                while isinstance(first, Text):  # the reply's text comes whole with its result
                    first = await _next(job, disconnected)
                if isinstance(first, Done):
                    return JSONResponse(completion.whole(first.result))
                return _gone_or_failed(first)
            if not isinstance(first, (Text, Done)):
                return _gone_or_failed(first)
            disconnected.cancel()  # the stream's response listens for the client from here on
            handed_over = True
            return EventSourceResponse(self._stream(job, completion, first, include_usage, count), ping=15,
                                       sep="\n", shutdown_grace_period=SHUTDOWN_GRACE)
        finally:
            disconnected.cancel()
            if not handed_over:
                self.engine.cancel(job)  # gone, timed out or answered: a job still waiting is dropped

    async def _stream(self, job: Job, completion: Completion, first: Report, include_usage: bool,
                      count: int) -> AsyncIterator[dict[str, str]]:
        """The chunks of a streamed completion, then ``[DONE]``; an error met after the
        first text ends the stream with an error event, as llama-server sends it."""
        finished = False
        try:
            opening = completion.opening(count)
            if opening is not None:
                yield _event(opening)
            item: Report | None = first
            while isinstance(item, Text):
                yield _event(completion.text_chunk(item.index, item.text))
                item = await job.reports.get()
            if isinstance(item, Done):
                written: Written = item.result
                for chunk in completion.closing(written, include_usage):
                    yield _event(chunk)
                yield {"data": "[DONE]"}
            elif isinstance(item, Failed):
                yield _event(to_api_error(item.error).body())
            finished = True
        finally:
            if not finished:
                self.engine.cancel(job)  # the client left mid-stream: the reply stops and is kept


async def _disconnected(request: Request) -> None:
    """Return once the client has gone (its body already read)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


async def _next(job: Job, disconnected: asyncio.Future[None], timeout: float | None = None) -> Report | None:
    """The job's next report; None when the client left first, or ``timeout`` ran out."""
    getter: asyncio.Future[Any] = asyncio.ensure_future(job.reports.get())
    waited: set[asyncio.Future[Any]] = {getter, disconnected}
    done, _ = await asyncio.wait(waited, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    if getter in done:
        return getter.result()
    getter.cancel()
    return None


def _gone_or_failed(report: Report | None) -> Response:
    if isinstance(report, Failed):
        raise to_api_error(report.error)
    return Response(status_code=499)  # the client has gone: nobody reads this


def _too_large(size: int, limit: int) -> ApiError:
    return ApiError(f"the request body is {size:,} bytes; this server takes at most {limit:,} (--max-body)", 413)


def _event(data: dict[str, Any]) -> dict[str, str]:
    return {"data": json.dumps(data, ensure_ascii=False)}


def _no_constant(name: str) -> Any:
    raise json.JSONDecodeError(f"{name} is not a JSON number", name, 0)


def to_api_error(error: BaseException) -> ApiError:
    """The answer to a job's failure: the core's refusals in plain words, with their status."""
    if isinstance(error, ApiError):
        return error
    if isinstance(error, ContextOverflow):
        return ApiError(f"{error}: shorten the conversation, or start the server with a larger context (-c)",
                        400, code="context_length_exceeded", error_type="exceed_context_size_error")
    if isinstance(error, TemplateError):
        return ApiError(f"the conversation cannot be rendered: {error}", 400, param="messages")
    if isinstance(error, TurnTaken):
        return ApiError(f"another llamachat is writing a reply in this chat (session {error.session_id}) and "
                        "has not finished within the wait allowed (--timeout); retry later", 503)
    if isinstance(error, GenerationCancelled):
        return ApiError("the reply was stopped before it began: the server is shutting down", 503)
    if isinstance(error, ReplyNotSaved):
        return ApiError(str(error), 500)
    if isinstance(error, ControllerError):
        return ApiError(str(error), 400)
    if isinstance(error, StoreError):
        return ApiError(f"the chat database could not be used: {error}", 503)
    if isinstance(error, LlamachatError):
        return ApiError(str(error), 500)
    log.error("a request failed", exc_info=error)
    return ApiError(f"the server failed on this request ({type(error).__name__}: {error})", 500)


async def _api_error(request: Request, error: Exception) -> Response:
    api = error if isinstance(error, ApiError) else to_api_error(error)
    return JSONResponse(api.body(), status_code=api.status)


async def _http_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, HTTPException)
    if error.status_code == 404:
        api = ApiError(f"there is no {request.url.path} here (see docs/serve.md for the endpoints)", 404)
    elif error.status_code == 405:
        api = ApiError(f"{request.method} is not a method {request.url.path} takes", 405)
    else:
        api = ApiError(str(error.detail), error.status_code)
    return JSONResponse(api.body(), status_code=api.status)


async def _unexpected(request: Request, error: Exception) -> Response:
    return await _api_error(request, to_api_error(error))

