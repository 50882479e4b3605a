"""Writing a reply: the branch it answers, the engine's work, how it reports back and
learns it should stop, and how it is stored.

The session controller holds one ``ReplyWriting``; its reply jobs run ``answer``,
``answer_versions``, ``go_on`` and ``go_on_from`` under the engine lock and the chat's
turn. Each reads the branch it answers (its messages under the tree lock, its tokens
without it), makes it live and samples (``write_reply``; a continuation, the rules of
``continuation``; several versions at once, those of ``versions``), stores what was
written (``reply_storing``) and tells the listener. ``ReplyHooks`` is how one reply
reports back and learns it should stop.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from sessions.controller import chat_settings, continuation, versions
from sessions.controller.branch_tokens import BranchTokens
from sessions.controller.conversation import Conversation
from sessions.controller.job_control import JobControl
from sessions.controller.open_chat import OpenChat
from sessions.controller.reply_storing import append_reply
from sessions.errors import ContextOverflow, ControllerError, DecodeCancelled, GenerationCancelled
from sessions.events import Listener, NoticeRaised, PromptProgressed, ReplyFinished, TextStreamed
from sessions.reply_stats import reply_stats
from sessions.sampling import SamplingSettings
from sessions.stop_reason import StopReason
from sessions.templates.chat_template import ChatMessage
from sessions.templates.message_tokens import reply_opens_in_reasoning
from sessions.tree import GenerationStats, Message

if TYPE_CHECKING:
    from sessions.engine.protocol import ChatEngine
    from sessions.engine.reports import Generated, Prepared, ProgressFn

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReplyHooks:
    """How one reply reports back and learns it should stop."""

    on_progress: ProgressFn
    """The prompt's progress (``PromptProgressed``)."""
    on_text: Callable[[str], None]
    """Each piece of the reply's text (``streamed_text``)."""
    should_stop: Callable[[], bool]
    resume_decoding: Callable[[], None]
    """Called once the branch is live, before sampling (``JobControl.resume_decoding``)."""
    opens_in_reasoning: bool = False
    """The reply's text begins inside reasoning (``GenerationStats.opened_in_reasoning``)."""


@dataclass(frozen=True)
class WrittenReply:
    result: Generated
    stats: GenerationStats
    prep: Prepared
    """How the branch was made live before the reply (what it restored and evaluated)."""


@dataclass(frozen=True)
class Continued:
    """A continuation written, and what to store for the new version of the reply."""

    written: WrittenReply
    text: str
    tokens: list[int]


@dataclass(frozen=True)
class WrittenVersions:
    versions: list[WrittenReply]
    """In order; a version stopped before its first token is left out."""
    indices: list[int]
    """Each version's index among those asked for (the index its text streamed under)."""
    fell_back: str = ""
    """Why they were not sampled in one batch, but one after another, alone (empty: they were)."""

    @property
    def batched(self) -> bool:
        return not self.fell_back


def streamed_text(listener: Listener, *, opens_in_reasoning: bool = False,
                  prompt_tokens: int = 0, version: int | None = None) -> Callable[[str], None]:
    """The ``on_text`` of one reply: each piece goes to ``listener`` with the count and time
    so far, whether the reply began inside reasoning, and how full the context is with the
    ``prompt_tokens`` it follows (``TextStreamed``); ``version``: which of several written
    at once it is."""
    first: float | None = None
    count = 0

    def on_text(text: str) -> None:
        nonlocal first, count
        now = time.perf_counter()
        first = now if first is None else first
        count += 1
        listener(TextStreamed(text, count, now - first, opens_in_reasoning,
                              prompt_tokens + count if prompt_tokens else 0, version))

    return on_text


def make_live(engine: ChatEngine, branch: BranchTokens, hooks: ReplyHooks) -> Prepared:
    """The branch a reply answers made live, its checkpoints left to read after the reply;
    ``GenerationCancelled`` when stopped before, ``ContextOverflow`` when it leaves no room."""
    if hooks.should_stop():
        raise GenerationCancelled("stopped before the reply started")
    if len(branch.tokens) >= engine.n_ctx:
        raise ContextOverflow.of_branch(len(branch.tokens), engine.n_ctx)
    try:
        prep = engine.prepare(branch.tokens, branch.ends, branch.stepped, hooks.on_progress, reply_follows=True)
    except DecodeCancelled:
        raise GenerationCancelled("stopped before the reply started") from None
    hooks.resume_decoding()
    return prep


