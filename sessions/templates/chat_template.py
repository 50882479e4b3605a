"""Rendering a chat template safely; built-in templates stand in for untrusted ones.

The template inside a GGUF, and one a user points at, is untrusted code, so it runs in the
bounded sandbox (no Python internals, no endless loops, no runaway strings) with what
Hugging Face templates expect: ``raise_exception``, ``strftime_now`` and an HF-style
``tojson``. A template that cannot even render a tiny test conversation is not worth
trusting with a real one: ``ChatTemplate.compile`` refuses it with the reason in plain
words, and a built-in template (``ChatTemplate.builtin``, chosen by ``choice``)
stands in, carrying that reason so the app can tell the user instead of failing on the
first message.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import Any

from jinja2 import Template
from jinja2.exceptions import SecurityError, TemplateSyntaxError, UndefinedError

from sessions.errors import LlamachatError
from sessions.reasoning import split_reply
from sessions.templates.families import BY_NAME, builtin_source
from sessions.templates.sandbox import (
    BASE_BUILD_CHARS,
    BASE_STEPS,
    BoundedSandbox,
    RenderLimitError,
    RenderStopped,
    render_bounded,
)

MAX_SOURCE_CHARS = 1024 * 1024
"""Real chat templates are a few kilobytes; a megabyte of template is not a chat template."""


@dataclass(frozen=True)
class ChatMessage:
    """One message as the template sees it."""

    role: str
    content: str


class TemplateError(LlamachatError):
    """A chat template could not render a conversation; the message says why in plain words."""


class TemplateStopped(TemplateError):
    """A render was stopped from outside (the job's stop: Esc, Ctrl+C) before it finished."""


class _TemplateRaised(LlamachatError):
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


def _dates() -> dict[str, str]:
    """Today, as llama.cpp gives every template (``common_chat_extra_context``): Llama 3.1's
    template puts ``date_string`` in its system prompt, and says "26 Jul 2024" without it."""
    now = current_time()
    return {"datetime": now.strftime("%b %d %Y"), "date_string": now.strftime("%d %b %Y")}


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
    if isinstance(exc, RenderStopped):
        return "was stopped before it finished"
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


_NO_RETRY = (SecurityError, RenderLimitError, RenderStopped, RecursionError, MemoryError)


def template_message(message: ChatMessage) -> dict[str, str]:
    """A message as the template is given it.

    A gpt-oss reply is stored as generated, Harmony channels included
    (``<|channel|>analysis<|message|>...<|start|>assistant<|channel|>final<|message|>...``).
    Harmony templates refuse channel markup in ``content`` and take the analysis as
    ``thinking``, as chat servers pass it; given the raw text, gpt-oss's template rejects
    every conversation holding two such replies. So a reply written in channels is passed
    as its final answer, with its analysis as ``thinking``.
    """
    if message.role == "assistant" and "<|channel|>" in message.content:
        view = split_reply(message.content)
        if any(part.channel for part in view.parts):
            fields = {"role": message.role, "content": view.answer}
            return {**fields, "thinking": view.reasoning} if view.reasoning else fields
    return {"role": message.role, "content": message.content}


SYSTEM_FOLD = "\n"
"""Between system text and the user message it is folded into: llama.cpp's separator
(``workaround::system_message_not_supported`` in ``common/chat.cpp``)."""


def merge_system_messages(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """Fold system text into the next user message, for templates without a system role.

    As llama.cpp does for the leading system prompt (``SYSTEM_FOLD``). A system message
    with no user message right after it becomes a user message itself, so the
    user/assistant alternation such templates insist on is kept (llama.cpp folds it into
    whatever message follows, and drops one with nothing after it).
    """
    merged: list[ChatMessage] = []
    pending: list[str] = []
    for message in messages:
        if message.role == "system":
            pending.append(message.content)
            continue
        if pending and message.role == "user":
            message = ChatMessage("user", SYSTEM_FOLD.join([*pending, message.content]))
        elif pending:
            merged.append(ChatMessage("user", SYSTEM_FOLD.join(pending)))
        pending = []
        merged.append(message)
    if pending:
        merged.append(ChatMessage("user", SYSTEM_FOLD.join(pending)))
    return merged


@dataclass(frozen=True, eq=False)
class ChatTemplate:
    """A compiled chat template and the special-token texts it is rendered with."""

    source: str
    name: str
    """``model`` (the GGUF's own), ``override`` (the user's), or a built-in's name."""
    bos_token: str = ""
    eos_token: str = ""
    fallback_reason: str | None = None
    """Why this is not the template asked for (the user's, else the model's), in one
    sentence that also names the one used; None when it is."""
    variables: Mapping[str, Any] = field(default_factory=dict)
    merges_system: bool = False
    """True when the template has no system role: system text goes into the next user turn."""
    _compiled: Template | None = field(default=None, repr=False)
    origin: str = "the model file"
    """Where the template came from, in words: "the model file", "--chat-template-file
    PATH", "the built-in Gemma template"."""

    @property
    def subject(self) -> str:
        """The template, as the subject of a sentence: "the model's chat template",
        "the chat template in PATH", "the built-in Gemma template"."""
        if self.origin == "the model file":
            return "the model's chat template"
        if self.origin.startswith("the built-in "):
            return self.origin
        return f"the chat template in {self.origin}"

    @property
    def is_fallback(self) -> bool:
        """True when this template stands in for the one asked for (see ``fallback_reason``)."""
        return self.fallback_reason is not None

    @classmethod
    def load(cls, source: str | None, *, bos_token: str = "", eos_token: str = "",
             variables: Mapping[str, Any] | None = None) -> ChatTemplate:
        """Compile ``source`` and try it on a test conversation; ChatML if that fails.

        ``variables`` are extra template variables (``enable_thinking``, ``reasoning_effort``,
        ...) passed to every render. The engine chooses its fallback from the model's
        vocabulary instead (``choice.choose_template``).
        """
        options: dict[str, Any] = dict(bos_token=bos_token, eos_token=eos_token, variables=variables)
        if not source or not source.strip():
            return cls.builtin("chatml", reason="the model has no chat template", **options)
        try:
            return cls.compile(source, **options)
        except TemplateError as error:
            return cls.builtin("chatml", reason=f"the model's chat template {error}", **options)

    @classmethod
    def compile(cls, source: str, *, name: str = "model", origin: str = "the model file",
                bos_token: str = "", eos_token: str = "",
                variables: Mapping[str, Any] | None = None) -> ChatTemplate:
        """Compile ``source`` and try it on a test conversation.

        A template that cannot render a tiny conversation is not worth trusting with a real
        one: ``TemplateError`` then says what is wrong, as the end of a sentence starting
        with "the chat template" ("is not valid Jinja (...)").
        """
        extra = dict(variables or {})
        if not source.strip():
            raise TemplateError("is empty")
        if len(source) > MAX_SOURCE_CHARS:
            raise TemplateError(f"is {len(source):,} characters long")
        try:
            compiled = _compiled(source)
        except Exception as exc:  # a syntax error, or a template nested too deeply to compile
            raise TemplateError(_describe(exc)) from None
        problem = ""
        for merges in (False, True):
            candidate = cls(source, name, bos_token, eos_token, None, extra, merges, compiled, origin)
            try:
                text = candidate._render_once(_PROBE, add_generation_prompt=True)
            except Exception as exc:  # anything a hostile or broken template does ends here
                if isinstance(exc, RenderStopped):
                    raise TemplateStopped("was stopped before it finished rendering a test conversation") from None
                problem = problem or _describe(exc)
                if isinstance(exc, _NO_RETRY):
                    break
                continue
            if all(m.content in text for m in _PROBE if m.role != "assistant"):
                return candidate
            problem = problem or "leaves out the text of system or user messages"
        raise TemplateError(problem)

    @classmethod
    def probed(cls, source: str, *, name: str, origin: str, bos_token: str, eos_token: str,
               variables: Mapping[str, Any], fallback_reason: str | None,
               merges_system: bool) -> ChatTemplate:
        """A template ``compile`` accepted elsewhere (in the engine's child process), compiled
        again without its test render: what that probe decided is taken as it was."""
        try:
            compiled = _compiled(source)
        except Exception as exc:
            raise TemplateError(_describe(exc)) from None
        return cls(source, name, bos_token, eos_token, fallback_reason, dict(variables), merges_system,
                   compiled, origin)

    @classmethod
    def builtin(cls, name: str, *, reason: str | None = None, bos_token: str = "",
                eos_token: str = "", variables: Mapping[str, Any] | None = None) -> ChatTemplate:
        """The built-in template ``name`` (see ``families``).

        With a ``reason`` it stands in for another template, and its ``fallback_reason``
        is that reason followed by which template is used instead.
        """
        family = BY_NAME[name]
        compiled = _compiled(builtin_source(name))
        origin = f"the built-in {family.title} template"
        if reason is not None:
            reason = f"{reason}; using the {family.title} template instead"
        return cls(builtin_source(name), name, bos_token, eos_token, reason, dict(variables or {}),
                   False, compiled, origin)

    def render(self, messages: Sequence[ChatMessage], *, add_generation_prompt: bool) -> str:
        """The template's text for ``messages``; ``TemplateError`` if it cannot render them.

        A template that rejects system messages gets them merged into the next user message.
        A render stopped from outside (``sandbox.stop_renders_with``) raises ``TemplateStopped``.
        """
        try:
            return self._render_with_retry(messages, add_generation_prompt=add_generation_prompt)
        except Exception as exc:
            error = TemplateStopped if isinstance(exc, RenderStopped) else TemplateError
            raise error(f"{self.subject} {_describe(exc)}") from exc

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
            # As llama.cpp renders every template: ``tools`` and ``documents`` are left
            # undefined when there are none (Hermes' templates take ``tools is defined`` for
            # tools given); ``enable_thinking`` left undefined, DeepSeek-R1's template closes
            # the think block in the prompt and Gemma 4's leaves thinking off.
            "enable_thinking": True,
            **_dates(),
            **self.variables,
            "messages": [template_message(m) for m in messages],
            "add_generation_prompt": add_generation_prompt,
            "bos_token": self.bos_token,
            "eos_token": self.eos_token,
        }
        return render_bounded(
            self._compiled, variables,
            steps=BASE_STEPS + 500 * count + 20 * count * count,
            build_chars=BASE_BUILD_CHARS + 32 * chars,
        )


@lru_cache(maxsize=32)
def _compiled(source: str) -> Template:
    """``source`` compiled in a bounded environment of its own, once per process. A compiled
    template is only read by its renders (each keeps its budget in its thread's state,
    ``render_bounded``), and the same text comes back often: the model loaded again, the
    probe's template compiled again in the engine's process, a built-in fallback. A text
    that does not compile raises every time, as before."""
    return _environment().compile_template(source)


def _environment() -> BoundedSandbox:
    env = BoundedSandbox()
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    env.add_filter("tojson", _tojson)
    return env
