"""Writing a reply: the branch it answers, how it reports back and learns it should
stop, and how it is stored.

The session controller holds one ``ReplyWriting``; its ``generate_reply`` and
``continue_reply`` jobs run ``answer`` and ``go_on`` under the engine lock and the chat's
turn. The branch's messages are read under the tree lock, its tokens without it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from sessions.controller import chat_settings
from sessions.controller.continuation import check_continuable, cut_reply, whole_reply_first, write_continuation
from sessions.controller.job_control import JobControl
from sessions.controller.open_chat import OpenChat
from sessions.controller.reply import BranchTokens, WrittenReply, streamed_text, write_reply
from sessions.controller.reply_storing import append_reply
from sessions.conversation import Conversation
from sessions.engine.protocol import ChatEngine
from sessions.errors import ControllerError
from sessions.events import Listener, PromptProgressed, ReplyFinished
from sessions.sampling import SamplingSettings
from sessions.templates.chat_template import ChatMessage
from sessions.templates.message_tokens import reply_opens_in_reasoning
from sessions.tree import Message


class ReplyWriting:
    """The reply jobs' work, a reply's way back to the listener, its stop flags, and its storing."""

    def __init__(self, chat: OpenChat, jobs: JobControl, listener: Callable[[], Listener]) -> None:
        self._chat = chat
        self._jobs = jobs
        self._listener = listener
        """The controller's listener of the moment (the app sets its own once it is up)."""

    def answer(self, new_chat: SamplingSettings, *, max_tokens: int | None, sampling: SamplingSettings | None,
               t_request: float) -> Message:
        """``SessionController.generate_reply``'s work (``new_chat``: the controller's sampling
        of new chats, under the chat's own)."""
        engine = self._chat.loaded()
        with self._chat.lock:
            conversation = self._chat.conv()
            head = conversation.head
            if head is None or head.role != "user":
                raise ControllerError("a reply needs a user message at the end of the branch")
            path = self._chat.path(head.id)
            sampling = sampling or chat_settings.settings_of(conversation, new_chat).sampling
        branch = self._chat.tokens(engine, path)  # without the tree lock: it may tokenize a whole chat
        written = write_reply(engine, branch, sampling, t_request=t_request, max_tokens=max_tokens,
                              **self.hooks(engine, path, branch))
        return self.store(engine, conversation, branch, head.id, head.id, written.result.text, written,
                          written.result.tokens)

    def go_on(self, message_id: int | None, new_chat: SamplingSettings, *, max_tokens: int | None,
              sampling: SamplingSettings | None, t_request: float) -> Message:
        """``SessionController.continue_reply``'s work."""
        engine = self._chat.loaded()
        with self._chat.lock:
            conversation = self._chat.conv()
            head = conversation.head
            reply = conversation.tree.get(message_id) if message_id is not None else head
            if reply is None:
                raise ControllerError("there is no reply to continue")
            check_continuable(reply)
            path = self._chat.path(reply.id)
            sampling = sampling or chat_settings.settings_of(conversation, new_chat).sampling
        branch = self._chat.tokens(engine, path)
        continued = write_continuation(engine, branch, reply, sampling, t_request=t_request,
                                       max_tokens=max_tokens, **self.hooks(engine, path, branch))
        return self.store(engine, conversation, branch, reply.parent_id, head.id if head else None,
                          continued.text, continued.written, continued.tokens)

    def go_on_from(self, message_id: int, chars: int, new_chat: SamplingSettings, *, max_tokens: int | None,
                   sampling: SamplingSettings | None, t_request: float) -> Message:
        """``SessionController.continue_from``'s work."""
        engine = self._chat.loaded()
        with self._chat.lock:
            conversation = self._chat.conv()
            head = conversation.head
            reply = conversation.tree.get(message_id)
            if reply.role != "assistant":
                raise ControllerError("only a reply can be continued from a place in it")
            path = self._chat.path(reply.id)
            sampling = sampling or chat_settings.settings_of(conversation, new_chat).sampling
        whole = self._chat.tokens(engine, path)
        branch = cut_reply(engine, whole, chars)
        hooks = self.hooks(engine, path, branch)
        made_live = whole_reply_first(engine, whole, branch) if not self._jobs.stop_requested else None
        continued = write_continuation(engine, branch, reply, sampling, t_request=t_request,
                                       max_tokens=max_tokens, made_live=made_live, **hooks)
        return self.store(engine, conversation, branch, reply.parent_id, head.id if head else None,
                          continued.text, continued.written, continued.tokens)

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
        stats = replace(written.stats, sampled_by=engine.info.fingerprint)  # see ``branch_tokens``
        with self._chat.lock:
            reply = append_reply(conversation, self._chat.store.path, parent_id, shown_head, text, stats,
                                 {engine.info.fingerprint: tokens})
        self._listener()(ReplyFinished(reply, stats, written.prep.plan.keep))
        return reply

    def progress(self, done: int, total: int, rate: float) -> None:
        self._listener()(PromptProgressed(done, total, rate))
