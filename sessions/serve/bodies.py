"""The JSON bodies of ``/v1/chat/completions`` and ``/v1/completions``, read and checked.

Every field OpenAI's API or llama-server defines for these endpoints is known here, in
one of three kinds: used (the messages, the sampling, ``n``, ``stop``, streaming),
accepted because it changes nothing of the reply (``user``, ``metadata``, a penalty of
0), or refused in a sentence because the server would not do what it asks (tools, logit
biases, log probabilities). A field no API defines is refused too, by name: a client
that misspells ``max_tokens`` must not get a reply of the default length without a word.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from sessions.sampling import BOUNDS, MOST_VERSIONS
from sessions.serve.errors import ApiError, field_error
from sessions.tree import Role

MOST_STOPS = 16
"""Stop strings a request may give (OpenAI allows 4, llama-server any number)."""
LONGEST_STOP = 1024
"""Characters in one stop string."""

ROLES: dict[str, Role] = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}
"""Message roles taken, and the tree's role for each (OpenAI's ``developer`` is a system message)."""

_IGNORED = frozenset({
    "user", "safety_identifier", "metadata", "store", "service_tier", "stream_options", "prompt_cache_key",
    "cache_prompt", "id_slot", "parallel_tool_calls", "reasoning_format", "include_reasoning", "timings_per_token",
    "return_progress",
})
"""Fields that change nothing of the reply: who asks, what a hosted API should keep, and
the cache and slot hints of OpenAI and llama-server (this server always reuses what it
holds)."""

_NEUTRAL: dict[str, tuple[Any, ...]] = {
    "frequency_penalty": (0, 0.0, None),
    "presence_penalty": (0, 0.0, None),
    "logit_bias": ({}, None),
    "logprobs": (False, None, 0),
    "top_logprobs": (0, None),
    "tools": ([], None),
    "functions": ([], None),
    "tool_choice": ("none", "auto", None),
    "function_call": ("none", "auto", None),
    "response_format": ({"type": "text"}, None),
    "echo": (False, None),
    "suffix": (None, ""),
    "best_of": (1, None),
    "typical_p": (1, 1.0, None),
    "add_generation_prompt": (True, None),
    "chat_template_kwargs": ({}, None),
    "modalities": (["text"], None),
    "reasoning_effort": (None,),
    "verbosity": (None,),
    "prediction": (None,),
    "audio": (None,),
    "web_search_options": (None,),
    "mirostat": (0, None),
    "n_probs": (0, None),
    "ignore_eos": (False, None),
}
"""Fields taken only at the value that asks for nothing; any other is refused, as the
server does not do what it asks."""

_SAMPLING = ("temperature", "top_p", "top_k", "min_p", "seed", "repeat_penalty")
_CHAT_FIELDS = frozenset({"model", "messages", "stream", "max_tokens", "max_completion_tokens", "n_predict",
                          "n", "stop", "repetition_penalty", "continue_final_message", *_SAMPLING})
_COMPLETION_FIELDS = frozenset({"model", "prompt", "stream", "max_tokens", "n_predict", "n", "stop",
                                "repetition_penalty", *_SAMPLING})


@dataclass(frozen=True)
class Sampling:
    """The sampling a request asks for: only the fields it gave (the server's defaults fill the rest)."""

    values: dict[str, Any] = field(default_factory=dict)
    max_tokens: int | None = None


@dataclass(frozen=True)
class ChatRequest:
    model: str | None
    messages: list[tuple[Role, str]]
    continue_last: bool
    """The last message is a reply to go on from (a trailing assistant message, as llama-server)."""
    sampling: Sampling
    n: int
    stop: list[str]
    stream: bool
    include_usage: bool


@dataclass(frozen=True)
class CompletionRequest:
    model: str | None
    prompt: str | list[int]
    sampling: Sampling
    n: int
    stop: list[str]
    stream: bool
    include_usage: bool


def chat_request(body: Any) -> ChatRequest:
    """A ``/v1/chat/completions`` body, checked (``ApiError`` saying what is wrong)."""
    body = _object(body)
    _check_fields(body, _CHAT_FIELDS)
    messages = _messages(body.get("messages"))
    if len(messages) > 1 and messages[-1] == ("assistant", "") and body.get("continue_final_message") is None:
        messages.pop()  # an empty reply to go on from: a reply, as a client that sends one means
    trailing = messages[-1][0] == "assistant"
    wanted = body.get("continue_final_message")
    if wanted is not None and not isinstance(wanted, bool):
        raise field_error("continue_final_message", "must be true or false")
    continue_last = trailing if wanted is None else wanted
    if continue_last and not trailing:
        raise field_error("continue_final_message", "the last message must be the assistant's to go on from it")
    if trailing and len(messages) > 1 and messages[-2][0] == "assistant":
        raise field_error("messages", "two assistant messages at the end: only the last one can be gone on from")
    n = _count(body.get("n"))
    if continue_last and n > 1:
        raise field_error("n", "a reply is gone on from once per request (n must be 1 with a trailing "
                               "assistant message)")
    return ChatRequest(_model(body), messages, continue_last, _sampling(body), n, _stops(body.get("stop")),
                       _flag(body, "stream"), _include_usage(body))


def completion_request(body: Any) -> CompletionRequest:
    """A ``/v1/completions`` body, checked (``ApiError`` saying what is wrong)."""
    body = _object(body)
    _check_fields(body, _COMPLETION_FIELDS)
    return CompletionRequest(_model(body), _prompt(body.get("prompt")), _sampling(body), _count(body.get("n")),
                             _stops(body.get("stop")), _flag(body, "stream"), _include_usage(body))


def _object(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise ApiError("the request body must be a JSON object")
    return body


def _check_fields(body: dict[str, Any], used: frozenset[str]) -> None:
    for name, value in body.items():
        if name in used or name in _IGNORED:
            continue
        if name in _NEUTRAL:
            if not any(value == neutral and type(value) is type(neutral) for neutral in _NEUTRAL[name]):
                raise field_error(name, f"{_json_short(value)} is not supported by llamachat serve; leave it out "
                                        f"or give {_json_short(_NEUTRAL[name][0])}")
            continue
        raise field_error(name, "unknown field (see `llamachat serve` in docs/serve.md for the fields it takes)")


def _json_short(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _model(body: dict[str, Any]) -> str | None:
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise field_error("model", "must be a string")
    return model


def _flag(body: dict[str, Any], name: str) -> bool:
    value = body.get(name, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise field_error(name, "must be true or false")
    return value


def _include_usage(body: dict[str, Any]) -> bool:
    options = body.get("stream_options")
    if options is None:
        return False
    if not isinstance(options, dict):
        raise field_error("stream_options", "must be an object")
    return _flag(options, "include_usage")


def _messages(value: Any) -> list[tuple[Role, str]]:
    if not isinstance(value, list) or not value:
        raise field_error("messages", "must be a non-empty array of messages")
    messages: list[tuple[Role, str]] = []
    for index, message in enumerate(value):
        where = f"messages[{index}]"
        if not isinstance(message, dict):
            raise field_error(where, "must be an object with a role and a content")
        unknown = set(message) - {"role", "content", "name"}
        if "tool_calls" in unknown or "tool_call_id" in unknown or "function_call" in unknown:
            raise field_error(where, "tool calls are not supported by llamachat serve")
        if unknown:
            raise field_error(where, f"unknown field {sorted(unknown)[0]!r} in a message")
        role = message.get("role")
        if role not in ROLES:
            raise field_error(f"{where}.role", f"{_json_short(role)} is not a role llamachat serve takes "
                                               "(system, developer, user, assistant)")
        messages.append((ROLES[role], _content(message.get("content"), where)))
    return messages


def _content(value: Any, where: str) -> str:
    """A message's text: a string, or an array of text parts (joined, as llama-server joins them)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return _text(value, f"{where}.content")
    if not isinstance(value, list):
        raise field_error(f"{where}.content", "must be a string or an array of text parts")
    parts = []
    for index, part in enumerate(value):
        if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
            kind = part.get("type") if isinstance(part, dict) else None
            what = f"parts of type {kind!r} are" if isinstance(kind, str) else "this part is"
            raise field_error(f"{where}.content[{index}]", f"{what} not supported: only text parts "
                                                            '({"type": "text", "text": ...})')
        parts.append(part["text"])
    return _text("".join(parts), f"{where}.content")


def _text(text: str, where: str) -> str:
    if "\x00" in text:
        raise field_error(where, "holds a NUL character")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise field_error(where, "holds a lone surrogate, which is not text") from None
    return text


def _prompt(value: Any) -> str | list[int]:
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], str):
        value = value[0]
    if isinstance(value, str):
        if not value:
            raise field_error("prompt", "is empty")
        return _text(value, "prompt")
    if isinstance(value, list) and value and all(isinstance(t, int) and not isinstance(t, bool) for t in value):
        if min(value) < 0:
            raise field_error("prompt", "token ids cannot be negative")
        return list(value)
    raise field_error("prompt", "must be a non-empty string, or a non-empty array of token ids "
                                "(one prompt per request)")


def _count(value: Any) -> int:
    if value is None:
        return 1
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MOST_VERSIONS:
        raise field_error("n", f"must be a whole number from 1 to {MOST_VERSIONS}")
    return value


def _stops(value: Any) -> list[str]:
    if value is None:
        return []
    stops = [value] if isinstance(value, str) else value
    if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
        raise field_error("stop", "must be a string or an array of strings")
    if len(stops) > MOST_STOPS:
        raise field_error("stop", f"at most {MOST_STOPS} stop strings")
    for stop in stops:
        _text(stop, "stop")
        if len(stop) > LONGEST_STOP:
            raise field_error("stop", f"a stop string is at most {LONGEST_STOP} characters")
    return [stop for stop in stops if stop]


def _sampling(body: dict[str, Any]) -> Sampling:
    values: dict[str, Any] = {}
    for name in (*_SAMPLING, "repetition_penalty"):
        value = body.get(name)
        if value is None:
            continue
        setting = "repeat_penalty" if name == "repetition_penalty" else name
        integer = setting in ("top_k", "seed")
        if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)):
            raise field_error(name, "must be a whole number" if integer else "must be a number")
        low, high = BOUNDS[setting]
        if name == "top_k" and value < 0:
            value = 0  # llama-server: top_k <= 0 turns it off
        if not (math.isfinite(value) and low <= value <= high):
            raise field_error(name, f"must be from {low:g} to {high:g}")
        values[setting] = value
    return Sampling(values, _max_tokens(body))


def _max_tokens(body: dict[str, Any]) -> int | None:
    for name in ("max_completion_tokens", "max_tokens", "n_predict"):
        value = body.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise field_error(name, "must be a whole number")
        if value == -1 and name == "n_predict":
            return None  # llama-server: until the context is full
        low, high = BOUNDS["max_tokens"]
        if not low <= value <= high:
            raise field_error(name, f"must be from {low:g} to {high:g}")
        return value
    return None
