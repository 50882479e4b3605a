"""Storing a reply once it is written: under its question, whatever happened meanwhile.

A reply takes seconds to minutes to write, and another window or command may change the
chat in that time. The reply is first stored on the head it was asked on (its question,
or the reply a continuation extends), as every change is. If the head has moved since
(another window paged to another branch, or stored a reply of its own elsewhere), the
reply still belongs under its question: it is stored there all the same and becomes the
head, as the newest message of the chat. It is lost only when it cannot be stored at
all, and then ``ReplyNotSaved`` says what was lost and what is kept:

- its question was deleted in another window (nothing is left to answer);
- the database refused the write: a full disk, another program holding it, a file
  replaced under this process (``sessions.store`` errors).

The reply's checkpoint files, written as it was generated, then belong to no message.
They are never read again (nothing leads to their token prefix) and they are leaves of
no active branch, the first class of files the disk tier evicts when it needs room.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from sessions.controller.conversation import Conversation
from sessions.errors import ReplyNotSaved
from sessions.store import ChatChanged, DatabaseFull, HeadMoved, ParentGone, StoreError
from sessions.tree import GenerationStats, Message

MOVES = 5
"""How many times in a row the head may move under a reply before storing gives up."""


def append_reply(conversation: Conversation, db: Path, parent_id: int | None, shown_head: int | None, text: str,
                 stats: GenerationStats | None, tokens: Mapping[str, Sequence[int]]) -> Message:
    """Store the reply under ``parent_id``; it becomes the head (see the module docstring)."""
    expected = shown_head
    count = stats.tokens_generated if stats is not None else max((len(t) for t in tokens.values()), default=0)
    lost = f"the reply ({count} tokens) was not saved"
    for _ in range(MOVES):
        try:
            return conversation.append("assistant", text, parent_id=parent_id, expected_head=expected, stats=stats,
                                       tokens=tokens)
        except HeadMoved as moved:  # the conversation was read again
            expected = moved.found
            if parent_id is not None and parent_id not in conversation.tree:
                raise ReplyNotSaved(f"{lost}: its question (message {parent_id}) was deleted in another "
                                    "window") from None
        except ParentGone:
            raise ReplyNotSaved(f"{lost}: its question (message {parent_id}) was deleted in another window") from None
        except ChatChanged as error:
            raise ReplyNotSaved(f"{lost}: {error}") from None
        except DatabaseFull:
            kept = f"; your question (message {parent_id}) was saved before it and is kept" if parent_id else ""
            raise ReplyNotSaved(f"{lost}: the disk holding the session database {db} is full{kept}. "
                                "Free some space, then ask again") from None
        except StoreError as error:
            raise ReplyNotSaved(f"{lost}: {error}") from None
    raise ReplyNotSaved(f"{lost}: other windows kept changing the chat ({MOVES} times while it was stored)")
