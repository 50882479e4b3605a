"""Turning a parsed conversation from any format into a new session, all or nothing.

Each reader (our JSON, the llama.cpp web UI, ChatGPT) only translates its file into
``ImportedSession`` values; this module checks the tree they describe and writes it inside
one store transaction, so a file that fails halfway leaves no half-made session behind.
All checking happens before that transaction, which holds the store's lock (see
``save_sessions``).

An export of many conversations (a ChatGPT ``conversations.json`` holds thousands) is
read entry by entry: an entry that cannot be read is skipped whole (``Skipped``, a
sentence naming it and why) and the others are imported, since one damaged chat must not
cost the user all the others. A file none of whose entries can be read is refused.

An imported file comes from anywhere, so nothing in it is trusted: every text must be
valid Unicode, every time a real time, and no token ids are taken from it (the tokens a
model sees are computed from the text when the session is first used; a file's ids
could make the model read something other than what the screen shows). Nor is the model
it names: the path is kept, to show, but without a fingerprint, so that it is loaded
only once the user chooses it (``Session.model_to_reopen``).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sessions.errors import LlamachatError
from sessions.sampling import SamplingSettings
from sessions.store import InvalidValue, NewMessage, SessionStore
from sessions.store.values import check_text, check_time
from sessions.tree import ROLES, GenerationStats, Role


class ExchangeError(LlamachatError):
    """A file cannot be imported (or a session exported); the message says what is wrong."""


class ImportStopped(ExchangeError):
    """The import was asked to stop (Ctrl+C) before its transaction committed: nothing was saved."""

    def __init__(self) -> None:
        super().__init__("the import was stopped before it was saved: nothing was imported")


@dataclass(frozen=True)
class Skipped:
    """An entry of a file that could not be read, so was not imported; the others were."""

    reason: str
    """What is wrong, naming the entry: ``conversation 2 ('Trip') has no 'mapping' of messages``."""

    def line(self) -> str:
        return f"not imported: {self.reason}"


class Imported(list[int]):
    """The new sessions' ids in file order, and the entries skipped on the way (``skipped``)."""

    def __init__(self, ids: Iterable[int] = (), skipped: Iterable[Skipped] = ()) -> None:
        super().__init__(ids)
        self.skipped: tuple[Skipped, ...] = tuple(skipped)


StopCheck = Callable[[], bool]
"""Asked between the steps of an import: True when it is to stop (``ImportStopped``)."""


Key = Hashable


@dataclass(frozen=True)
class ImportedMessage:
    """One message as read from a file; ``key`` and ``parent`` are the file's own ids."""

    key: Key
    parent: Key | None
    role: Role
    text: str
    created_at: float | None = None
    stats: GenerationStats | None = None


@dataclass
class ImportedSession:
    """One conversation as read from a file, ready to be written as a new session."""

    title: str = ""
    messages: list[ImportedMessage] = field(default_factory=list)
    active: Key | None = None
    remembered: dict[Key | None, Key] = field(default_factory=dict)
    created_at: float | None = None
    model_path: str | None = None
    model_fingerprint: str | None = None
    system_prompt: str | None = None
    sampling: Mapping[str, Any] | None = None
    """The sampling settings the file names (checked); the others are the configured ones."""
    entry: str | None = None
    """Which entry of a file of many this is (``conversation 2 ('Trip')``); such an entry is
    skipped when it cannot be read. None: the file's only content, refused with the file."""


def parents_first(messages: list[ImportedMessage], where: str) -> list[ImportedMessage]:
    """Order messages so every parent comes before its children, siblings kept in order.

    Raises ``ExchangeError`` for repeated ids, unknown parents, bad roles and cycles.
    """
    by_key: dict[Key, ImportedMessage] = {}
    children: dict[Key | None, list[Key]] = {None: []}
    for message in messages:
        if message.key in by_key:
            raise ExchangeError(f"{where}: message id {message.key!r} appears twice")
        if message.role not in ROLES:
            raise ExchangeError(f"{where}: message {message.key!r} has unknown role {message.role!r}")
        if not isinstance(message.text, str):
            raise ExchangeError(f"{where}: message {message.key!r} has no text")
        checked(check_text, message.text, f"{where}: the text of message {message.key!r}")
        checked(check_time, message.created_at, f"{where}: the time of message {message.key!r}")
        by_key[message.key] = message
        children.setdefault(message.key, [])
    for message in messages:
        if message.parent is not None and message.parent not in by_key:
            raise ExchangeError(
                f"{where}: message {message.key!r} has parent {message.parent!r}, which is not in the file"
            )
        children[message.parent].append(message.key)
    ordered: list[ImportedMessage] = []
    stack = list(reversed(children[None]))
    while stack:
        key = stack.pop()
        ordered.append(by_key[key])
        stack.extend(reversed(children[key]))
    if len(ordered) != len(messages):
        raise ExchangeError(f"{where}: some messages form a loop and never reach a first message")
    return ordered


