"""One open chat: the conversation tree, its storage, the model and its checkpoints.

The Textual app and the ``ask`` command both drive the core through this class only.
Methods that touch llama.cpp (``load_model``, ``generate_reply``, ``warm``) block and are
meant for a worker thread; everything else is quick and safe from the UI thread. A lock
keeps the tree and the database consistent when a reply lands while the user pages.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from sessions.branch_tokens import branch_tokens
from sessions.conversation import Conversation
from sessions.engine.planner import Plan
from sessions.engine.settings import EngineSettings
from sessions.errors import ContextOverflow, ControllerError, GenerationCancelled
from sessions.events import (
    Listener,
    ModelLoaded,
    ModelLoadProgressed,
    NoticeRaised,
    PromptProgressed,
    ReplyFinished,
    TextStreamed,
    ignore,
)
from sessions.reply_stats import reply_stats
from sessions.sampling import SamplingSettings
from sessions.tree import GenerationStats, Message

__all__ = [
    "ContextOverflow",
    "ControllerError",
    "EngineSettings",
    "GenerationCancelled",
    "SessionController",
]

EngineFactory = Callable[[Path, EngineSettings, Callable[[float], None]], object]


class SessionController:
    def __init__(
        self,
        store,
        *,
        engine_factory: EngineFactory,
        settings: EngineSettings = EngineSettings(),
        sampling: SamplingSettings = SamplingSettings(),
        listener: Listener = ignore,
    ):
        self.store = store
        self.settings = settings
        self.sampling = sampling
        self.listener = listener
        self._factory = engine_factory
        self.engine = None
        self.conversation: Conversation | None = None
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self.generating = False
        self.last_stats: GenerationStats | None = None

    # -- model ------------------------------------------------------------------------

    def load_model(self, path: str | Path):
        """Load a model (blocking).

        The previous model is closed first (two models may not fit in memory together);
        if the new one fails to load, the previous one is loaded again before the error is
        raised, so a bad file never leaves the chat without a model.
        """
        path = Path(path).expanduser()
        t0 = time.perf_counter()
        previous = self.engine.info.path if self.engine is not None else None
        if self.engine is not None:
            self.engine.close()
            self.engine = None
        progress = lambda f: self.listener(ModelLoadProgressed(f))  # noqa: E731
        try:
            engine = self._factory(path, self.settings, progress)
        except Exception:
            if previous is not None and previous != path:
                try:
                    self.engine = self._factory(previous, self.settings, progress)
                except Exception:
                    self.engine = None
                else:
                    info = self.engine.info
                    self.listener(ModelLoaded(info.name, info.kind.value, self.engine.n_ctx, time.perf_counter() - t0))
            raise
        self.engine = engine
        info = engine.info
        if engine.template.is_fallback and engine.template.fallback_reason:
            self.listener(NoticeRaised(engine.template.fallback_reason))
        self.listener(ModelLoaded(info.name, info.kind.value, engine.n_ctx, time.perf_counter() - t0))
        if self.conversation is not None:
            self.store.update_session(
                self.conversation.session_id, model_path=str(path), model_fingerprint=info.fingerprint
            )
        return info

    def _engine(self):
        if self.engine is None:
            raise ControllerError("no model is loaded")
        return self.engine

    # -- sessions ---------------------------------------------------------------------

    def new_session(self, *, system_prompt: str | None = None):
        with self._lock:
            info = self.engine.info if self.engine is not None else None
            session = self.store.create_session(
                model_path=str(info.path) if info else None,
                model_fingerprint=info.fingerprint if info else None,
                system_prompt=system_prompt,
                sampling=self.sampling,
            )
            self.conversation = Conversation(self.store, session.id)
            if system_prompt:
                self.conversation.append("system", system_prompt, parent_id=None)
            return self.conversation.session

    def open_session(self, session_id: int):
        with self._lock:
            self.conversation = Conversation(self.store, session_id)
            return self.conversation.session

    def _conv(self) -> Conversation:
        if self.conversation is None:
            raise ControllerError("no session is open")
        return self.conversation

    # -- tree operations (quick, UI thread) --------------------------------------------

    def send(self, text: str, *, parent_id: int | None = None) -> Message:
        """Add a user message at the head (or under ``parent_id``: a fork)."""
        if not text.strip():
            raise ControllerError("the message is empty")
        with self._lock:
            conv = self._conv()
            parent = parent_id if parent_id is not None else (conv.head.id if conv.head else None)
            return conv.append("user", text, parent_id=parent)

    def edit(self, message_id: int, text: str) -> Message:
        """A new sibling of ``message_id`` with ``text``; the original branch stays."""
        with self._lock:
            return self._conv().edit(message_id, text)

    def regenerate_point(self, message_id: int) -> Message:
        """Move the head to the user message a reply answers, ready for a new sibling reply."""
        with self._lock:
            conv = self._conv()
            message = conv.tree.get(message_id)
            if message.role != "assistant" or message.parent_id is None:
                raise ControllerError("only a reply can be regenerated")
            conv.rewind(message.parent_id)
            return conv.tree.get(message.parent_id)

    def trim_to_fit(self, leaf_id: int | None = None, *, reserve: int | None = None) -> Message:
        """Continue a branch too long for the context in a new branch without its oldest turns.

        The new branch is a new root beside the old one (which stays untouched): the system
        message if any, then the most recent turns that fit in ``n_ctx - reserve`` tokens
        (``reserve``, room for the reply, defaults to the reply length limit, at most a
        quarter of the context), then the user message at ``leaf_id`` (default: the head),
        which becomes the head. Texts are copied; tokens are computed anew for the new
        branch. Raises ``ContextOverflow`` when that message alone fills the context.
        Blocking (it runs the chat template and the tokenizer): call it from a worker.
        """
        from sessions.context_fit import trim_branch

        engine = self._engine()
        if reserve is None:
            reserve = min(self.sampling.max_tokens, engine.n_ctx // 4)
        with self._lock:
            return trim_branch(self._conv(), self.store, engine, leaf_id, reserve=reserve)

    def plan_for(self, leaf_id: int | None = None) -> Plan:
        """What making the branch that ends at ``leaf_id`` live would cost (no work done)."""
        with self._lock:
            conv = self._conv()
            leaf = leaf_id if leaf_id is not None else conv.head.id
            tokens, ends, _ = branch_tokens(self.store, self._engine(), conv.tree.path_to(leaf))
        return self._engine().plan(tokens, ends)

    # -- generation (worker thread) ------------------------------------------------------

    def cancel(self) -> None:
        """Stop the running job, or the next one to start, as soon as possible (any thread).

        A stop that arrives between scheduling a job and its thread starting must not be
        lost, so the flag is cleared when a job *ends*, not when it starts. A caller that
        may have pressed stop while nothing was scheduled calls ``reset_cancel`` first.
        """
        self._stop.set()
        if self.engine is not None:
            self.engine.request_abort()

    def reset_cancel(self) -> None:
        """Forget a stop that came while no job was running (call before scheduling one)."""
        self._stop.clear()
        if self.engine is not None:
            self.engine.clear_abort()

    def _job_ended(self) -> None:
        self.reset_cancel()

    def warm(self, leaf_id: int | None = None):
        """Make the branch ending at ``leaf_id`` live now (e.g. after a switch)."""
        from sessions.engine.context import DecodeCancelled

        engine = self._engine()
        try:
            if self._stop.is_set():
                raise DecodeCancelled()
            with self._lock:
                conv = self._conv()
                path = conv.tree.path_to(leaf_id if leaf_id is not None else conv.head.id)
                tokens, ends, stepped = branch_tokens(self.store, engine, path)
            if len(tokens) > engine.n_ctx:
                raise ContextOverflow.of_branch(len(tokens), engine.n_ctx)
            return engine.prepare(tokens, ends, stepped, self._progress)
        finally:
            self._job_ended()

    def saved_message_ids(self) -> set[int]:
        """Messages whose state at their end is checkpointed (RAM or disk) for this model."""
        from sessions.saved_marks import saved_message_ids

        if self.engine is None or self.conversation is None:
            return set()
        with self._lock:
            tree = self.conversation.tree
            frozen = self.store.session_tokens(self.conversation.session_id)
        return saved_message_ids(tree, frozen, self.engine)

    def _progress(self, done: int, total: int, rate: float) -> None:
        self.listener(PromptProgressed(done, total, rate))

    def generate_reply(self, *, max_tokens: int | None = None, sampling: SamplingSettings | None = None) -> Message:
        """Answer the user message at the head; the reply is stored and becomes the head."""
        engine = self._engine()
        t_request = time.perf_counter()
        try:
            return self._generate(engine, t_request, max_tokens, sampling)
        finally:
            self._job_ended()

    def _generate(self, engine, t_request: float, max_tokens: int | None, sampling: SamplingSettings | None) -> Message:
        from sessions.engine.context import DecodeCancelled

        if self._stop.is_set():
            raise GenerationCancelled("stopped before the reply started")
        with self._lock:
            conv = self._conv()
            head = conv.head
            if head is None or head.role != "user":
                raise ControllerError("a reply needs a user message at the end of the branch")
            tokens, ends, stepped = branch_tokens(self.store, engine, conv.active_path())
        if len(tokens) >= engine.n_ctx:
            raise ContextOverflow.of_branch(len(tokens), engine.n_ctx)
        settings = sampling or self.sampling
        wanted = max_tokens or settings.max_tokens
        room = engine.n_ctx - len(tokens)
        budget = min(wanted, room)
        self.generating = True
        try:
            try:
                prep = engine.prepare(tokens, ends, stepped, self._progress, reply_follows=True)
            except DecodeCancelled:
                raise GenerationCancelled("stopped before the reply started") from None
            engine.clear_abort()  # from here on, stopping is checked between tokens
            result = engine.generate(
                prep.logits,
                settings,
                max_tokens=budget,
                on_text=lambda text: self.listener(TextStreamed(text)),
                should_stop=self._stop.is_set,
            )
        finally:
            self.generating = False
        if not result.tokens and result.stop_reason == "cancelled":
            raise GenerationCancelled("stopped before the reply started")
        stats = reply_stats(prep, result, t_request, room=room, wanted=wanted)
        with self._lock:
            reply = conv.append(
                "assistant", result.text, parent_id=head.id, stats=stats,
                tokens={engine.info.fingerprint: result.tokens},
            )
        self.last_stats = stats
        self.listener(ReplyFinished(reply, stats))
        return reply