def decode_rates(prep: Prepared) -> tuple[float, float]:
    """What a stored reply keeps of the engine's rates (``GenerationStats.decode_batch_seconds``):
    the seconds per token in a batch and alone its calls had shown when the reply's prompt
    was planned, or zeros while none had. The switch estimate of a reopened chat prices
    its tokens at them (``switch_estimate``)."""
    rates = prep.plan.rates
    return (rates.eval_per_token, rates.step_seconds) if rates.measured else (0.0, 0.0)


def write_reply(engine: ChatEngine, branch: BranchTokens, settings: SamplingSettings, *, t_request: float,
                max_tokens: int | None, hooks: ReplyHooks, made_live: Prepared | None = None,
                alone: bool = True) -> WrittenReply:
    """Answer the branch; raises ``GenerationCancelled`` when stopped before any token.

    The reply gets ``max_tokens`` (default: the sampling limit) or what is left of the
    context, whichever is less; a reply cut by the context says so (``context_full``).
    ``t_request`` (``perf_counter``) is when the reply was asked for: the time to the
    first token counts from there. ``made_live``: what an earlier ``prepare`` of this job
    restored and evaluated on the way to the branch, counted in the stats. Not ``alone``:
    the reply is sampled as a batch of one version (``ChatEngine.generate_versions``), to
    be stored as not sampled alone, as what it goes on from was (``versions``).
    """
    prep = make_live(engine, branch, hooks)
    if settings.seed < 0:  # a new seed, chosen here to be stored with the reply
        settings = settings.with_(seed=random.getrandbits(31))
    wanted = max_tokens or settings.max_tokens
    room = engine.n_ctx - len(branch.tokens)
    if made_live is not None:
        prep = replace(prep, tokens_restored=made_live.tokens_restored + prep.tokens_restored,
                       tokens_evaluated=made_live.tokens_evaluated + prep.tokens_evaluated,
                       seconds=made_live.seconds + prep.seconds,
                       bytes_restored=made_live.bytes_restored + prep.bytes_restored,
                       decode_seconds=made_live.decode_seconds + prep.decode_seconds,
                       state_seconds=made_live.state_seconds + prep.state_seconds)
    assert prep.logits is not None  # asked for (need_logits defaults to True)
    limit = min(wanted, room)
    if alone:
        result = engine.generate(prep.logits, settings, max_tokens=limit, on_text=hooks.on_text,
                                 should_stop=hooks.should_stop)
    else:
        (result,) = engine.generate_versions(prep.logits, [settings], max_tokens=limit,
                                             on_text=lambda _version, text: hooks.on_text(text),
                                             should_stop=hooks.should_stop)
    if not result.tokens and result.stop_reason == StopReason.CANCELLED:
        raise GenerationCancelled("stopped before the reply started")
    stats = replace(reply_stats(prep, result, t_request, room=room, wanted=wanted, decode_rates=decode_rates(prep)),
                    opened_in_reasoning=hooks.opens_in_reasoning, seed=settings.seed, batch=0 if alone else 1)
    return WrittenReply(result, stats, prep)


def write_continuation(engine: ChatEngine, branch: BranchTokens, reply: Message, settings: SamplingSettings, *,
                       t_request: float, max_tokens: int | None, hooks: ReplyHooks,
                       made_live: Prepared | None = None) -> Continued:
    """More of ``reply``, the last message of ``branch`` (``continuation``); blocking."""
    alone = continuation.goes_on_alone(engine, branch, reply)
    start = branch.ends[-2] if len(branch.ends) > 1 else 0
    old = branch.tokens[start:]
    written = write_reply(engine, branch, settings, t_request=t_request, max_tokens=max_tokens, hooks=hooks,
                          made_live=made_live, alone=alone)
    stats = replace(written.stats, tokens_generated=len(old) + written.stats.tokens_generated)
    tokens = old + list(written.result.tokens)
    text = continuation.continued_text(engine, reply, tokens, written.result.text)
    return Continued(WrittenReply(written.result, stats, written.prep), text, tokens)


