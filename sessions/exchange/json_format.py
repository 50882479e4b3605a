"""llamachat's own JSON format: a lossless copy of one session.

Everything the store knows about a session travels: settings, every branch, generation
stats, the frozen tokens per model fingerprint, the remembered branches and the head. The
file carries a ``format`` marker and a ``format_version`` so that a file from a newer
llamachat is refused with a clear message instead of being half understood.

Importing takes everything but the token ids. Anyone can compute the fingerprint of a
public model, so a shared file could carry ids that make the model read a different
question from the one on screen, or ids out of the vocabulary that break the session;
the tokens are computed again from the text when the session is first used.
"""

from __future__ import annotations

import time
from typing import Any

from sessions.config.type_words import kind_of, type_word
from sessions.exchange import fields
from sessions.exchange.builder import (
    ExchangeError,
    Imported,
    ImportedMessage,
    ImportedSession,
    StopCheck,
    save_sessions,
)
from sessions.sampling import SamplingSettings
from sessions.store import SessionStore
from sessions.store.values import is_id

FORMAT = "llamachat-session"
FORMAT_VERSION = 1


def export_json(store: SessionStore, session_id: int) -> dict[str, Any]:
    """The session as a dict for ``json.dumps``.

    The session, its messages and remembered branches come from one read, so another
    process deleting or adding messages meanwhile cannot leave ``active_leaf`` naming a
    message the file lacks. Tokens are a separate read: a list for a message gone since
    is not written, and a message without one gets its tokens computed again.
    """
    session, tree = store.load_session_tree(session_id)
    tokens = store.session_tokens(session_id)
    remembered = tree.remembered()
    messages = sorted((m for root in tree.roots() for m in (root, *tree.descendants(root.id))),
                      key=lambda m: m.id)
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "exported_at": time.time(),
        "session": {
            "id": session.id,
            "title": session.title,
            "created_at": session.created_at,
            "updated_at": session.updated_at,
            "model_path": session.model_path,
            "model_fingerprint": session.model_fingerprint,
            "system_prompt": session.system_prompt,
            "sampling": session.sampling.to_dict(),
        },
        "messages": [
            {
                "id": m.id,
                "parent": m.parent_id,
                "role": m.role,
                "text": m.text,
                "created_at": m.created_at,
                "stats": None if m.stats is None else m.stats.to_dict(),
                "tokens": tokens.get(m.id, {}),
            }
            for m in messages
        ],
        "remembered_children": [
            {"parent": parent, "child": child} for parent, child in sorted(
                remembered.items(), key=lambda item: (item[0] is not None, item[0] or 0)
            )
        ],
        "active_leaf": session.active_leaf_id,
    }


def _field(data: dict[str, Any], name: str, kinds: tuple[type, ...], where: str) -> Any:
    value = data.get(name)
    if not isinstance(value, kinds) or isinstance(value, bool) and bool not in kinds:
        wanted = " or ".join(type_word(kind, json=True) for kind in kinds)
        raise ExchangeError(f"{where}: '{name}' should be {wanted}, found {kind_of(value, json=True)}")
    return value


def _id_field(data: dict[str, Any], name: str, where: str, *, optional: bool = False) -> int | None:
    """An id of the file: a whole number a database row can have (below 2^63), or None
    where ``optional``; a larger number is no id, whatever else in the file names it."""
    value = _field(data, name, (int, type(None)) if optional else (int,), where)
    if value is not None and not is_id(value):
        raise ExchangeError(f"{where}: '{name}' is {value}, which is not an id (ids are whole numbers "
                            "from -2^63 to 2^63 - 1)")
    return value


def _message(data: Any, index: int) -> ImportedMessage:
    where = f"message {index + 1}"
    if not isinstance(data, dict):
        raise ExchangeError(f"{where} is not an object")
    stats = _field(data, "stats", (dict, type(None)), where)
    _field(data, "created_at", (int, float, type(None)), where)
    return ImportedMessage(
        key=_id_field(data, "id", where),
        parent=_id_field(data, "parent", where, optional=True),
        role=_field(data, "role", (str,), where),
        text=_field(data, "text", (str,), where),
        created_at=fields.number(data.get("created_at"), where, "created_at"),
        stats=fields.stats(stats, where),
    )  # "tokens" is not read: see the module's docstring


def read_json(data: dict[str, Any]) -> ImportedSession:
    """Check and translate a parsed llamachat file (``ExchangeError`` if anything is off)."""
    version = data.get("format_version")
    if type(version) is not int:
        raise ExchangeError("the llamachat file has no valid 'format_version'")
    if version > FORMAT_VERSION:
        raise ExchangeError(
            f"the file was written by a newer llamachat (format version {version}; "
            f"this version reads up to {FORMAT_VERSION})"
        )
    session = _field(data, "session", (dict,), "the file")
    raw_messages = _field(data, "messages", (list,), "the file")
    remembered: dict[Any, Any] = {}
    for entry in _field(data, "remembered_children", (list, type(None)), "the file") or []:
        if not isinstance(entry, dict):
            raise ExchangeError("the file: 'remembered_children' entries should be objects")
        remembered[_id_field(entry, "parent", "remembered child", optional=True)] = _id_field(
            entry, "child", "remembered child"
        )
    sampling = _field(session, "sampling", (dict, type(None)), "session")
    _field(session, "created_at", (int, float, type(None)), "session")
    created = fields.number(session.get("created_at"), "session", "created_at")
    return ImportedSession(
        title=_field(session, "title", (str, type(None)), "session") or "",
        messages=[_message(item, i) for i, item in enumerate(raw_messages)],
        active=_id_field(data, "active_leaf", "the file", optional=True),
        remembered=remembered,
        created_at=created,
        model_path=_field(session, "model_path", (str, type(None)), "session"),
        model_fingerprint=_field(session, "model_fingerprint", (str, type(None)), "session"),
        system_prompt=_field(session, "system_prompt", (str, type(None)), "session"),
        sampling=fields.sampling(sampling, "session"),
    )


def import_json(store: SessionStore, data: dict[str, Any], should_stop: StopCheck | None = None, *,
                sampling: SamplingSettings | None = None) -> Imported:
    return save_sessions(store, [read_json(data)], "llamachat file", should_stop, sampling=sampling)
