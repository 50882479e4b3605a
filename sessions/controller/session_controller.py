"""One open chat: the conversation tree, its storage, the model and its checkpoints.

The Textual app and the ``ask`` command drive the core through this class only. Two
locks keep it consistent: the tree lock (every gesture, every read of the tree, and the
store writes that go with them: quick, safe from the UI thread) and the engine lock of
``JobControl`` (the blocking methods, run by a worker thread: ``load_model``, ``warm``,
``generate_reply``, ``trim_to_fit``, ``close``). A worker takes the tree lock only for
moments, to read a branch or store a reply, so the UI never waits on llama.cpp.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from sessions.branch_tokens import branch_tokens
from sessions.controller.job_control import JobControl
from sessions.controller.model_loading import swap_engine
from sessions.controller.reply import BranchTokens, write_reply
from sessions.controller.snapshot import ChatSnapshot
from sessions.conversation import Conversation
from sessions.engine.protocol import ChatEngine, EngineFactory
from sessions.engine.settings import EngineSettings
from sessions.errors import ContextOverflow, ControllerError
from sessions.events import Listener, PromptProgressed, ReplyFinished, TextStreamed, ignore
from sessions.sampling import SamplingSettings
from sessions.store import SearchHit, Session, SessionStore, SessionSummary
from sessions.tree import Message

if TYPE_CHECKING:
    from sessions.engine.branch_engine import PrepareResult
    from sessions.engine.model import ModelInfo
    from sessions.engine.planner import Plan
    from sessions.exchange import ExportKind


class SessionController:
    def __init__(
        self,
        store: SessionStore,
        *,
        engine_factory: EngineFactory,
        settings: EngineSettings = EngineSettings(),
        sampling: SamplingSettings = SamplingSettings(),
        listener: Listener = ignore,
    ):
        self.settings = settings
        self.sampling = sampling
        self.listener = listener
        """Hears the core's events (``sessions.events``), from whichever thread works."""
        self.engine: ChatEngine | None = None
        self._store = store
        self._factory = engine_factory
        self._conversation: Conversation | None = None
        self._lock = threading.RLock()
        self._jobs = JobControl(lambda: self.engine)

    # -- the model (worker thread) --------------------------------------------------

    def load_model(self, path: str | Path) -> ModelInfo:
        """Load a model (blocking); a model that fails to load leaves the previous one loaded."""
        with self._jobs.job():
            current, self.engine = self.engine, None  # no model while the swap runs
            self.engine, error = swap_engine(self._factory, self.settings, self.listener, current,
                                             Path(path).expanduser())
            if error is not None:
                raise error
            info = self._engine().info
        with self._lock:
            if self._conversation is not None:
                self._store.update_session(self._conversation.session_id, model_path=str(info.path),
                                           model_fingerprint=info.fingerprint)
        return info

    @property
    def model_info(self) -> ModelInfo | None:
        return self.engine.info if self.engine is not None else None

    @property
    def n_ctx(self) -> int | None:
        return self.engine.n_ctx if self.engine is not None else None

    # -- jobs -----------------------------------------------------------------------

    def begin_job(self) -> None:
        """A job is about to be scheduled: forget a stop pressed while nothing ran.

        Call it on the scheduling thread while no job runs. A stop that arrives after it,
        even before the job's thread starts, stops that job.
        """
        self._jobs.begin()

    def cancel(self) -> None:
        """Stop the running job, or else the next one, as soon as possible (any thread)."""
        self._jobs.cancel()

    def close(self) -> None:
        """Stop what runs, wait for it, and close the model (the store is the caller's)."""
        self._jobs.cancel()
        with self._jobs.job():
            engine, self.engine = self.engine, None
            if engine is not None:
                engine.close()

    # -- sessions -------------------------------------------------------------------

    def new_session(self, *, system_prompt: str | None = None) -> Session:
        with self._lock:
            info = self.model_info
            session = self._store.create_session(
                model_path=str(info.path) if info else None,
                model_fingerprint=info.fingerprint if info else None,
                system_prompt=system_prompt,
                sampling=self.sampling,
            )
            self._conversation = Conversation(self._store, session.id)
            if system_prompt:
                self._conversation.append("system", system_prompt, parent_id=None)
            return self._conversation.session

    def open_session(self, session_id: int) -> Session:
        with self._lock:
            self._conversation = Conversation(self._store, session_id)
            return self._conversation.session

    @property
    def session_id(self) -> int | None:
        conversation = self._conversation
        return conversation.session_id if conversation is not None else None

    def last_session_id(self) -> int | None:
        last = self._store.last_session()
        return last.id if last is not None else None

    def list_sessions(self) -> list[SessionSummary]:
        """Every saved session (the store serialises its own reads: no lock needed)."""
        return self._store.list_sessions()

    def search_sessions(self, query: str) -> list[SearchHit]:
        """Sessions whose title or messages contain the words of ``query``."""
        return self._store.search(query)

    def rename_session(self, title: str) -> Session:
        with self._lock:
            return self._store.rename_session(self._conv().session_id, title)

    def export_session(self, path: Path, kind: ExportKind, *, whole_tree: bool = False) -> Path:
        """Write the open session to ``path`` (0600, atomically); safe from a worker thread."""
        from sessions.exchange import write_export

        return write_export(self._store, self._conv().session_id, path, kind, whole_tree=whole_tree)

    # -- reading the chat (any thread) ----------------------------------------------

    def snapshot(self) -> ChatSnapshot | None:
        """The open chat as it is now (None when no session is open)."""
        with self._lock:
            conversation = self._conversation
            if conversation is None:
                return None
            return ChatSnapshot(conversation.session, conversation.tree.copy(), tuple(conversation.active_path()))

    def context_used(self) -> int | None:
        """Tokens of the active branch for the loaded model (None if not all known yet)."""
        engine = self.engine
        if engine is None or self._conversation is None:
            return None
        with self._lock:
            conversation = self._conv()
            known = self._store.session_tokens(conversation.session_id)
            path = conversation.active_path()
        counts = [known.get(message.id, {}).get(engine.info.fingerprint) for message in path]
        return None if any(tokens is None for tokens in counts) else sum(len(t or ()) for t in counts)

    def saved_message_ids(self) -> set[int]:
        """Messages whose state at their end is checkpointed (RAM or disk) for this model."""
        from sessions.saved_marks import saved_message_ids

        engine = self.engine
        if engine is None or self._conversation is None:
            return set()
        with self._lock:
            conversation = self._conv()
            tree = conversation.tree.copy()
            frozen = self._store.session_tokens(conversation.session_id)
        return saved_message_ids(tree, frozen, engine)

    def plan_for(self, leaf_id: int | None = None) -> Plan:
        """What making the branch that ends at ``leaf_id`` live would cost (no work done)."""
        engine = self._engine()
        with self._lock:
            branch = self._branch(engine, leaf_id)
        return engine.plan(branch.tokens, branch.ends)

    # -- gestures on the tree (quick, UI thread) -------------------------------------

    def send(self, text: str, *, parent_id: int | None = None) -> Message:
        """Add a user message at the head (or under ``parent_id``: a fork)."""
        if not text.strip():
            raise ControllerError("the message is empty")
        with self._lock:
            conversation = self._conv()
            head = conversation.head
            parent = parent_id if parent_id is not None else (head.id if head else None)
            return conversation.append("user", text, parent_id=parent)

    def edit(self, message_id: int, text: str) -> Message:
        """A new sibling of ``message_id`` with ``text``; the original branch stays."""
        with self._lock:
            return self._conv().edit(message_id, text)

    def select(self, message_id: int) -> Message:
        """Show the branch last seen under ``message_id``; returns the new head."""
        with self._lock:
            return self._conv().select(message_id)

    def sibling(self, message_id: int, delta: int) -> Message:
        """Page to the version ``delta`` steps away (clamped); returns that version."""
        with self._lock:
            return self._conv().sibling(message_id, delta)

    def rewind(self, message_id: int) -> Message:
        """Move the head back to ``message_id``; nothing is deleted."""
        with self._lock:
            return self._conv().rewind(message_id)

    def delete_subtree(self, message_id: int) -> int:
        """Delete a message and everything below it; returns how many were deleted."""
        with self._lock:
            return self._conv().delete_subtree(message_id)

    def regenerate(self, message_id: int) -> Message:
        """Get ready for a new answer: to the user message a reply answers, or to a user message.

        The head moves to that user message (returned); ``generate_reply`` then adds the
        new reply beside any existing one.
        """
        with self._lock:
            conversation = self._conv()
            message = conversation.tree.get(message_id)
            question = conversation.tree.parent(message_id) if message.role == "assistant" else message
            if question is None or question.role != "user":
                raise ControllerError("only a reply, or a message of yours, can be answered again")
            return conversation.rewind(question.id)

    # -- engine work (worker thread, blocking) ---------------------------------------

    def warm(self, leaf_id: int | None = None) -> PrepareResult:
        """Make the branch ending at ``leaf_id`` (default: the head) live now, e.g. after a switch."""
        from sessions.engine.context import DecodeCancelled

        with self._jobs.job():
            engine = self._engine()
            if self._jobs.stop_requested:
                raise DecodeCancelled()
            with self._lock:
                branch = self._branch(engine, leaf_id)
            if len(branch.tokens) > engine.n_ctx:
                raise ContextOverflow.of_branch(len(branch.tokens), engine.n_ctx)
            return engine.prepare(branch.tokens, branch.ends, branch.stepped, self._progress)

    def generate_reply(self, *, max_tokens: int | None = None, sampling: SamplingSettings | None = None) -> Message:
        """Answer the user message at the head; the reply is stored and becomes the head."""
        t_request = time.perf_counter()
        with self._jobs.job():
            engine = self._engine()
            with self._lock:
                conversation = self._conv()
                head = conversation.head
                if head is None or head.role != "user":
                    raise ControllerError("a reply needs a user message at the end of the branch")
                branch = self._branch(engine, head.id)
            written = write_reply(
                engine, branch, sampling or self.sampling, t_request=t_request, max_tokens=max_tokens,
                on_progress=self._progress, on_text=lambda text: self.listener(TextStreamed(text)),
                should_stop=lambda: self._jobs.stop_requested, resume_decoding=self._jobs.resume_decoding,
            )
            with self._lock:
                reply = conversation.append("assistant", written.result.text, parent_id=head.id, stats=written.stats,
                                            tokens={engine.info.fingerprint: written.result.tokens})
        self.listener(ReplyFinished(reply, written.stats))
        return reply

    def trim_to_fit(self, leaf_id: int | None = None, *, reserve: int | None = None) -> Message:
        """Continue a branch too long for the context in a new branch without its oldest turns.

        The new branch is a new root beside the old one (which stays untouched): the system
        message if any, then the most recent turns that fit in ``n_ctx - reserve`` tokens
        (``reserve``, room for the reply, defaults to the reply length limit, at most a
        quarter of the context), then the user message at ``leaf_id`` (default: the head),
        which becomes the head. Raises ``ContextOverflow`` when that message alone fills
        the context. Blocking (it runs the chat template and the tokenizer).
        """
        from sessions.context_fit import trim_branch

        with self._jobs.job():
            engine = self._engine()
            if reserve is None:
                reserve = min(self.sampling.max_tokens, engine.n_ctx // 4)
            with self._lock:
                return trim_branch(self._conv(), self._store, engine, leaf_id, reserve=reserve)

    # -- inside ---------------------------------------------------------------------

    def _engine(self) -> ChatEngine:
        if self.engine is None:
            raise ControllerError("no model is loaded")
        return self.engine

    def _conv(self) -> Conversation:
        if self._conversation is None:
            raise ControllerError("no session is open")
        return self._conversation

    def _branch(self, engine: ChatEngine, leaf_id: int | None) -> BranchTokens:
        """The tokens of the branch ending at ``leaf_id`` (default: the head); hold the tree lock."""
        conversation = self._conv()
        if leaf_id is None:
            head = conversation.head
            path = conversation.tree.path_to(head.id) if head is not None else []
        else:
            path = conversation.tree.path_to(leaf_id)
        return BranchTokens(*branch_tokens(self._store, engine, path))

    def _progress(self, done: int, total: int, rate: float) -> None:
        self.listener(PromptProgressed(done, total, rate))