def write_versions(engine: ChatEngine, branch: BranchTokens, settings: Sequence[SamplingSettings], *,
                   t_request: float, max_tokens: int | None, hooks: ReplyHooks,
                   on_texts: Sequence[Callable[[str], None]]) -> WrittenVersions:
    """One version per ``settings`` after ``branch`` (``versions``), each streamed to its
    own ``on_texts``; ``GenerationCancelled`` when stopped before any token of any version."""
    prep = make_live(engine, branch, hooks)
    wanted = max_tokens or settings[0].max_tokens
    room = engine.n_ctx - len(branch.tokens)
    sampled = versions.sample_versions(engine, branch, prep, settings, limit=min(wanted, room),
                                       on_progress=hooks.on_progress, on_texts=on_texts,
                                       should_stop=hooks.should_stop)
    batch = 0 if sampled.fell_back else len(settings)
    written, indices = [], []
    for k, (one, result, made) in enumerate(zip(settings, sampled.results, sampled.preps, strict=False)):
        if not result.tokens and result.stop_reason == StopReason.CANCELLED:
            continue
        indices.append(k)
        stats = replace(reply_stats(made, result, t_request, room=room, wanted=wanted, decode_rates=decode_rates(made)),
                        opened_in_reasoning=hooks.opens_in_reasoning, seed=one.seed, batch=batch)
        written.append(WrittenReply(result, stats, made))
    if not written:
        raise GenerationCancelled("stopped before the reply started")
    return WrittenVersions(written, indices, sampled.fell_back)


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
                              hooks=self.hooks(engine, path, branch))
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
            continuation.check_continuable(reply)
            path = self._chat.path(reply.id)
            sampling = sampling or chat_settings.settings_of(conversation, new_chat).sampling
        branch = self._chat.tokens(engine, path)
        continued = write_continuation(engine, branch, reply, sampling, t_request=t_request,
                                       max_tokens=max_tokens, hooks=self.hooks(engine, path, branch))
        return self.store(engine, conversation, branch, reply.parent_id, head.id if head else None,
                          continued.text, continued.written, continued.tokens,
                          settled=continuation.not_sampled_alone(reply))

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
        batched = continuation.batched_version(reply)  # its cut decoded as a batch, as a rebuild decodes it
        branch = continuation.cut_reply(engine, whole, chars, batched=batched)
        hooks = self.hooks(engine, path, branch)
        made_live = (None if batched or self._jobs.stop_requested
                     else continuation.whole_reply_first(engine, whole, branch))
        continued = write_continuation(engine, branch, reply, sampling, t_request=t_request,
                                       max_tokens=max_tokens, hooks=hooks, made_live=made_live)
        return self.store(engine, conversation, branch, reply.parent_id, head.id if head else None,
                          continued.text, continued.written, continued.tokens, settled=batched)

    def answer_versions(self, count: int, new_chat: SamplingSettings, *, max_tokens: int | None,
                        sampling: SamplingSettings | None, t_request: float,
                        shown: Callable[[], int], after_system: bool = False) -> list[Message]:
        """``SessionController.generate_versions``'s work: ``count`` versions of the reply
        to the user message at the head (``versions``), stored under it; the one ``shown``
        names (an index, asked once they are written) is made live last and becomes the head."""
        engine = self._chat.loaded()
        conversation, head, path, sampling = self._question(new_chat, sampling, after_system)
        if count > 1 and sampling.deterministic:
            raise ControllerError(versions.SAME_VERSIONS)
        branch = self._chat.tokens(engine, path)
        hooks = self.hooks(engine, path, branch)
        on_texts = [streamed_text(self._listener(), opens_in_reasoning=hooks.opens_in_reasoning,
                                  prompt_tokens=len(branch.tokens), version=k) for k in range(count)]
        settings = [sampling.with_(seed=seed) for seed in versions.version_seeds(sampling, count)]
        written = write_versions(engine, branch, settings, t_request=t_request, max_tokens=max_tokens, hooks=hooks,
                                 on_texts=on_texts)
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
                if (self._jobs.stop_requested
                        or versions.settle(engine, branch, version.tokens, version.stop_reason) is None):
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

    def hooks(self, engine: ChatEngine, path: Sequence[Message], branch: BranchTokens) -> ReplyHooks:
        """How a reply to ``path`` (or the reply that ends it, continued) reports back and
        learns it should stop; and whether its text begins inside reasoning, asked of the
        template's generation prompt and of the tokens the reply follows in ``branch``
        (``reply_opens_in_reasoning``: a few messages rendered, whatever the chat's length)."""
        asked = path[:-1] if path and path[-1].role == "assistant" else path
        history = [ChatMessage(role=m.role, content=m.text) for m in asked]
        prompt = branch.tokens[:branch.ends[len(asked) - 1]] if asked else []
        opens = reply_opens_in_reasoning(engine.template, history, prompt=prompt, tokenize=engine.tokenize)
        return ReplyHooks(on_progress=self.progress,
                          on_text=streamed_text(self._listener(), opens_in_reasoning=opens,
                                                prompt_tokens=len(branch.tokens)),
                          should_stop=lambda: self._jobs.stop_requested, resume_decoding=self._jobs.resume_decoding,
                          opens_in_reasoning=opens)

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
            versions.settle(engine, _before_reply(branch), tokens, written.result.stop_reason)
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
