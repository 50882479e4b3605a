"""Which chats reach a checkpoint file: exact at the file's end, wherever messages were cut."""

from __future__ import annotations

from pathlib import Path

from sessions.checkpoints import CheckpointFile, prefix_hash
from sessions.checkpoints.keys import model_folder
from sessions.checkpoints.owners import ChatTokens, ownership

MODEL = "sha256:" + "ef" * 32
SYSTEM = list(range(1, 11))


def chat(store, *pieces: list[int]) -> int:
    """A linear chat whose messages hold ``pieces`` as their tokens for MODEL."""
    session = store.create_session()
    parent = None
    for n, piece in enumerate(pieces):
        parent = store.add_message(session.id, parent, "system" if n == 0 else "user", f"m{n}").id
        store.set_tokens(parent, MODEL, piece)
    return session.id


def file_at(branch: list[int], end: int) -> CheckpointFile:
    prefix = prefix_hash(branch[:end])
    path = Path("/nowhere") / model_folder(MODEL) / f"{'0' * 32}-{prefix}.snap"
    return CheckpointFile(("compat", prefix, "snapshot"), path, 100, end)


def test_a_file_inside_a_message_is_reached_by_every_chat_with_the_same_tokens_before_it(store) -> None:
    a = chat(store, SYSTEM, [50, 51])
    d = chat(store, SYSTEM[:5] + [99] * 5, [50, 51])  # the same first five tokens only
    e = chat(store, SYSTEM[:3], SYSTEM[3:], [60])  # the same tokens, cut into other messages
    at5, at10, at12 = file_at(SYSTEM, 5), file_at(SYSTEM, 10), file_at(SYSTEM + [50, 51], 12)
    files = [at5, at10, at12]
    found = ownership(store, [ChatTokens.read(store, a)], files)
    assert (found.own, found.shared) == ([at12], sorted([at5, at10], key=lambda f: f.key[1]))
    assert ownership(store, [ChatTokens.read(store, d)], files).shared == [at5]
    only_e = ownership(store, [ChatTokens.read(store, e)], files)
    assert only_e.own == [] and {f.end for f in only_e.shared} == {5, 10}
    both = ownership(store, [ChatTokens.read(store, a), ChatTokens.read(store, e)], files)
    assert {f.end for f in both.own} == {10, 12} and both.shared == [at5]  # d still needs the first


def test_only_chats_that_begin_alike_are_read(store, monkeypatch) -> None:
    a = chat(store, SYSTEM, [50, 51])
    alike = chat(store, SYSTEM, [70])
    others = [chat(store, [200 + n] + SYSTEM[1:], [50, 51]) for n in range(5)]
    read: list[int] = []
    real_read = ChatTokens.read.__func__  # type: ignore[attr-defined]

    def spy(cls, store_, session_id):
        read.append(session_id)
        return real_read(cls, store_, session_id)

    monkeypatch.setattr(ChatTokens, "read", classmethod(spy))
    found = ownership(store, [real_read(ChatTokens, store, a)], [file_at(SYSTEM, 10), file_at(SYSTEM + [50, 51], 12)])
    assert {f.end for f in found.own} == {12} and {f.end for f in found.shared} == {10}
    assert read == [alike] and not set(others) & set(read)


def test_files_of_other_models_and_unreadable_files_belong_to_no_chat(store) -> None:
    a = chat(store, SYSTEM)
    elsewhere = CheckpointFile(("c", prefix_hash(SYSTEM), "cells"), Path("/nowhere") / ("12" * 16) / "x.ckpt", 1, 10)
    unread = CheckpointFile(("c", prefix_hash(SYSTEM), "cells"), file_at(SYSTEM, 10).path, 1, None)
    found = ownership(store, [ChatTokens.read(store, a)], [elsewhere, unread])
    assert (found.own, found.shared) == ([], [])
