"""Where a new message of the user goes, so that a branch can always be answered.

Many chat templates (Gemma's, Mistral's, Llama 2's) refuse a conversation whose roles do
not alternate: two user messages in a row make every later reply fail with "roles must
alternate". Such a pair used to appear whenever a message was left unanswered (sent with
no model loaded, stopped before the reply began, refused for being too long) and the
user sent another. The rule here makes that impossible for every gesture that adds a
user message:

- A user message never goes under another user message. Sent where the parent would be a
  message of the user, the new text is *joined* to it: a new version of that message
  (its sibling) holding its text, a blank line and the new text. The earlier version
  stays in the tree (``‹ 1/2 ›``), so nothing typed is lost, and the branch alternates.
- Sending exactly the text of a message that waits for its answer, where it would go
  beside it (or at it), is asking it again: no new message is stored, the waiting one is
  answered. A script that retries a failed ``llamachat ask`` (a plain one, ``--at`` or
  ``--edit``) therefore never piles up copies of its question.

Joining when the template renders instead would change the tokens of a message already
frozen for the model (a message's tokens never change once computed), and refusing the
second send would leave a chat with no model loaded unable to take what the user types.
"""

from __future__ import annotations

from dataclasses import dataclass

from sessions.tree import ConversationTree, Message

JOINER = "\n\n"
"""What separates two texts joined into one message."""


@dataclass(frozen=True)
class Placement:
    """What to store for a new user message."""

    parent_id: int | None
    """Where the new message goes (its parent)."""
    text: str
    """The text to store (the joined text when ``joined`` is set)."""
    joined: Message | None = None
    """The waiting message the text was joined to (it stays as the earlier version)."""
    again: Message | None = None
    """The waiting message that already holds this text: answer it, store nothing."""


def place_user_message(tree: ConversationTree, parent_id: int | None, text: str, *,
                       join: bool = True) -> Placement:
    """Where ``text``, sent under ``parent_id`` (None: as a first message), is stored.

    ``join=False`` (a retried ``llamachat ask``): a new text at a message that waits goes
    beside it, as another version holding only the new text, instead of being joined to
    it; the user asked a question, not to add to the one that failed.
    """
    parent = tree.get(parent_id) if parent_id is not None else None
    joined = parent if parent is not None and parent.role == "user" else None
    if joined is not None and joined.text.strip() == text.strip():
        return Placement(joined.parent_id, joined.text, again=joined)
    if joined is not None and not join:
        parent_id, joined = joined.parent_id, None
    if joined is not None:
        parent_id, text = joined.parent_id, joined.text.rstrip() + JOINER + text.lstrip()
    twin = waiting_twin(tree, parent_id, text)
    return Placement(parent_id, text, joined=joined, again=twin)


def waiting_twin(tree: ConversationTree, parent_id: int | None, text: str) -> Message | None:
    """A message of the user under ``parent_id`` with this text and no answer yet, if any.

    Storing the same question twice side by side adds nothing: it is the one that waits.
    """
    wanted = text.strip()
    return next((m for m in tree.children(parent_id)
                 if m.role == "user" and m.text.strip() == wanted and not tree.children(m.id)), None)
