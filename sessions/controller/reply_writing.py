"""Writing a reply: the branch it answers, how it reports back and learns it should
stop, and how it is stored.

The session controller holds one ``ReplyWriting``; its ``generate_reply`` and
``continue_reply`` jobs run ``answer`` and ``go_on`` under the engine lock and the chat's
turn. The branch's messages are read under the tree lock, its tokens without it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from sessions.controller import chat_settings
from sessions.controller.continuation import (
    batched_version,
    check_continuable,
    cut_reply,
    not_sampled_alone,
    whole_reply_first,
    write_continuation,
)
from sessions.controller.conversation import Conversation
from sessions.controller.job_control import JobControl
from sessions.controller.open_chat import OpenChat
from sessions.controller.reply import BranchTokens, WrittenReply, streamed_text, write_reply
from sessions.controller.reply_storing import append_reply
from sessions.controller.versions import SAME_VERSIONS, settle, version_seeds, write_versions
from sessions.engine.protocol import ChatEngine
from sessions.errors import ControllerError
from sessions.events import Listener, NoticeRaised, PromptProgressed, ReplyFinished
from sessions.sampling import SamplingSettings
from sessions.templates.chat_template import ChatMessage
from sessions.templates.message_tokens import reply_opens_in_reasoning
from sessions.tree import Message

if TYPE_CHECKING:
    pass

log = logging.getLogger(__name__)


class ReplyWriting:
    """The reply jobs' work, a reply's way back to the listener, its stop flags, and its storing."""

    def __init__(self, chat: OpenChat, jobs: JobControl, listener: Callable[[], Listener]) -> None:
        self._chat = chat
        self._jobs = jobs
        self._listener = listener
        """The controller's listener of the moment (the app sets its own once it is up)."""

    def answer(self, new_chat: SamplingSettings, *, max_tokens: int | None, sampling: SamplingSettings | None,
               t_request: float, after_system: bool = False) -> Message:
        """``SessionController.generate_reply``'s work (``new_chat``: the controller's sampling
        of new chats, under the chat's own)."""
        engine = self._chat.loaded()
        conversation, head, path, sampling = self._question(new_chat, sampling, after_system)
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
                          continued.text, continued.written, continued.tokens, settled=not_sampled_alone(reply))

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
        batched = batched_version(reply)  # its cut decoded as a batch, as a rebuild decodes it
        branch = cut_reply(engine, whole, chars, batched=batched)
        hooks = self.hooks(engine, path, branch)
        made_live = None if batched or self._jobs.stop_requested else whole_reply_first(engine, whole, branch)
        continued = write_continuation(engine, branch, reply, sampling, t_request=t_request,
                                       max_tokens=max_tokens, made_live=made_live, **hooks)
        return self.store(engine, conversation, branch, reply.parent_id, head.id if head else None,
                          continued.text, continued.written, continued.tokens, settled=batched)

    def answer_versions(self, count: int, new_chat: SamplingSettings, *, max_tokens: int | None,
                        sampling: SamplingSettings | None, t_request: float,
                        shown: Callable[[], int], after_system: bool = False) -> list[Message]:
        """``SessionController.generate_versions``'s work: ``count`` versions of the reply
        to the user message at the head (``sessions.controller.versions``), stored under
        it; the one ``shown`` names (an index, asked once they are written) is made live
        last and becomes the head."""
        engine = self._chat.loaded()
        conversation, head, path, sampling = self._question(new_chat, sampling, after_system)
        if count > 1 and sampling.deterministic:
            raise ControllerError(SAME_VERSIONS)
        branch = self._chat.tokens(engine, path)
        hooks = self.hooks(engine, path, branch)
        on_texts = [streamed_text(self._listener(), opens_in_reasoning=hooks["opens_in_reasoning"],
                                  prompt_tokens=len(branch.tokens), version=k) for k in range(count)]
        settings = [sampling.with_(seed=seed) for seed in version_seeds(sampling, count)]
        written = write_versions(engine, branch, settings, t_request=t_request, max_tokens=max_tokens,
                                 on_progress=hooks["on_progress"], on_texts=on_texts,
                                 should_stop=hooks["should_stop"], resume_decoding=hooks["resume_decoding"],
                                 opens_in_reasoning=hooks["opens_in_reasoning"])
        if written.fell_back:
            self._listener()(NoticeRaised(f"the versions were written one after another: {written.fell_back}"))
        stored: list[Message] = []
        try:
            for one in written.versions:  # each becomes the head as it is stored
                shown_head = stored[-1].id if stored else head.id
                stored.append(self._append(engine, conversation, head.id, shown_head, one.result.text, one,
                                           one.result.tokens))
        finally:
            self._save_checkpoints(engine)
        wanted = shown()
        last = written.indices.index(wanted) if wanted in written.indices else len(stored) - 1
        if written.batched:  # each made live as a rebuild makes it, the one shown last
            for k in [*range(last), *range(last + 1, len(stored)), last]:
                version = written.versions[k].result
                if self._jobs.stop_requested or settle(engine, branch, version.tokens, version.stop_reason) is None:
                    break
        with self._chat.lock:
            conversation.select(stored[last].id)
        stats = stored[last].stats
        assert stats is not None
        self._listener()(ReplyFinished(stored[last], stats, written.versions[last].prep.plan.keep))
        return stored

    def _question(self, new_chat: SamplingSettings, sampling: SamplingSettings | None, after_system: bool = False,
                  ) -> tuple[Conversation, Message, list[Message], SamplingSettings]:
        """The chat, the user message at its head that a reply answers (``after_system``: or
        a system message, as clients of ``llamachat serve`` end a request with an
        instruction), the branch ending there, and the sampling of the reply (``sampling``,
        else the chat's own)."""
        with self._chat.lock:
            conversation = self._chat.conv()
            head = conversation.head
            if head is None or head.role not in (("user", "system") if after_system else ("user",)):
                raise ControllerError("a reply needs a user message at the end of the branch")
            path = self._chat.path(head.id)
            return conversation, head, path, sampling or chat_settings.settings_of(conversation, new_chat).sampling

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
              shown_head: int | None, text: str, written: WrittenReply, tokens: list[int], *,
              settled: bool = False) -> Message:
        """Store a reply under ``parent_id`` with the tokens ``engine`` sampled, and say so.

        ``shown_head`` is the head the reply was asked on (see ``reply_storing``).
        ``settled``: the reply was sampled as a batch of one (it goes on from a reply
        not sampled alone), and is made live as a rebuild makes it once stored
        (``versions.settle``).
        """
        try:
            reply = self._append(engine, conversation, parent_id, shown_head, text, written, tokens)
        finally:
            self._save_checkpoints(engine)
        if settled and not self._jobs.stop_requested:
            settle(engine, _before_reply(branch), tokens, written.result.stop_reason)
        assert reply.stats is not None
        self._listener()(ReplyFinished(reply, reply.stats, written.prep.plan.keep))
        return reply

    def _save_checkpoints(self, engine: ChatEngine) -> None:
        """The checkpoints of a reply, read out once the reply is stored (or failed to be).

        The engine tells a checkpoint it cannot read itself; anything else that fails here
        comes after the reply is kept, and is told in one line: it costs a recompute, not
        the reply.
        """
        try:
            engine.save_checkpoints()
        except Exception as error:
            log.exception("saving a reply's checkpoints failed")
            self._listener()(NoticeRaised(f"the reply is kept, but its checkpoints were not saved ({error}); "
                                          "going back to it evaluates it again"))

    def _append(self, engine: ChatEngine, conversation: Conversation, parent_id: int | None,
                shown_head: int | None, text: str, written: WrittenReply, tokens: list[int]) -> Message:
        stats = replace(written.stats, sampled_by=engine.info.fingerprint)  # see ``branch_tokens``
        with self._chat.lock:
            return append_reply(conversation, self._chat.store.path, parent_id, shown_head, text, stats,
                                {engine.info.fingerprint: tokens})

    def progress(self, done: int, total: int, rate: float) -> None:
        self._listener()(PromptProgressed(done, total, rate))


def _before_reply(branch: BranchTokens) -> BranchTokens:
    """``branch`` without its last message (the reply gone on from)."""
    last = len(branch.ends) - 1
    return BranchTokens(branch.tokens[:branch.ends[last - 1] if last else 0], branch.ends[:last],
                        branch.stepped[:last])
