"""How a reply being written reports back, learns it should stop, and is stored.

The session controller holds one ``ReplyHooks``; ``generate_reply`` and
``continue_reply`` hand its hooks to the engine and store what it wrote through it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from sessions.controller.job_control import JobControl
from sessions.controller.open_chat import OpenChat
from sessions.controller.reply import BranchTokens, WrittenReply, streamed_text
from sessions.controller.reply_storing import append_reply
from sessions.controller.switch_estimate import SwitchSpeeds
from sessions.conversation import Conversation
from sessions.engine.protocol import ChatEngine
from sessions.events import Listener, PromptProgressed, ReplyFinished
from sessions.templates.chat_template import ChatMessage
from sessions.templates.message_tokens import reply_opens_in_reasoning
from sessions.tree import Message


class ReplyHooks:
    """A reply's way back to the listener, its stop flags, and its storing."""

    def __init__(self, chat: OpenChat, jobs: JobControl, speeds: SwitchSpeeds,
                 listener: Callable[[], Listener]) -> None:
        self._chat = chat
        self._jobs = jobs
        self._speeds = speeds
        self._listener = listener
        """The controller's listener of the moment (the app sets its own once it is up)."""

    def hooks(self, engine: ChatEngine, path: Sequence[Message], branch: BranchTokens) -> dict[str, Any]:
        """How a reply to ``path`` (or the reply that ends it, continued) reports back and
        learns it should stop; and whether its text begins inside reasoning, asked of the
        template's generation prompt and of the tokens the reply follows in ``branch``
        (``reply_opens_in_reasoning``: a few messages rendered, whatever the chat's length)."""
        asked = path[:-1] if path and path[-1].role == "assistant" else path
        history = [ChatMessage(role=m.role, content=m.text) for m in asked]
        prompt = branch.tokens[:branch.ends[len(asked) - 1]] if asked else []
        opens = reply_opens_in_reasoning(engine.template, history, prompt=prompt, tokenize=engine.tokenize)
        on_text = streamed_text(self._listener(), opens_in_reasoning=opens, prompt_tokens=len(branch.tokens))
        return {"on_progress": self.progress, "on_text": on_text,
                "should_stop": lambda: self._jobs.stop_requested, "resume_decoding": self._jobs.resume_decoding,
                "opens_in_reasoning": opens}

    def store(self, engine: ChatEngine, conversation: Conversation, branch: BranchTokens, parent_id: int | None,
              shown_head: int | None, text: str, written: WrittenReply, tokens: list[int]) -> Message:
        """Store a reply under ``parent_id`` with the tokens ``engine`` sampled, and say so.

        ``shown_head`` is the head the reply was asked on (see ``reply_storing``).
        """
        self._speeds.observe(branch, written.prep, written.stats)  # what it took teaches the estimates
        stats = replace(written.stats, sampled_by=engine.info.fingerprint)  # see ``branch_tokens``
        with self._chat.lock:
            reply = append_reply(conversation, self._chat.store.path, parent_id, shown_head, text, stats,
                                 {engine.info.fingerprint: tokens})
        self._listener()(ReplyFinished(reply, stats, written.prep.plan.keep))
        return reply

    def progress(self, done: int, total: int, rate: float) -> None:
        self._listener()(PromptProgressed(done, total, rate))
