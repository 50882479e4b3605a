"""Which checkpoint files belong to which chats, told from the files' names alone.

A file is named by the hash of the exact tokens before its end (``checkpoints.keys``), and
each message keeps the tokens every model saw for it (``controller.branch_tokens``). So a chat owns
a file when one of its branches, hashed as it goes, gives the file's name at the file's
end: exact, wherever the engine cut its segments, and one pass over each tree whatever
the number of branches (forks copy the running hash, as the tree's saved marks do). A file
another chat reaches too (the same system prompt and first message) is shared, and stays
as long as that chat does.

The chats' tokens come from the session store (``TokenSource``: the store has the shape,
and this package sits below it).
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from sessions.checkpoints.keys import PrefixHasher, model_folder
from sessions.checkpoints.listing import CheckpointFile, list_files


class TokenSource(Protocol):
    """Where the chats' tokens are read (``sessions.store.SessionStore``)."""

    def message_parents(self, session_id: int) -> dict[int, int | None]: ...
    def session_tokens(self, session_id: int) -> dict[int, dict[str, list[int]]]: ...
    def root_tokens(self, model_fingerprint: str) -> dict[int, list[list[int]]]: ...


@dataclass(frozen=True)
class ChatTokens:
    """What a chat's branches are made of: read before the chat is deleted, which takes
    its tokens with it."""

    session_id: int
    parents: dict[int, int | None]
    """Message id -> parent id (None at the top)."""
    tokens: dict[int, dict[str, list[int]]]
    """Message id -> model fingerprint -> the tokens that model saw."""

    @classmethod
    def read(cls, store: TokenSource, session_id: int) -> ChatTokens:
        return cls(session_id, store.message_parents(session_id), store.session_tokens(session_id))

    def fingerprints(self) -> set[str]:
        return {fingerprint for per_model in self.tokens.values() for fingerprint in per_model}

    def roots(self, fingerprint: str) -> list[list[int]]:
        """The tokens of the top-level messages, for one model."""
        return [self.tokens[m][fingerprint] for m, parent in self.parents.items()
                if parent is None and fingerprint in self.tokens.get(m, {})]

    def reached(self, fingerprint: str, files: _ModelFiles) -> set[str]:
        """The prefixes of ``files`` that a branch of this chat leads to, for one model."""
        children: dict[int | None, list[int]] = defaultdict(list)
        for message, parent in self.parents.items():
            children[parent if parent in self.parents else None].append(message)
        ends, found = files.ends, set()
        stack = [(root, PrefixHasher(), 0) for root in children[None]]
        while stack:
            message, before, start = stack.pop()
            tokens = self.tokens.get(message, {}).get(fingerprint)
            if tokens is None:
                continue  # not tokenized for this model: nothing below it was either
            hasher, done = before.copy(), start
            for end in ends[bisect_right(ends, start):bisect_right(ends, start + len(tokens))]:
                prefix = hasher.extend(tokens[done - start:end - start]).hexdigest()
                done = end
                if prefix in files.by_prefix:
                    found.add(prefix)
            hasher.extend(tokens[done - start:])
            stack.extend((child, hasher, start + len(tokens)) for child in children[message])
        return found


@dataclass
class _ModelFiles:
    """The files of one model's folder, by prefix, with the ends they have."""

    by_prefix: dict[str, list[CheckpointFile]] = field(default_factory=dict)
    ends: list[int] = field(default_factory=list)

    @classmethod
    def of(cls, files: Iterable[CheckpointFile]) -> _ModelFiles:
        found = cls()
        for file in files:
            if file.end is not None and file.end > 0:
                found.by_prefix.setdefault(file.key[1], []).append(file)
        found.ends = sorted({file.end for group in found.by_prefix.values() for file in group
                             if file.end is not None})
        return found


@dataclass
class Ownership:
    """The files some chats reach, split by whether any other chat reaches them too."""

    own: list[CheckpointFile] = field(default_factory=list)
    """Reached by these chats only: what deleting them frees."""
    shared: list[CheckpointFile] = field(default_factory=list)
    """Reached by another chat too."""

    @property
    def own_bytes(self) -> int:
        return sum(file.size for file in self.own)

    @property
    def shared_bytes(self) -> int:
        return sum(file.size for file in self.shared)


def ownership(store: TokenSource, chats: list[ChatTokens], files: Iterable[CheckpointFile]) -> Ownership:
    """Which of ``files`` the branches of ``chats`` reach, own and shared.

    The other chats that could share a file are only those whose first message begins
    as one of these chats' does, up to the first end these chats reach (the tokens before
    a file's end are the same on every branch that reaches it): their trees alone are read.
    """
    folders: dict[str, list[CheckpointFile]] = defaultdict(list)
    for file in files:
        folders[file.model_folder].append(file)
    ids = {chat.session_id for chat in chats}
    result = Ownership()
    for fingerprint in sorted(set().union(*(chat.fingerprints() for chat in chats))):
        model_files = _ModelFiles.of(folders.get(model_folder(fingerprint), ()))
        if not model_files.ends:
            continue
        reached = set().union(*(chat.reached(fingerprint, model_files) for chat in chats))
        if not reached:
            continue
        ours = _ModelFiles.of(file for prefix in reached for file in model_files.by_prefix[prefix])
        our_roots = [root for chat in chats for root in chat.roots(fingerprint)]
        elsewhere: set[str] = set()
        for session_id, roots in store.root_tokens(fingerprint).items():
            if session_id in ids or not _begin_alike(roots, our_roots, ours.ends[0]):
                continue
            elsewhere |= ChatTokens.read(store, session_id).reached(fingerprint, ours)
            if elsewhere == reached:
                break
        for prefix in sorted(reached):
            (result.shared if prefix in elsewhere else result.own).extend(model_files.by_prefix[prefix])
    return result


def _begin_alike(theirs: list[list[int]], ours: list[list[int]], first_end: int) -> bool:
    """Whether a branch from one of ``theirs`` can hold the same first ``first_end``
    tokens as a branch from one of ``ours``: their top-level messages agree as far as
    both go, up to there."""
    for a in theirs:
        for b in ours:
            n = min(first_end, len(a), len(b))
            if a[:n] == b[:n]:
                return True
    return False


def ownership_on_disk(store: TokenSource, chats: list[ChatTokens], directory: Path) -> Ownership:
    """``ownership`` of the files in a checkpoint folder, with no store running: only the
    folders of the models these chats were tokenized for are read (their headers, for
    the ends)."""
    models = {model_folder(fingerprint) for chat in chats for fingerprint in chat.fingerprints()}
    return ownership(store, chats, list_files(directory, models=models)) if models else Ownership()