def checked(check, value, what: str):
    """``check(value, what)`` with the store's refusal turned into this module's error."""
    try:
        return check(value, what)
    except InvalidValue as error:
        raise ExchangeError(str(error)) from None


def _check_session(session: ImportedSession, where: str) -> None:
    for value, name in ((session.title, "title"), (session.model_path, "model path"),
                        (session.model_fingerprint, "model fingerprint"),
                        (session.system_prompt, "system prompt")):
        if value is not None:
            checked(check_text, value, f"{where}: the {name}")
    checked(check_time, session.created_at, f"{where}: the session's creation time")


def save_sessions(store: SessionStore, sessions: list[ImportedSession], where: str,
                  should_stop: StopCheck | None = None, *,
                  sampling: SamplingSettings | None = None, skipped: Iterable[Skipped] = ()) -> Imported:
    """Write every session in one transaction; returns the new session ids in order.

    ``skipped``: the entries the reader could not read; a session of an entry (``entry``)
    that fails its checks joins them, and the others are saved. With nothing left to save,
    ``ExchangeError`` says why.

    ``sampling``: the settings of a session whose file names none (the user's configured
    ones, so an imported chat replies as a new one would).

    Everything is checked and put in the store's terms first: the transaction, which holds
    the store's lock (the app's reads wait for it), runs only the writes.

    ``should_stop`` is asked before each step and last just before the commit, so a stop
    asked for while the import waited for another process's write lock, or wrote a
    large file, rolls everything back (``ImportStopped``). It is not asked once the
    commit has begun: the caller that stopped then gets the ids, and can say they exist.
    """
    def check() -> None:
        if should_stop is not None and should_stop():
            raise ImportStopped()

    plans = []
    left_out = list(skipped)
    for session in sessions:
        check()
        try:
            plans.append(_plan(session, session.entry or where))
        except ExchangeError as error:
            if session.entry is None:
                raise
            left_out.append(Skipped(str(error)))
    if left_out and not plans:
        if len(left_out) == 1:
            raise ExchangeError(left_out[0].reason)
        raise ExchangeError(f"none of its {len(left_out)} conversations can be read; the first: "
                            f"{left_out[0].reason}")
    created: list[int] = []
    with store.transaction():
        for plan in plans:
            check()
            created.append(_save_one(store, plan, sampling))
        check()
    return Imported(created, left_out)


@dataclass(frozen=True)
class _Plan:
    """One checked session, its messages parents first; messages named by their position."""

    session: ImportedSession
    messages: list[NewMessage]
    head: int | None
    remember: dict[int | None, int]
    """The branch to show under each parent (None: the top level), the head's path included."""


def _plan(session: ImportedSession, where: str) -> _Plan:
    _check_session(session, where)
    ordered = parents_first(session.messages, where)
    position = {message.key: index for index, message in enumerate(ordered)}
    messages = [
        NewMessage(None if m.parent is None else position[m.parent], m.role, m.text, m.stats, m.created_at)
        for m in ordered
    ]
    if session.active is not None and session.active not in position:
        raise ExchangeError(f"{where}: the active message {session.active!r} is not in the file")
    remember: dict[int | None, int] = {}
    for parent_key, child_key in session.remembered.items():
        parent = None if parent_key is None else position.get(parent_key)
        child = position.get(child_key)
        known_parent = parent_key is None or parent is not None
        if known_parent and child is not None and messages[child].parent == parent:
            remember[parent] = child
    head = None if session.active is None else position[session.active]
    step = head
    while step is not None:  # the head's path is the branch shown, whatever the file remembered
        remember[messages[step].parent] = step
        step = messages[step].parent
    return _Plan(session, messages, head, remember)


def _save_one(store: SessionStore, plan: _Plan, sampling: SamplingSettings | None) -> int:
    session = plan.session
    record = store.create_session(
        title=session.title,
        model_path=session.model_path,
        model_fingerprint=None,  # no model was loaded for it here (see ``Session.model_to_reopen``)
        system_prompt=session.system_prompt,
        sampling=(sampling or SamplingSettings()).with_(**session.sampling) if session.sampling else sampling,
        created_at=session.created_at,
    )
    ids = store.add_messages(record.id, plan.messages)
    if plan.head is not None or plan.remember:
        store.set_active_leaf(
            record.id, None if plan.head is None else ids[plan.head],
            remember={None if parent is None else ids[parent]: ids[child] for parent, child in plan.remember.items()},
        )
    return record.id
