"""Importing an OpenAI ChatGPT data export (``conversations.json``).

The export is a list of conversations, each a ``mapping`` of nodes linked by ``parent``
and ``children``, with ``current_node`` marking the branch on screen. Every branch is
kept. Nodes that are not conversation text (the empty root, hidden system context, custom
instructions, tool calls and tool output, reasoning summaries) are skipped, and their
children are attached to the nearest kept ancestor so the shape of the tree survives.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from sessions.config.type_words import kind_of
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

_TEXT_TYPES = ("text", "multimodal_text")
_ROLES = ("system", "user", "assistant")


def looks_like_chatgpt(data: Any) -> bool:
    items = data if isinstance(data, list) else [data]
    return any(isinstance(i, dict) and "mapping" in i for i in items)


def _part_text(part: Any) -> str:
    if isinstance(part, str):
        return part
    if isinstance(part, dict):
        if isinstance(part.get("text"), str):
            return part["text"]
        if "image" in str(part.get("content_type", "")):
            return "[image]"
    return ""


def message_text(message: Any, where: str = "a node") -> str | None:
    """The visible text of a node's message, or None when the node should be skipped."""
    if message is None:
        return None
    message = fields.mapping(message, where, "message", optional=False)
    role = fields.mapping(message.get("author"), where, "author").get("role")
    metadata = fields.mapping(message.get("metadata"), where, "metadata")
    content = fields.mapping(message.get("content"), where, "content")
    if role not in _ROLES or metadata.get("is_visually_hidden_from_conversation"):
        return None
    if message.get("recipient", "all") not in ("all", None):
        return None  # a call to a tool, not a reply to the user
    if content.get("content_type", "text") not in _TEXT_TYPES:
        return None
    parts = fields.listing(content.get("parts"), where, "content.parts")
    text = "\n".join(p for p in (_part_text(part) for part in parts) if p)
    return text if text.strip() else None


def _kept_ancestor(mapping: dict[str, Any], key: str | None, kept: set[str]) -> str | None:
    seen: set[str] = set()
    while key is not None and key not in kept:
        if key in seen or key not in mapping:
            return None
        seen.add(key)
        key = mapping[key].get("parent")
    return key


def _node(mapping: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    node = mapping[key]
    if not isinstance(node, dict):
        raise ExchangeError(f"{where}: node {key!r} is not an object")
    parent = node.get("parent")
    if parent is not None and not isinstance(parent, str):
        raise ExchangeError(f"{where}: node {key!r}: 'parent' should be a node id, found {kind_of(parent, json=True)}")
    children = fields.listing(node.get("children"), f"{where}: node {key!r}", "children")
    if not all(isinstance(child, str) for child in children):
        raise ExchangeError(f"{where}: node {key!r}: 'children' should be a list of node ids")
    return node


def read_conversation(data: dict[str, Any], where: str) -> ImportedSession:
    mapping = data["mapping"]
    order: list[str] = []
    texts: dict[str, str] = {}
    times: dict[str, float | None] = {}
    fallback_time = fields.number(_plain(data.get("create_time")), where, "create_time")
    for key in mapping:
        node = _node(mapping, key, where)
        order.append(key)
        text = message_text(node.get("message"), f"{where}: node {key!r}")
        if text is not None:
            texts[key] = text
            stamp = fields.number(_plain(node["message"].get("create_time")), f"{where}: node {key!r}",
                                  "create_time")
            times[key] = stamp if stamp is not None else fallback_time
    kept = set(texts)
    position = {key: i for i, key in enumerate(order)}
    for node in mapping.values():  # the parent's own list gives the sibling order
        for i, child in enumerate(node.get("children") or []):
            if child in position:
                position[child] = i
    messages = [
        ImportedMessage(
            key=key,
            parent=_kept_ancestor(mapping, mapping[key].get("parent"), kept),
            role=mapping[key]["message"]["author"]["role"],
            text=texts[key],
            created_at=times[key] or None,
        )
        for key in sorted(kept, key=lambda k: (times[k] or 0.0, position[k]))
    ]
    current = data.get("current_node")
    active = _kept_ancestor(mapping, current, kept) if isinstance(current, str) else None
    title = data.get("title")
    return ImportedSession(
        title=title if isinstance(title, str) else "",
        messages=messages,
        active=active,
        created_at=fallback_time,
    )


def _plain(value: Any) -> Any:
    """A time as ChatGPT writes it (a number), anything else taken as absent."""
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def import_chatgpt(store: SessionStore, data: Any, should_stop: StopCheck | None = None, *,
                   sampling: SamplingSettings | None = None) -> Imported:
    """One new session per readable conversation; returns their ids in file order."""
    items = data if isinstance(data, list) else [data]
    if not items:
        raise ExchangeError("the ChatGPT export holds no conversations")
    sessions = []
    skipped = []
    for index, item in enumerate(items):
        title = item.get("title") if isinstance(item, dict) else None
        where = f"conversation {index + 1}" + (f" ({title!r})" if isinstance(title, str) else "")
        try:
            if not isinstance(item, dict) or not isinstance(item.get("mapping"), dict):
                raise ExchangeError(f"{where} has no 'mapping' of messages")
            sessions.append(replace(read_conversation(item, where), entry=where))
        except ExchangeError as error:  # this conversation only (see ``builder``)
            skipped.append(Skipped(str(error)))
    return save_sessions(store, sessions, "ChatGPT export", should_stop, sampling=sampling, skipped=skipped)
