"""Importing conversations exported from the llama.cpp server's web UI.

The web UI (``tools/server/webui``) downloads either one ``{"conv": ..., "messages": [...]}``
object or a list of them ("export all"). ``conv`` has ``id``, ``name``, ``lastModified``
(ms) and ``currNode``; each message has ``id``, ``convId``, ``type`` (``root``, ``text``,
``think``, ``system``, ``tool``), ``role``, ``content``, ``parent``, ``children``,
``timestamp`` (ms), optional ``timings`` and attachments in ``extra``.

The invisible ``root`` node and tool messages are skipped (their children move up to the
nearest kept ancestor); a single-conversation download may hold only the visible path, so
a parent missing from the file makes a message top-level rather than failing. Text
attachments are appended to the message, since the model saw them as part of it; other
attachments leave a ``[image: name]``-style note. The ``thinking`` text is not kept: it
was never part of the conversation the model continued from.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from sessions.exchange import fields
from sessions.exchange.builder import (
    ExchangeError,
    Imported,
    ImportedMessage,
    ImportedSession,
    Skipped,
    StopCheck,
    save_sessions,
)
from sessions.sampling import SamplingSettings
from sessions.store import SessionStore
from sessions.tree import GenerationStats

_ROLES = ("system", "user", "assistant")


def looks_like_webui(data: Any) -> bool:
    items = data if isinstance(data, list) else [data]
    return any(isinstance(i, dict) and "conv" in i and "messages" in i for i in items)


def _stats(timings: Any, where: str) -> GenerationStats | None:
    if not isinstance(timings, dict):
        return None

    def number(name: str) -> float:
        value = fields.number(timings.get(name) or 0, where, f"timings.{name}") or 0.0
        if not 0 <= value < 2**63:
            raise ExchangeError(f"{where}: 'timings.{name}' is out of range ({timings.get(name)!r})")
        return value

    generated, generation_ms = number("predicted_n"), number("predicted_ms")
    return GenerationStats(
        tokens_restored=int(number("cache_n")),
        tokens_evaluated=int(number("prompt_n")),
        tokens_generated=int(generated),
        prompt_seconds=number("prompt_ms") / 1000.0,
        generation_tps=generated * 1000.0 / generation_ms if generation_ms > 0 else 0.0,
    )


def _with_attachments(content: str, extras: Any) -> str:
    pieces = [content] if content else []
    for extra in extras if isinstance(extras, list) else []:
        if not isinstance(extra, dict):
            continue
        name = str(extra.get("name") or "attachment")
        kind = str(extra.get("type") or "file").lower()
        body = extra.get("content")
        if isinstance(body, str) and body.strip():
            pieces.append(f"[{kind}: {name}]\n{body}")
        else:
            pieces.append(f"[{kind}: {name}]")
    return "\n\n".join(pieces)


def _kept(message: dict[str, Any]) -> bool:
    if message.get("type") in ("root", "tool") or message.get("role") not in _ROLES:
        return False
    return bool(str(message.get("content") or "").strip() or message.get("extra"))


def read_conversation(item: dict[str, Any], where: str) -> ImportedSession:
    conv, raw = item.get("conv"), item.get("messages")
    if not isinstance(conv, dict):
        raise ExchangeError(f"{where}: 'conv' should be an object")
    if not isinstance(raw, list) or not all(isinstance(m, dict) for m in raw):
        raise ExchangeError(f"{where}: 'messages' should be a list of objects")
    by_id: dict[str, dict[str, Any]] = {}
    for message in raw:
        key = message.get("id")
        if not isinstance(key, str) or not key:
            raise ExchangeError(f"{where}: a message has no 'id'")
        if not isinstance(message.get("content", ""), str):
            raise ExchangeError(f"{where}: message {key!r} has content that is not text")
        fields.listing(message.get("extra"), f"{where}: message {key!r}", "extra")
        if key in by_id:  # keeping either copy would hide the other: refuse, as the builder does
            raise ExchangeError(f"{where}: message id {key!r} appears twice")
        by_id[key] = message
    kept = {key for key, message in by_id.items() if _kept(message)}

    def kept_parent(key: Any) -> str | None:
        seen: set[str] = set()
        while isinstance(key, str) and key in by_id and key not in kept and key not in seen:
            seen.add(key)
            key = by_id[key].get("parent")
        return key if isinstance(key, str) and key in kept else None

    def when(message: dict[str, Any]) -> float:
        stamp = message.get("timestamp")
        if not isinstance(stamp, (int, float)) or isinstance(stamp, bool):
            return 0.0
        return (fields.number(stamp, f"{where}: message {message['id']!r}", "timestamp") or 0.0) / 1000.0

    ordered = sorted(kept, key=lambda k: (when(by_id[k]), k))
    messages = [
        ImportedMessage(
            key=key,
            parent=kept_parent(by_id[key].get("parent")),
            role=by_id[key]["role"],
            text=_with_attachments(by_id[key].get("content") or "", by_id[key].get("extra")),
            created_at=when(by_id[key]) or None,
            stats=(_stats(by_id[key].get("timings"), f"{where}: message {key!r}")
                   if by_id[key]["role"] == "assistant" else None),
        )
        for key in ordered
    ]
    current = conv.get("currNode")
    name = conv.get("name")
    return ImportedSession(
        title=name if isinstance(name, str) else "",
        messages=messages,
        active=kept_parent(current),
        created_at=min((m.created_at for m in messages if m.created_at), default=None),
    )


def import_webui(store: SessionStore, data: Any, should_stop: StopCheck | None = None, *,
                 sampling: SamplingSettings | None = None) -> Imported:
    """One new session per readable conversation; returns their ids in file order."""
    items = data if isinstance(data, list) else [data]
    if not items:
        raise ExchangeError("the llama.cpp web UI export holds no conversations")
    sessions = []
    skipped = []
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            skipped.append(Skipped(f"conversation {index + 1} is not an object"))
            continue
        name = (item.get("conv") or {}).get("name") if isinstance(item.get("conv"), dict) else None
        where = f"conversation {index + 1}" + (f" ({name!r})" if isinstance(name, str) else "")
        try:
            sessions.append(replace(read_conversation(item, where), entry=where))
        except ExchangeError as error:  # this conversation only (see ``builder``)
            skipped.append(Skipped(str(error)))
    return save_sessions(store, sessions, "llama.cpp web UI export", should_stop, sampling=sampling,
                         skipped=skipped)
