"""Importing an OpenAI ChatGPT data export (``conversations.json``).

The export is a list of conversations, each a ``mapping`` of nodes linked by ``parent``
and ``children``, with ``current_node`` marking the branch on screen. Every branch is
kept. Nodes that are not conversation text (the empty root, hidden system context, custom
instructions, tool calls and tool output, reasoning summaries) are skipped, and their
children are attached to the nearest kept ancestor so the shape of the tree survives.
"""

from __future__ import annotations

from typing import Any

from sessions.exchange.builder import ExchangeError, ImportedMessage, ImportedSession, save_sessions
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


def message_text(message: Any) -> str | None:
    """The visible text of a node's message, or None when the node should be skipped."""
    if not isinstance(message, dict):
        return None
    role = (message.get("author") or {}).get("role")
    metadata = message.get("metadata") or {}
    content = message.get("content") or {}
    if role not in _ROLES or metadata.get("is_visually_hidden_from_conversation"):
        return None
    if message.get("recipient", "all") not in ("all", None):
        return None  # a call to a tool, not a reply to the user
    if content.get("content_type", "text") not in _TEXT_TYPES:
        return None
    text = "\n".join(p for p in (_part_text(part) for part in content.get("parts") or []) if p)
    return text if text.strip() else None


def _kept_ancestor(mapping: dict[str, Any], key: str | None, kept: set[str]) -> str | None:
    seen: set[str] = set()
    while key is not None and key not in kept:
        if key in seen or key not in mapping:
            return None
        seen.add(key)
        key = mapping[key].get("parent")
    return key


def read_conversation(data: dict[str, Any], where: str) -> ImportedSession:
    mapping = data["mapping"]
    order: list[str] = []
    texts: dict[str, str] = {}
    for key, node in mapping.items():
        if not isinstance(node, dict):
            raise ExchangeError(f"{where}: node {key!r} is not an object")
        order.append(key)
        text = message_text(node.get("message"))
        if text is not None:
            texts[key] = text
    kept = set(texts)
    position = {key: i for i, key in enumerate(order)}
    for node in mapping.values():  # the parent's own list gives the sibling order
        for i, child in enumerate(node.get("children") or []):
            if child in position:
                position[child] = i
    messages: list[ImportedMessage] = []
    fallback_time = data.get("create_time")
    for key in sorted(kept, key=lambda k: (_time(mapping[k]["message"], fallback_time), position[k])):
        message = mapping[key]["message"]
        messages.append(
            ImportedMessage(
                key=key,
                parent=_kept_ancestor(mapping, mapping[key].get("parent"), kept),
                role=message["author"]["role"],
                text=texts[key],
                created_at=_time(message, fallback_time) or None,
            )
        )
    current = data.get("current_node")
    active = _kept_ancestor(mapping, current, kept) if isinstance(current, str) else None
    title = data.get("title")
    created = data.get("create_time")
    return ImportedSession(
        title=title if isinstance(title, str) else "",
        messages=messages,
        active=active,
        created_at=float(created) if isinstance(created, (int, float)) else None,
    )


def _time(message: dict[str, Any], fallback: Any) -> float:
    value = message.get("create_time")
    if isinstance(value, (int, float)):
        return float(value)
    return float(fallback) if isinstance(fallback, (int, float)) else 0.0


def import_chatgpt(store: SessionStore, data: Any) -> list[int]:
    """One new session per conversation; returns their ids in file order."""
    items = data if isinstance(data, list) else [data]
    if not items:
        raise ExchangeError("the ChatGPT export holds no conversations")
    sessions = []
    for index, item in enumerate(items):
        title = item.get("title") if isinstance(item, dict) else None
        where = f"conversation {index + 1}" + (f" ({title!r})" if isinstance(title, str) else "")
        if not isinstance(item, dict) or not isinstance(item.get("mapping"), dict):
            raise ExchangeError(f"{where} has no 'mapping' of messages")
        sessions.append(read_conversation(item, where))
    return save_sessions(store, sessions, "ChatGPT export")
