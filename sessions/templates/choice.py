"""Choosing the chat template a model is talked to with, and saying why.

In order of preference: the template the user chose (``--chat-template-file`` or the
config), the one inside the GGUF, then a built-in template of the format the vocabulary
reveals (``sessions.templates.families``). Each candidate that is missing or refused adds its
reason, so the one sentence the user reads (``ChatTemplate.fallback_reason``) says what
was wrong and what is used instead, e.g. "the model has no chat template; using the Gemma
template instead (its vocabulary has <start_of_turn>, <end_of_turn>)".

A vocabulary without any chat markers is a base model's: it continues text rather than
answers, and the user is told so plainly; it still gets a plain transcript, so the chat
works.

Built-in templates are Jinja files rendered by the same ``ChatTemplate`` as any other,
rather than llama.cpp's ``llama_chat_apply_template``: the per-message token freezing
(``message_tokens``) renders with sentinel contents and histories of its own choosing, so
every template must go through one renderer whose output can be checked against itself
in plain Python; a second, native renderer would be a second set of rules to keep exact.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import replace
from typing import Any

from sessions.templates.chat_template import ChatTemplate, TemplateError
from sessions.templates.families import PLAIN, detect_family
from sessions.templates.override import OverrideUnreadable, TemplateOverride

BASE_MODEL = ("this looks like a base model (its vocabulary has no chat markers): "
              "replies will continue your text rather than answer it")
"""What a user is told when the vocabulary has no chat markers and no template works."""


def choose_template(model_template: str | None, special_tokens: Collection[str], *,
                    override: TemplateOverride | None = None, bos_token: str = "",
                    eos_token: str = "", variables: Mapping[str, Any] | None = None) -> ChatTemplate:
    """The template to use; its ``fallback_reason`` says why when it is not the first choice.

    ``special_tokens`` are the chat markers that are single control tokens of the model's
    vocabulary (``LlamaModel.special_tokens(ALL_MARKERS)``).
    """
    options: dict[str, Any] = dict(bos_token=bos_token, eos_token=eos_token, variables=variables)
    reasons: list[str] = []
    if override is not None:
        chosen = _try_override(override, reasons, options)
        if chosen is not None:
            return chosen
    if model_template and model_template.strip():
        try:
            own = ChatTemplate.compile(model_template, **options)
        except TemplateError as error:
            reasons.append(f"the model's chat template {error}")
        else:
            if not reasons:
                return own
            reason = f"{', and '.join(reasons)}; using the model's own template instead"
            return _with_reason(own, reason)
    else:
        reasons.append("the model has no chat template")
    family = detect_family(special_tokens)
    if family is None:
        return ChatTemplate.builtin(PLAIN.name, reason=f"{', and '.join(reasons)}, and {BASE_MODEL}", **options)
    fallback = ChatTemplate.builtin(family.name, reason=", and ".join(reasons), **options)
    found = ", ".join(family.markers)
    return _with_reason(fallback, f"{fallback.fallback_reason} (its vocabulary has {found})")


def _try_override(override: TemplateOverride, reasons: list[str],
                  options: dict[str, Any]) -> ChatTemplate | None:
    """The user's template, or None with the reason it was refused added to ``reasons``."""
    name = override.builtin_name
    if name is not None and override.file is None:
        chosen = ChatTemplate.builtin(name, **options)
        return _with_origin(chosen, f"{chosen.origin} (set in {override.where})")
    try:
        source = override.read()
    except OverrideUnreadable as error:
        reasons.append(f"{override.describe()} {error}")
        return None
    origin = str(override.file) if override.file is not None else override.where
    try:
        return ChatTemplate.compile(source, name="override", origin=origin, **options)
    except TemplateError as error:
        reasons.append(f"{override.describe()} {error}")
        return None


def _with_reason(template: ChatTemplate, reason: str) -> ChatTemplate:
    return replace(template, fallback_reason=reason)


def _with_origin(template: ChatTemplate, origin: str) -> ChatTemplate:
    return replace(template, origin=origin)
