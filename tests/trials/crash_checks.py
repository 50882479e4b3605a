"""What is checked after every kill: the database, the messages, the checkpoint files.

A kill may land anywhere, so the checks assume nothing about where it landed: the
database must open without any repair, every message seen before must still be there
unchanged, and every checkpoint file must pass the same verification a restore makes
(a torn write may leave a temp file behind, never a bad file under a final name).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from sessions.checkpoints import CheckpointStore
from sessions.checkpoints.errors import CorruptCheckpointError
from sessions.checkpoints.file_format import HEADER_SIZE, check_header, check_payload, parse_header
from sessions.checkpoints.keys import parse_address
from sessions.llama.detokenizer import Detokenizer
from sessions.llama.model import LlamaModel
from sessions.store import SessionStore, StoreError


@dataclass(frozen=True)
class StoredMessage:
    session_id: int
    parent_id: int | None
    role: str
    text: str


@dataclass(frozen=True)
class Heads:
    """Per session: the head (active leaf) and every message, as the database has them."""

    messages: dict[int, StoredMessage]
    heads: dict[int, int | None]


class DatabaseProblem(Exception):
    """The database did not open cleanly after a kill."""


def read_database(path: Path) -> Heads:
    """Every message and head; raises ``DatabaseProblem`` when opening needed any repair."""
    try:
        store = SessionStore.open(path)
    except StoreError as error:
        raise DatabaseProblem(f"the database does not open: {error}") from None
    with store:
        if store.recovery_notice:
            raise DatabaseProblem(f"opening needed a recovery: {store.recovery_notice}")
        messages: dict[int, StoredMessage] = {}
        heads: dict[int, int | None] = {}
        for summary in store.list_sessions():
            heads[summary.id] = store.get_session(summary.id).active_leaf_id
            for m in store.messages(summary.id):
                messages[m.id] = StoredMessage(m.session_id, m.parent_id, m.role, m.text)
    return Heads(messages, heads)


def copy_database(source: Path, target: Path) -> None:
    """A consistent copy (committed WAL content included) through SQLite's backup API."""
    target.parent.mkdir(parents=True, exist_ok=True)
    src = sqlite3.connect(source)
    dst = sqlite3.connect(target)
    try:
        src.backup(dst)
    finally:
        dst.close()
        src.close()


@dataclass
class CheckpointScan:
    """Counts from one pass over the checkpoint folder."""

    temp_before: int = 0
    """Temp files present before the store opened (a write cut short by a kill)."""
    temp_after: int = 0
    problems: list[str] | None = None
    """What the store reported while building its index (each a deleted bad file)."""
    verified: int = 0
    bad: list[str] | None = None
    """Files under a final name that fail full verification (must never happen)."""


class CheckpointScanner:
    """Opens the store as a restarted program would, then verifies new files fully."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._seen: dict[Path, tuple[int, int]] = {}

    def _files(self, suffix: str) -> list[Path]:
        if not self.directory.is_dir():
            return []
        return [p for folder in self.directory.iterdir() if folder.is_dir()
                for p in folder.iterdir() if p.name.endswith(suffix)]

    def scan(self) -> CheckpointScan:
        result = CheckpointScan(problems=[], bad=[])
        result.temp_before = len(self._files(".tmp"))
        with CheckpointStore(self.directory, ram_bytes=1 << 20, disk_bytes=1 << 50,
                             on_problem=result.problems.append) as store:
            store.flush()  # the index is built: bad headers reported, dead writers' temps gone
        result.temp_after = len(self._files(".tmp"))
        for path in self._files(".ckpt") + self._files(".snap"):
            try:
                info = path.stat()
            except FileNotFoundError:
                continue
            stamp = (info.st_size, info.st_mtime_ns)
            if self._seen.get(path) == stamp:
                continue
            reason = verify_file(path)
            result.verified += 1
            if reason is None:
                self._seen[path] = stamp
            else:
                result.bad.append(f"{path.name}: {reason}")
        return result


def verify_file(path: Path) -> str | None:
    """Why ``path`` would be refused by a restore (header, size, payload), or None."""
    expected = parse_address(path.parent.name, path.name)
    if expected is None:
        return "not a checkpoint file name"
    try:
        with open(path, "rb") as src:
            size = os.fstat(src.fileno()).st_size
            header = parse_header(src.read(HEADER_SIZE))
            check_header(header, expected, size)
            check_payload(header, src.read(header.state_len), src.read(header.logits_len))
    except CorruptCheckpointError as error:
        return error.reason
    except OSError as error:
        return f"unreadable: {error.strerror}"
    return None


class ReplyTexts:
    """Re-derives each stored reply's text from its sampled tokens, with the model's vocabulary.

    A reply's text and its token ids are stored side by side; the text shown and exported
    must be the tokens read as one run of bytes, whatever cut and continue made the reply
    (a cut can fall between the bytes of one character).
    """

    def __init__(self, model_paths: Iterable[Path]) -> None:
        self._models = {}
        for path in model_paths:
            model = LlamaModel(path, on_progress=lambda _fraction: None)
            self._models[model.info.fingerprint] = model

    def mismatches(self, db: Path, message_ids: Iterable[int]) -> tuple[int, list[str]]:
        """How many replies were compared, and one line for each whose text is not its tokens."""
        compared, problems = 0, []
        with SessionStore.open(db) as store:
            for mid in message_ids:
                message = store.get_message(mid)
                stats = message.stats
                model = self._models.get(stats.sampled_by) if stats is not None else None
                tokens = store.get_tokens(mid, stats.sampled_by) if model is not None and stats is not None else None
                if message.role != "assistant" or model is None or not tokens:
                    continue
                compared += 1
                detok = Detokenizer(model.piece)
                for token in tokens:
                    detok.push(token)
                detok.finish()
                if detok.text != message.text:
                    problems.append(f"message {mid} is stored as {message.text!r} but its tokens read {detok.text!r}")
        return compared, problems

    def close(self) -> None:
        for model in self._models.values():
            model.close()
