"""One open chat: the conversation tree, its storage, the model and its checkpoints.

The Textual app and the ``ask`` command drive the core through this class only. Two
locks keep it consistent: the tree lock (every gesture, every read of the tree, and the
store writes that go with them: quick, safe from the UI thread) and the engine lock of
``JobControl`` (the blocking methods, run by a worker thread: ``load_model``, ``warm``,
``generate_reply``, ``continue_reply``, ``trim_to_fit``, ``close``). A worker takes the tree lock only for
moments, to read a branch or store a reply, so the UI never waits on llama.cpp.

Other llamachat processes may share the session. Every change is made on the chat as
shown (``Conversation``): one the store refuses with ``ChatChanged`` writes nothing and
leaves the chat read again, for the caller to show and the user to retry. Writing a reply
is a turn held by one process at a time (``reply_turn``): a gesture that would leave a
question waiting for this process's answer is refused with ``TurnTaken`` while another
process answers in the same session. A reply is stored under its question; if the head
moved elsewhere meanwhile (another window paged to another branch) it is stored all the
same and becomes the head, and only a reply that cannot be stored at all (its question
deleted elsewhere, a full disk) is reported lost, with ``ReplyNotSaved`` saying so.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING

from sessions import context_fit
from sessions.controller import chat_reads, chat_settings
from sessions.controller.chat_settings import ChatSettings
from sessions.controller.checkpoint_cleanup import CheckpointCleanup
from sessions.controller.continuation import check_continuable, write_continuation
from sessions.controller.controller_base import ControllerBase
from sessions.controller.job_control import JobControl
from sessions.controller.library import SessionLibrary
from sessions.controller.model_catalogue import ModelCatalogue
from sessions.controller.model_loading import carry_legacy_tokens, swap_engine
from sessions.controller.reply import write_reply
from sessions.controller.reply_turn import ReplyTurns
from sessions.controller.snapshot import ChatSnapshot
from sessions.controller.switch_estimate import SwitchSpeeds
from sessions.conversation import Conversation, SessionDraft
from sessions.engine.protocol import ChatEngine, EngineFactory
from sessions.engine.settings import EngineSettings
from sessions.errors import ContextOverflow, ControllerError
from sessions.events import Listener, NoticeRaised, ignore
from sessions.exchange import write_export
from sessions.llama.context import DecodeCancelled
from sessions.sampling import SamplingSettings
from sessions.store import Session, SessionStore
from sessions.tree import Message

if TYPE_CHECKING:
    from sessions.branching.branch_engine import PrepareResult
    from sessions.branching.planner import Plan
    from sessions.checkpoints import CheckpointStore, Tier
    from sessions.exchange import ExportKind
    from sessions.llama.model import ModelInfo


class SessionController(ControllerBase):
    def __init__(
        self,
        store: SessionStore,
        *,
        engine_factory: EngineFactory,
        settings: EngineSettings = EngineSettings(),
        sampling: SamplingSettings = SamplingSettings(),
        listener: Listener = ignore,
        checkpoints: CheckpointStore | None = None,
    ):
        """``checkpoints``: the store whose files a deleted chat's own checkpoints are
        removed from (the engine factory's, if it has one)."""
        self.settings = settings
        self.sampling = sampling
        """Sampling settings of new chats (an open chat replies with its own)."""
        self.listener = listener
        """Hears the core's events (``sessions.events``), from whichever thread works."""
        self.engine: ChatEngine | None = None
        self._store = store
        self._factory = engine_factory
        self._conversation: Conversation | None = None
        self._lock = threading.RLock()
        self._jobs = JobControl(lambda: self.engine)
        self._turns = ReplyTurns(store.path)
        self.library = SessionLibrary(store, sampling)
        self._cleanup = CheckpointCleanup(store, checkpoints, lambda text: self.listener(NoticeRaised(text)))
        """The saved sessions: list, search, import."""
        self.models = ModelCatalogue()
        """The models to choose from: found on disk, one file described, the demo model."""
        self._speeds = SwitchSpeeds()

    # -- the model (worker thread) --------------------------------------------------

    def load_model(self, path: str | Path) -> ModelInfo:
        """Load a model (blocking); a model that fails to load leaves the previous one loaded.

        A model loaded whose use the store cannot record for the open chat (a read-only or
        busy database, a file replaced under it) is closed again and the store's error
        raised: the previous model was closed already, so no model is left loaded.
        """
        with self._jobs.job():
            current, self.engine = self.engine, None  # no model while the swap runs
            engine, error = swap_engine(self._factory, self.settings, self.listener, current,
                                        Path(path).expanduser())
            if error is not None:
                self.engine = engine  # the previous model, when it could be loaded again
                raise error
            assert engine is not None  # loaded, since nothing failed
            info = engine.info
            try:
                carry_legacy_tokens(self._store, info)
                with self._lock:
                    if self._conversation is not None:
                        self._conversation.record_model(str(info.path), info.fingerprint)
            except BaseException:
                engine.close()  # held by no one otherwise: its memory would stay taken
                raise
            self.engine = engine  # only now: whoever sees the model sees the chat's record of it
        return info

    @property
    def model_info(self) -> ModelInfo | None:
        return self.engine.info if self.engine is not None else None

    @property
    def n_ctx(self) -> int | None:
        return self.engine.n_ctx if self.engine is not None else None

    @property
    def template_words(self) -> str | None:
        """The loaded model's chat template: where it comes from, and why, when it stands in for another."""
        return chat_settings.template_words(self.engine.template) if self.engine is not None else None

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
        self._cleanup.wait()
        self._jobs.cancel()
        with self._jobs.job():
            engine, self.engine = self.engine, None
            if engine is not None:
                engine.close()
        self._turns.release()

    # -- sessions -------------------------------------------------------------------

    def new_session(self, *, system_prompt: str | None = None, sampling: SamplingSettings | None = None) -> None:
        """Start a new chat; it is saved with its first message (an unused one leaves nothing)."""
        self._turns.release()
        with self._lock:
            info = self.model_info
            draft = SessionDraft(
                system_prompt=chat_settings.clean_prompt(system_prompt), sampling=sampling or self.sampling,
                model_path=str(info.path) if info else None, model_fingerprint=info.fingerprint if info else None)
            self._conversation = Conversation(self._store, None, draft=draft)

    def open_session(self, session_id: int) -> Session:
        self._turns.release()
        with self._lock:
            self._conversation = Conversation(self._store, session_id)
            return self._store.get_session(session_id)

    def keep_model_for_chat(self) -> None:
        """Record the loaded model as the open chat's: the chat goes on with it, so reopening
        the chat (``--session``, the next start) loads it, as loading it for the chat would."""
        with self._lock:
            info = self.model_info
            if info is not None and self._conversation is not None:
                self._conversation.record_model(str(info.path), info.fingerprint)

    @property
    def session_id(self) -> int | None:
        """The open session (None when none is open, or the chat is new and not saved yet)."""
        conversation = self._conversation
        return conversation.session_id if conversation is not None else None

    def rename_session(self, title: str) -> Session:
        with self._lock:
            return self._store.rename_session(self._saved_id(), title)

    def export_session(self, path: Path, kind: ExportKind, *, whole_tree: bool = False) -> Path:
        """Write the open session to ``path`` (0600, atomically); safe from a worker thread."""
        return write_export(self._store, self._saved_id(), path, kind, whole_tree=whole_tree)

    def delete_session(self, session_id: int) -> None:
        """Delete a saved session for good; deleting the open one leaves a new, empty chat open.

        The checkpoint files that only its branches reach are removed afterwards, in the
        background (``checkpoint_cleanup``)."""
        with self._lock:
            chat = self._cleanup.read(session_id)
            self._store.delete_session(session_id)
            if self.session_id == session_id:
                self.new_session()
        if chat is not None:
            self._cleanup.start(chat)

    def wait_for_cleanup(self, timeout: float | None = None) -> bool:
        """Wait until the checkpoint files of deleted sessions are handed to the checkpoint
        store (``flush`` it to see them gone); False if ``timeout`` ran out first."""
        return self._cleanup.wait(timeout)

    # -- the open chat's settings ---------------------------------------------------

    def chat_settings(self) -> ChatSettings:
        """The system prompt of the branch shown and the sampling settings of the open chat."""
        with self._lock:
            return chat_settings.settings_of(self._conv(), self.sampling)

    def set_sampling(self, sampling: SamplingSettings) -> None:
        """Use ``sampling`` for the open chat's replies from now on (saved with it)."""
        with self._lock:
            chat_settings.set_sampling(self._conv(), self._store, sampling)

    def set_system_prompt(self, text: str | None) -> Message | None:
        """Continue under another system prompt, in a new branch from the root (the old one stays).

        Returns the new head; see ``chat_settings.set_system_prompt``.
        """
        with self._lock:
            return chat_settings.set_system_prompt(self._conv(), self._store, text)

    # -- reading the chat (any thread) ----------------------------------------------

    def snapshot(self) -> ChatSnapshot | None:
        """The open chat as it is now (None when no session is open)."""
        with self._lock:
            conversation = self._conversation
            if conversation is None:
                return None
            session = conversation.session
            return ChatSnapshot(session, conversation.tree.copy(), tuple(conversation.active_path()),
                                chat_settings.settings_of(conversation, self.sampling, session))

    def context_used(self) -> int | None:
        """Tokens of the active branch for the loaded model (None if not all known yet)."""
        engine = self.engine
        if engine is None or self._conversation is None:
            return None
        with self._lock:
            return chat_reads.context_used(self._conv(), self._store, engine)

    def saved_message_ids(self) -> set[int]:
        """Messages whose state at their end is checkpointed (RAM or disk) for this model."""
        return {message_id for message_id, tier in self.checkpoint_tiers().items() if tier is not None}

    def checkpoint_tiers(self, message_ids: Collection[int] | None = None) -> dict[int, Tier | None]:
        """Where the state at the end of each of ``message_ids`` (every message of the open
        chat when None) is checkpointed for the loaded model: ``"ram"``, ``"disk"``, or
        None (going there decodes it). Ids not in the open chat are left out.

        It reads the chat's tokens from the store and hashes the branches that lead to
        these messages; the checkpoint store answers from its index, without reading a
        file. An engine in another process answers only between jobs: call it from a
        worker thread.
        """
        engine = self.engine
        with self._lock:
            conversation = self._conversation
            if conversation is None:
                return {}
            session_id, tree = conversation.session_id, conversation.tree.copy()
        if engine is None:
            return dict.fromkeys(tree.ids() if message_ids is None else [i for i in message_ids if i in tree])
        return chat_reads.checkpoint_tiers(session_id, tree, self._store, engine, message_ids)

    def plan_for(self, leaf_id: int | None = None) -> Plan:
        """What making the branch that ends at ``leaf_id`` live would cost (no work done)."""
        engine = self._engine()
        branch = self._branch(engine, leaf_id)
        return self._speeds.estimate(engine.plan(branch.tokens, branch.ends, need_logits=False), branch)

    def plan_choice(self, message_id: int) -> Plan | None:
        """What choosing ``message_id`` (its branch last seen, as ``select``) would cost.

        None while a job holds the engine: a plan reads the live state llama.cpp is
        changing then. Run it in a worker thread: a branch whose tokens are not known yet
        (an imported chat) is tokenized here first.
        """
        with self._jobs.free() as free:
            if not free:
                return None
            engine = self._engine()
            with self._lock:
                path = self._path(self._conv().tree.resume_leaf(message_id).id)
            branch = self._tokens(engine, path)
            return self._speeds.estimate(engine.plan(branch.tokens, branch.ends, need_logits=False), branch)

    # -- gestures on the tree (quick, UI thread) -------------------------------------

    def send(self, text: str, *, parent_id: int | None = None) -> Message:
        """Add a user message at the head (or under ``parent_id``: a fork); returns it.

        At a message of the user still waiting for its answer the text is joined to it,
        as a new version, and the same text again answers it (``sessions.turns``): the
        message returned then holds more than ``text``, or is the waiting one itself.
        """
        if not text.strip():
            raise ControllerError("the message is empty")
        with self._lock:
            conversation = self._conv()
            with self._turns.asking(conversation.session_id):
                return conversation.add_user_message(text, parent_id)

    def edit(self, message_id: int, text: str) -> Message:
        """A new sibling of ``message_id`` with ``text``; the original branch stays."""
        with self._lock:
            conversation = self._conv()
            with self._turns.asking(conversation.session_id, conversation.tree.get(message_id).role == "user"):
                return conversation.edit(message_id, text)

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

    def delete_subtree(self, message_id: int, *, expected_ids: Collection[int] | None = None) -> int:
        """Delete a message and everything below it; returns how many were deleted.

        ``expected_ids``: the messages the user was asked about (default: the branch as
        shown); if the branch holds others by now, nothing is deleted (``ChatChanged``).
        """
        with self._lock:
            return self._conv().delete_subtree(message_id, expected_ids=expected_ids)

    def regenerate(self, message_id: int) -> Message:
        """Get ready for a new answer: to the user message a reply answers, or to a user message.

        The head moves to that user message (returned); ``generate_reply`` then adds the
        new reply beside any existing one.
        """
        with self._lock:
            conversation = self._conv()
            with self._turns.asking(conversation.session_id):
                return conversation.rewind_to_question(message_id)

    # -- engine work (worker thread, blocking) ---------------------------------------

    def warm(self, leaf_id: int | None = None) -> PrepareResult:
        """Make the branch ending at ``leaf_id`` (default: the head) live now, e.g. after a switch."""
        with self._jobs.job():
            engine = self._engine()
            if self._jobs.stop_requested:
                raise DecodeCancelled()
            branch = self._branch(engine, leaf_id)
            if len(branch.tokens) > engine.n_ctx:
                raise ContextOverflow.of_branch(len(branch.tokens), engine.n_ctx)
            prep = engine.prepare(branch.tokens, branch.ends, branch.stepped, self._progress, need_logits=False)
            self._speeds.observe(branch, prep)
            return prep

    def generate_reply(self, *, max_tokens: int | None = None, sampling: SamplingSettings | None = None) -> Message:
        """Answer the user message at the head; the reply is stored and becomes the head.

        ``sampling`` (default: the chat's own settings) applies to this reply only.
        """
        t_request = time.perf_counter()
        with self._jobs.job(), self._turns.replying(self.session_id):
            engine = self._engine()
            with self._lock:
                conversation = self._conv()
                head = conversation.head
                if head is None or head.role != "user":
                    raise ControllerError("a reply needs a user message at the end of the branch")
                path = self._path(head.id)
                sampling = sampling or chat_settings.settings_of(conversation, self.sampling).sampling
            branch = self._tokens(engine, path)  # without the tree lock: it may tokenize a whole chat
            written = write_reply(engine, branch, sampling, t_request=t_request, max_tokens=max_tokens,
                                  **self._reply_hooks(engine, path, branch))
            return self._store_reply(conversation, branch, head.id, head.id, written.result.text, written,
                                     written.result.tokens)

    def continue_reply(self, message_id: int | None = None, *, max_tokens: int | None = None,
                       sampling: SamplingSettings | None = None) -> Message:
        """Write more of a reply cut at its length limit (default: the head); blocking.

        The longer reply is stored as a new version of it (see ``continuation``) and
        becomes the head; only the new tokens are evaluated.
        """
        t_request = time.perf_counter()
        with self._jobs.job(), self._turns.replying(self.session_id):
            engine = self._engine()
            with self._lock:
                conversation = self._conv()
                head = conversation.head
                reply = conversation.tree.get(message_id) if message_id is not None else head
                if reply is None:
                    raise ControllerError("there is no reply to continue")
                check_continuable(reply)
                path = self._path(reply.id)
                sampling = sampling or chat_settings.settings_of(conversation, self.sampling).sampling
            branch = self._tokens(engine, path)
            continued = write_continuation(engine, branch, reply, sampling, t_request=t_request,
                                           max_tokens=max_tokens, **self._reply_hooks(engine, path, branch))
            return self._store_reply(conversation, branch, reply.parent_id, head.id if head else None,
                                     continued.text, continued.written, continued.tokens)

    def trim_to_fit(self, leaf_id: int | None = None, *, reserve: int | None = None) -> Message:
        """Continue a branch too long for the context in a new branch without its oldest turns
        (``context_fit``); ``reserve`` (room for the reply) defaults to the chat's reply length
        limit, at most a quarter of the context. Tokenizes without the tree lock. Blocking."""
        with self._jobs.job():
            engine = self._engine()
            with self._lock:
                conversation = self._conv()
                limit = chat_settings.settings_of(conversation, self.sampling).sampling.max_tokens
                reserve = min(limit, engine.n_ctx // 4) if reserve is None else reserve
                path = self._path(leaf_id)
                context_fit.check_trimmable(path)
            plan = context_fit.fit_branch(self._store, engine, conversation.session_id, path, reserve=reserve)
            with self._lock, self._turns.asking(conversation.session_id):  # the reply follows; it ends the turn
                if self._conv() is not conversation:
                    raise ControllerError("another chat was opened meanwhile: nothing was trimmed")
                return context_fit.add_trimmed(conversation, engine, path, plan)
