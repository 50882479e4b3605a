"""The conversation tree: immutable messages linked to their parents, held in memory.

A chat is never rewritten in place. Editing a message adds a sibling, regenerating a reply
adds a sibling, forking anywhere adds a child: every version ever seen stays reachable, and
each branch keeps mapping to the exact tokens the model saw. This module is the pure
structure behind that (no I/O), so the store, the engine and the UI all reason about
branches the same way. Walks are iterative because a long chat is a very deep chain.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any, Literal

from sessions.errors import LlamachatError
from sessions.stop_reason import StopReason

Role = Literal["system", "user", "assistant"]
ROLES: tuple[str, ...] = ("system", "user", "assistant")


class TreeError(LlamachatError, KeyError):
    """A message id that is not in the tree, or a message that cannot be placed in it."""

    def __str__(self) -> str:  # KeyError would show the message in quotes
        return str(self.args[0]) if self.args else "tree error"


SAMPLED_BY_UNKNOWN = "?"
"""``GenerationStats.sampled_by`` of a reply stored before the model that sampled it was
recorded: its tokens count as sampled by whichever model they were first stored for."""


@dataclass(frozen=True)
class GenerationStats:
    """How a reply was produced: what the checkpoints saved and what the model had to do."""

    tokens_restored: int = 0
    """Tokens whose state came from a checkpoint or the live cache."""
    tokens_evaluated: int = 0
    """Prompt tokens run through the model."""
    tokens_generated: int = 0
    prompt_seconds: float = 0.0
    ttft_seconds: float = 0.0
    """From the request to the first generated token, model loading excluded."""
    generation_tps: float = 0.0
    stop_reason: StopReason = StopReason.UNKNOWN
    sampled_by: str = ""
    """The fingerprint of the model whose sampled tokens were stored with the reply: for
    that model alone its tokens are replayed one at a time (``controller.branch_tokens``). Empty for
    a reply whose tokens came from no sampler here (an import); ``SAMPLED_BY_UNKNOWN`` for
    one stored before this was recorded."""
    seed: int = -1
    """The sampling seed the reply was written with (-1: not recorded)."""
    batch: int = 0
    """Sampled in one batch of this many versions (``sessions.branching.versions``); 0:
    alone. Its tokens were never decoded alone, so every rebuild decodes them as one
    batch from the question's state, as the reply was made live after the batch."""
    opened_in_reasoning: bool = False
    """The generation prompt the reply followed opened a reasoning block (DeepSeek-R1's and
    Qwen3.5's end in ``<think>``): its text begins inside it, with no opening marker of
    its own, and a view tells its reasoning from its answer by this."""
    decode_batch_seconds: float = 0.0
    """Seconds a token took in a batched ``llama_decode`` call, as the engine measured its
    calls when the reply was stored (0: not measured). What a switch after a reopen is
    priced at: the prompt's seconds also hold restores and fixed costs."""
    decode_step_seconds: float = 0.0
    """Seconds a token took decoded alone, likewise (its generation speed also holds the
    sampling)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> GenerationStats:
        """Build from stored data, ignoring unknown keys so newer files still load."""
        if not data:
            return cls()
        values: dict[str, Any] = {"sampled_by": SAMPLED_BY_UNKNOWN}
        for field in fields(cls):
            if field.name in data and data[field.name] is not None:
                kind = type(getattr(cls(), field.name))
                parse = StopReason.parse if kind is StopReason else kind
                values[field.name] = parse(data[field.name])
        return cls(**values)


@dataclass(frozen=True)
class Message:
    """One immutable node; a fork is just another child of an existing node."""

    id: int
    session_id: int
    parent_id: int | None
    role: Role
    text: str
    created_at: float
    """Unix seconds."""
    stats: GenerationStats | None = None


class ConversationTree:
    """Messages of one session as a tree, plus the branch last seen under each node.

    The remembered child map (``{parent_id or None: child_id}``) is what makes "returning
    to a node resumes the branch last seen there" work. Children are kept in creation order,
    which is id order: ids are handed out as messages are created.
    """

    def __init__(
        self,
        messages: Iterable[Message] = (),
        remembered: Mapping[int | None, int] | None = None,
    ) -> None:
        self._nodes: dict[int, Message] = {}
        self._children: dict[int | None, list[int]] = {None: []}
        self._remembered: dict[int | None, int] = {}
        pending = sorted(messages, key=lambda m: m.id)
        for message in pending:
            if message.id in self._nodes:
                raise TreeError(f"message {message.id} appears twice")
            self._nodes[message.id] = message
            self._children[message.id] = []
        for message in pending:
            if message.parent_id is not None and message.parent_id not in self._nodes:
                raise TreeError(
                    f"message {message.id} has parent {message.parent_id}, which is not in the tree"
                )
            self._children[message.parent_id].append(message.id)
        for parent_id, child_id in (remembered or {}).items():
            if parent_id in self._children and child_id in self._children[parent_id]:
                self._remembered[parent_id] = child_id

    def copy(self) -> ConversationTree:
        """An independent tree with the same messages and remembered branches."""
        twin = ConversationTree()
        twin._nodes = dict(self._nodes)
        twin._children = {parent: list(kids) for parent, kids in self._children.items()}
        twin._remembered = dict(self._remembered)
        return twin

    # -- lookups ---------------------------------------------------------------------

    def get(self, message_id: int) -> Message:
        try:
            return self._nodes[message_id]
        except KeyError:
            raise TreeError(f"no message {message_id} in this conversation") from None

    def messages(self) -> Iterator[Message]:
        """Every message, oldest first (ids grow with time)."""
        return iter(list(self._nodes.values()))  # a copy: a worker may read while the UI adds

    def __contains__(self, message_id: object) -> bool:
        return message_id in self._nodes

    def ids(self) -> list[int]:
        """Every message's id, in creation order."""
        return list(self._nodes)

    def __len__(self) -> int:
        return len(self._nodes)

    def roots(self) -> list[Message]:
        return [self._nodes[i] for i in self._children[None]]

    def children(self, message_id: int | None) -> list[Message]:
        if message_id is not None:
            self.get(message_id)
        return [self._nodes[i] for i in self._children[message_id]]

    def parent(self, message_id: int) -> Message | None:
        parent_id = self.get(message_id).parent_id
        return None if parent_id is None else self._nodes[parent_id]

    def path_to(self, message_id: int) -> list[Message]:
        """Every message from the root down to ``message_id``, root first."""
        path = [self.get(message_id)]
        while path[-1].parent_id is not None:
            path.append(self._nodes[path[-1].parent_id])
        path.reverse()
        return path

    def siblings(self, message_id: int) -> list[Message]:
        """The message and its siblings, in creation order."""
        return [self._nodes[i] for i in self._children[self.get(message_id).parent_id]]

    def sibling_index(self, message_id: int) -> tuple[int, int]:
        """``(i, n)``, 1-based: what the UI shows as ``‹ i/N ›``."""
        group = self._children[self.get(message_id).parent_id]
        return group.index(message_id) + 1, len(group)

    def descendants(self, message_id: int) -> list[Message]:
        """Everything below ``message_id`` (not itself), depth first in creation order."""
        self.get(message_id)
        found: list[Message] = []
        stack = list(reversed(self._children[message_id]))
        while stack:
            current = stack.pop()
            found.append(self._nodes[current])
            stack.extend(reversed(self._children[current]))
        return found

    def subtree_size(self, message_id: int) -> int:
        return 1 + len(self.descendants(message_id))

    def leaves(self) -> list[Message]:
        """Every branch end, depth first in creation order."""
        found: list[Message] = []
        stack = list(reversed(self._children[None]))
        while stack:
            current = stack.pop()
            kids = self._children[current]
            if kids:
                stack.extend(reversed(kids))
            else:
                found.append(self._nodes[current])
        return found

    # -- remembered branches ---------------------------------------------------------

    def remembered(self) -> dict[int | None, int]:
        """A copy of the whole remembered-child map."""
        return dict(self._remembered)

    def resume_leaf(self, message_id: int | None) -> Message:
        """Follow the remembered child (else the newest one) from a node down to a leaf.

        ``None`` starts above the roots. Raises ``TreeError`` for an empty tree.
        """
        if message_id is None:
            if not self._children[None]:
                raise TreeError("the conversation has no messages")
            current = self._remembered.get(None, self._children[None][-1])
        else:
            current = self.get(message_id).id
        while self._children[current]:
            current = self._remembered.get(current, self._children[current][-1])
        return self._nodes[current]

    def remember_path(self, leaf_id: int) -> dict[int | None, int]:
        """Remember every step of the path to ``leaf_id``; returns the entries that changed."""
        changed: dict[int | None, int] = {}
        for message in self.path_to(leaf_id):
            if self._remembered.get(message.parent_id) != message.id:
                self._remembered[message.parent_id] = message.id
                changed[message.parent_id] = message.id
        return changed

    # -- changes ---------------------------------------------------------------------

    def add(self, message: Message) -> None:
        if message.id in self._nodes:
            raise TreeError(f"message {message.id} is already in the tree")
        if message.parent_id is not None and message.parent_id not in self._nodes:
            raise TreeError(f"no message {message.parent_id} to attach message {message.id} to")
        self._nodes[message.id] = message
        self._children[message.id] = []
        self._children[message.parent_id].append(message.id)

    def replace(self, message: Message) -> None:
        """Swap in a new value for an existing node (same id and parent), e.g. new stats."""
        old = self.get(message.id)
        if old.parent_id != message.parent_id:
            raise TreeError(f"message {message.id} cannot move to another parent")
        self._nodes[message.id] = message

    def remove_subtree(self, message_id: int) -> list[int]:
        """Remove a node and everything below it; returns the removed ids, the node first."""
        top = self.get(message_id)
        removed = [message_id] + [m.id for m in self.descendants(message_id)]
        self._children[top.parent_id].remove(message_id)
        if self._remembered.get(top.parent_id) == message_id:
            del self._remembered[top.parent_id]
        for gone in removed:
            del self._nodes[gone]
            del self._children[gone]
            self._remembered.pop(gone, None)
        return removed
