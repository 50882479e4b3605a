"""What every part of the session controller shares: its state and the helpers it uses.

``SessionController`` is the one door into the core; its gestures, jobs and reads are
there. This base holds the pieces they are built from (the open conversation, the
locks, the turn to write a reply, the branch as the engine takes it, and how a written
reply is stored), so the door itself stays readable.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from sessions.branch_tokens import branch_tokens
from sessions.controller.job_control import JobControl
from sessions.controller.reply import BranchTokens, WrittenReply, streamed_text
from sessions.controller.reply_storing import append_reply
from sessions.controller.reply_turn import ReplyTurns
from sessions.conversation import Conversation
from sessions.engine.protocol import ChatEngine
from sessions.errors import ControllerError, GenerationCancelled, TurnTaken
from sessions.events import Listener, PromptProgressed, ReplyFinished
from sessions.store import SessionStore
from sessions.templates.chat_template import ChatMessage, TemplateStopped
from sessions.templates.message_tokens import reply_opens_in_reasoning
from sessions.tree import Message


class ControllerBase:
    """The controller's state (set by ``SessionController.__init__``) and inner helpers."""

    engine: ChatEngine | None
    listener: Listener
    _store: SessionStore
    _conversation: Conversation | None
    _lock: threading.RLock
    _jobs: JobControl
    _turns: ReplyTurns

    # -- the turn to write a reply (see ``reply_turn``) ------------------------------

    def take_turn(self, *, wait: bool = False, should_stop: Any = lambda: False, on_wait: Any = lambda: None) -> None:
        """Take the open chat's turn to write a reply, then read the chat again.

        With ``wait`` (``llamachat ask``) this waits while another process writes a reply
        in the chat (``on_wait`` is called once if it does), so the next message goes
        after that reply; ``TurnTaken`` without ``wait``, or when ``should_stop`` says to
        give up. A new chat not saved yet needs no turn.
        """
        with self._lock:
            conversation = self._conv()
        session_id = conversation.session_id
        if session_id is None:
            return
        if not self._turns.take(session_id, wait=wait, should_stop=should_stop, on_wait=on_wait):
            raise TurnTaken(session_id)
        with self._lock:
            conversation.reload()

    def end_turn(self) -> None:
        """No reply follows for now (no model is loaded): let other processes answer."""
        self._turns.release()

    # -- inside ---------------------------------------------------------------------

    def _reply_hooks(self, engine: ChatEngine, path: Sequence[Message], branch: BranchTokens) -> dict[str, Any]:
        """How a reply to ``path`` (or the reply that ends it, continued) reports back and
        learns it should stop; and whether its text begins inside reasoning, asked of the
        template's generation prompt and of the tokens the reply follows in ``branch``
        (``reply_opens_in_reasoning``: a few messages rendered, whatever the chat's length)."""
        asked = path[:-1] if path and path[-1].role == "assistant" else path
        history = [ChatMessage(role=m.role, content=m.text) for m in asked]
        prompt = branch.tokens[:branch.ends[len(asked) - 1]] if asked else []
        opens = reply_opens_in_reasoning(engine.template, history, prompt=prompt, tokenize=engine.tokenize)
        on_text = streamed_text(self.listener, opens_in_reasoning=opens, prompt_tokens=len(branch.tokens))
        return {"on_progress": self._progress, "on_text": on_text,
                "should_stop": lambda: self._jobs.stop_requested, "resume_decoding": self._jobs.resume_decoding,
                "opens_in_reasoning": opens}

    def _store_reply(self, conversation: Conversation, branch: BranchTokens, parent_id: int | None,
                     shown_head: int | None, text: str, written: WrittenReply, tokens: list[int]) -> Message:
        """Store a reply under ``parent_id`` with the tokens the model sampled, and say so.

        ``shown_head`` is the head the reply was asked on (see ``reply_storing``).
        """
        engine = self._engine()
        stats = replace(written.stats, sampled_by=engine.info.fingerprint)  # see ``branch_tokens``
        with self._lock:
            reply = append_reply(conversation, self._store.path, parent_id, shown_head, text, stats,
                                 {engine.info.fingerprint: tokens})
        self.listener(ReplyFinished(reply, stats, written.prep.plan.keep))
        return reply

    def _saved_id(self) -> int:
        session_id = self._conv().session_id
        if session_id is None:
            raise ControllerError("this chat is saved with its first message: there is nothing to keep yet")
        return session_id

    def _engine(self) -> ChatEngine:
        if self.engine is None:
            raise ControllerError("no model is loaded")
        return self.engine

    def _conv(self) -> Conversation:
        if self._conversation is None:
            raise ControllerError("no session is open")
        return self._conversation

    def _path(self, leaf_id: int | None) -> list[Message]:
        """The messages of the branch ending at ``leaf_id`` (default: the head), root first; hold the tree lock."""
        conversation = self._conv()
        leaf = leaf_id if leaf_id is not None else (conversation.head.id if conversation.head else None)
        return conversation.tree.path_to(leaf) if leaf is not None else []

    def _branch(self, engine: ChatEngine, leaf_id: int | None) -> BranchTokens:
        """The tokens of the branch ending at ``leaf_id`` (default: the head); call it without the tree lock.

        The lock is held only to read the branch's messages (see ``_tokens``).
        """
        with self._lock:
            path = self._path(leaf_id)
        return self._tokens(engine, path)

    def _tokens(self, engine: ChatEngine, path: list[Message]) -> BranchTokens:
        """The tokens of ``path``, read by ``_path``; call it without the tree lock.

        Messages with no tokens for this model yet (an imported chat) are rendered and
        tokenized here, which takes long for a large chat: holding the tree lock meanwhile
        would keep the UI's reads and gestures waiting. Messages are immutable and their
        frozen tokens per model deterministic, so these are the tokens of the branch that
        was read, even if the tree has changed since (the store locks on its own).

        A stop while the template renders (it runs long) is a reply stopped before it began.
        """
        try:
            return BranchTokens(*branch_tokens(self._store, engine, path))
        except TemplateStopped:
            raise GenerationCancelled("stopped before the reply started") from None

    def _progress(self, done: int, total: int, rate: float) -> None:
        self.listener(PromptProgressed(done, total, rate))
