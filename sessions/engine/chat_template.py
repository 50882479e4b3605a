"""Rendering a model's chat template safely, with ChatML as the fallback.

The template inside a GGUF is untrusted code, so it runs in the bounded sandbox (no Python
internals, no endless loops, no runaway strings) with what Hugging Face templates expect:
``raise_exception``, ``strftime_now`` and an HF-style ``tojson``. A template that cannot even
render a tiny test conversation is not worth trusting with a real one: ``ChatTemplate.load``
then falls back to ChatML and says why in plain words, so the app can tell the user instead
of failing on the first message.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from jinja2 import Template
from jinja2.exceptions import SecurityError, TemplateSyntaxError, UndefinedError

from sessions.engine.template_sandbox import (
    BASE_BUILD_CHARS,
    BASE_STEPS,
    BoundedSandbox,
    RenderLimitError,
    render_bounded,
)

CHATML_SOURCE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
"""The built-in template, used when a model has none or its own cannot be trusted."""

MAX_SOURCE_CHARS = 1024 * 1024
"""Real chat templates are a few kilobytes; a megabyte of template is not a chat template."""


@dataclass(frozen=True)
class ChatMessage:
    """One message as the template sees it."""

    role: str
    content: str


class TemplateError(Exception):
    """A chat template could not render a conversation; the message says why in plain words."""


class _TemplateRaised(Exception):
    """The template called ``raise_exception``: it rejects the conversation it was given."""


_PROBE = (
    ChatMessage("system", "You are a helpful assistant."),
    ChatMessage("user", "Hello there."),
    ChatMessage("assistant", "Hi! How can I help?"),
    ChatMessage("user", "What is two plus two?"),
)


def current_time() -> datetime:
    """The clock behind ``strftime_now`` (a seam for tests)."""
    return datetime.now()


def _strftime_now(fmt: str) -> str:
    return current_time().strftime(fmt)


def _raise_exception(message: Any) -> None:
    raise _TemplateRaised(str(message))


def _tojson(value: Any, ensure_ascii: bool = False, indent: Any = None,
            separators: Any = None, sort_keys: bool = False) -> str:
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent,
                      separators=separators, sort_keys=sort_keys)


def _describe(exc: BaseException) -> str:
    """What went wrong, as the end of a sentence starting with 'the chat template'."""
    if isinstance(exc, SecurityError):
        if "attribute" in str(exc):
            return f"tried to access a forbidden attribute ({exc})"
        return f"tried something the sandbox forbids ({exc})"
    if isinstance(exc, RenderLimitError):
        return f"went past a safety limit: {exc}"
    if isinstance(exc, RecursionError):
        return "recursed too deeply"
    if isinstance(exc, MemoryError):
        return "ran out of memory"
    if isinstance(exc, _TemplateRaised):
        return f"rejected the conversation: {exc}"
    if isinstance(exc, UndefinedError):
        return f"uses something it was not given ({exc})"
    if isinstance(exc, TemplateSyntaxError):
        return f"is not valid Jinja ({exc.message}, line {exc.lineno})"
    return f"failed ({type(exc).__name__}: {exc})"


_NO_RETRY = (SecurityError, RenderLimitError, RecursionError, MemoryError)


def merge_system_messages(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """Fold system text into the next user message, for templates without a system role.

    A system message with no user message right after it becomes a user message itself,
    so the user/assistant alternation such templates insist on is kept.
    """
    merged: list[ChatMessage] = []
    pending: list[str] = []
    for message in messages:
        if message.role == "system":
            pending.append(message.content)
            continue
        if pending and message.role == "user":
            message = ChatMessage("user", "\n\n".join([*pending, message.content]))
        elif pending:
            merged.append(ChatMessage("user", "\n\n".join(pending)))
        pending = []
        merged.append(message)
    if pending:
        merged.append(ChatMessage("user", "\n\n".join(pending)))
    return merged


@dataclass(frozen=True, eq=False)
class ChatTemplate:
    """A compiled chat template and the special-token texts it is rendered with."""

    source: str
    name: str
    bos_token: str = ""
    eos_token: str = ""
    fallback_reason: str | None = None
    variables: Mapping[str, Any] = field(default_factory=dict)
    merges_system: bool = False
    """True when the template has no system role: system text goes into the next user turn."""
    _compiled: Template | None = field(default=None, repr=False)

    @property
    def is_fallback(self) -> bool:
        """True when this is ChatML standing in for the model's own template."""
        return self.fallback_reason is not None

    @classmethod
    def load(cls, source: str | None, *, bos_token: str = "", eos_token: str = "",
             variables: Mapping[str, Any] | None = None) -> ChatTemplate:
        """Compile ``source`` and try it on a test conversation; ChatML if that fails.

        ``variables`` are extra template variables (``enable_thinking``, ``reasoning_effort``,
        ...) passed to every render.
        """
        extra = dict(variables or {})
        if not source or not source.strip():
            return cls._chatml("the model has no chat template", bos_token, eos_token, extra)
        if len(source) > MAX_SOURCE_CHARS:
            reason = f"the model's chat template is {len(source):,} characters long"
            return cls._chatml(reason, bos_token, eos_token, extra)
        try:
            compiled = _environment().compile_template(source)
        except Exception as exc:  # a syntax error, or a template nested too deeply to compile
            return cls._chatml(f"the model's chat template {_describe(exc)}",
                               bos_token, eos_token, extra)
        problem = ""
        for merges in (False, True):
            candidate = cls(source, "model", bos_token, eos_token, None, extra, merges, compiled)
            try:
                text = candidate._render_once(_PROBE, add_generation_prompt=True)
            except Exception as exc:  # anything a hostile or broken template does ends here
                problem = problem or _describe(exc)
                if isinstance(exc, _NO_RETRY):
                    break
                continue
            if all(m.content in text for m in _PROBE if m.role != "assistant"):
                return candidate
            problem = problem or "leaves out the text of system or user messages"
        return cls._chatml(f"the model's chat template {problem}", bos_token, eos_token, extra)

    @classmethod
    def _chatml(cls, reason: str, bos_token: str, eos_token: str,
                variables: dict[str, Any]) -> ChatTemplate:
        compiled = _environment().compile_template(CHATML_SOURCE)
        return cls(CHATML_SOURCE, "chatml", bos_token, eos_token,
                   f"{reason}; using the ChatML template instead", variables, False, compiled)

    def render(self, messages: Sequence[ChatMessage], *, add_generation_prompt: bool) -> str:
        """The template's text for ``messages``; ``TemplateError`` if it cannot render them.

        A template that rejects system messages gets them merged into the next user message.
        """
        try:
            return self._render_with_retry(messages, add_generation_prompt=add_generation_prompt)
        except Exception as exc:
            raise TemplateError(f"the chat template {_describe(exc)}") from exc

    def _render_with_retry(self, messages: Sequence[ChatMessage], *,
                           add_generation_prompt: bool) -> str:
        try:
            return self._render_once(messages, add_generation_prompt)
        except _NO_RETRY:
            raise
        except Exception as exc:
            if self.merges_system or not any(m.role == "system" for m in messages):
                raise
            first = exc
        try:
            return self._render_once(merge_system_messages(messages), add_generation_prompt)
        except Exception:
            raise first from None

    def _render_once(self, messages: Sequence[ChatMessage], add_generation_prompt: bool) -> str:
        assert self._compiled is not None
        if self.merges_system:
            messages = merge_system_messages(messages)
        count = len(messages)
        chars = sum(len(m.content) for m in messages)
        variables = {
            "tools": None,
            "documents": None,
            **self.variables,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            "add_generation_prompt": add_generation_prompt,
            "bos_token": self.bos_token,
            "eos_token": self.eos_token,
        }
        return render_bounded(
            self._compiled, variables,
            steps=BASE_STEPS + 500 * count + 20 * count * count,
            build_chars=BASE_BUILD_CHARS + 32 * chars,
        )


def _environment() -> BoundedSandbox:
    env = BoundedSandbox()
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    env.add_filter("tojson", _tojson)
    return env
