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

import time
from collections.abc import Callable, Collection, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sessions import attachments
from sessions.attachments import Attachment
from sessions.controller import chat_reads, chat_settings
from sessions.controller.branch_routes import BranchRoutes
from sessions.controller.branch_tokens import new_message_tokens
from sessions.controller.chat_settings import ChatSettings
from sessions.controller.checkpoint_cleanup import CheckpointCleanup
from sessions.controller.conversation import Conversation, SessionDraft
from sessions.controller.find import FindHit, find_in
from sessions.controller.job_control import JobControl
from sessions.controller.library import SessionLibrary
from sessions.controller.model_catalogue import ModelCatalogue
from sessions.controller.model_loading import adopt_engine, swap_engine
from sessions.controller.model_sampling import follow_model, preset_of
from sessions.controller.open_chat import OpenChat
from sessions.controller.reply import ReplyWriting
from sessions.controller.reply_turn import ReplyTurns, take_turn
from sessions.controller.served import (
    PlacedRequest,
    ServedMessage,
    place_prompt,
    place_request,
    served_to_clean,
)
from sessions.controller.snapshot import ChatSnapshot
from sessions.controller.trimming import trim_branch
from sessions.controller.undo_deletes import BroughtBack, DeletionUndo
from sessions.controller.versions import MOST_VERSIONS
from sessions.engine.protocol import ChatEngine, EngineFactory
from sessions.engine.settings import EngineSettings
from sessions.errors import ContextOverflow, ControllerError, DecodeCancelled, GenerationCancelled
from sessions.events import Listener, NoticeRaised, ignore
from sessions.exchange import write_export
from sessions.sampling import SamplingSettings
from sessions.sampling_presets import Preset, new_chat_sampling
from sessions.store import Deleted, Session, SessionNotFound, SessionStore
from sessions.templates.chat_template import TemplateError, TemplateStopped
from sessions.tree import Message

if TYPE_CHECKING:
    from sessions.checkpoints import CheckpointStore
    from sessions.engine.reports import LoadedModel, Prepared
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
        checkpoints: CheckpointStore | None = None,
        undo_seconds: float | None = None,
    ):
        """``checkpoints``: the store whose files a deleted chat's own checkpoints are
        removed from (the engine factory's, if it has one); ``undo_seconds``: how long a
        deletion can be undone (None: until ``close``)."""
        self.settings = settings
        self.sampling = sampling
        """The config's sampling settings: new chats start with them (an open chat replies
        with its own), and with the loaded model's recommended ones where these leave the
        built-in defaults (``new_chat_sampling``)."""
        self.model_preset: Preset | None = None
        """The loaded model's recommended sampling (its file's, or its family's), if any."""
        self.listener = listener
        """Hears the core's events (``sessions.events``), from whichever thread works."""
        self._store = store
        self._checkpoints_on = checkpoints is not None
        self._factory = engine_factory
        self._chat = OpenChat(store)
        """The open chat, the loaded model, and the tree lock."""
        self._jobs = JobControl(lambda: self._chat.engine)
        self._turns = ReplyTurns(store.path)
        self.library = SessionLibrary(store, sampling)
        """The saved sessions: list, search, import."""
        self._cleanup = CheckpointCleanup(store, checkpoints, lambda text: self.listener(NoticeRaised(text)))
        self._deletions = DeletionUndo(store, self._cleanup.start, undo_seconds)
        """Deletions this run can take back (``undo_delete``)."""
        self.models = ModelCatalogue(store)
        """The models to choose from: found on disk, used by saved chats, fetched by name,
        one file described, the demo model."""
        self._replies = ReplyWriting(self._chat, self._jobs, lambda: self.listener)
        """The reply jobs' work: how a reply reports back and is stored."""
        self.routes = BranchRoutes(self._chat, self._jobs, store)
        """What making a branch live would take (plans, priced), where its states are kept,
        and reading them into RAM ahead of a switch."""

    @property
    def engine(self) -> ChatEngine | None:
        """The model loaded now (None while none is, or while another one loads)."""
        return self._chat.engine

    @engine.setter
    def engine(self, engine: ChatEngine | None) -> None:
        self._chat.engine = engine

    @property
    def keeps_checkpoints(self) -> bool:
        """Whether the loaded model's states are checkpointed: checkpoints are on, and the
        model's states are laid out as the engine reads them (``ChatEngine.checkpoint_notice``)."""
        engine = self._chat.engine
        return self._checkpoints_on and engine is not None and engine.checkpoint_notice is None

    # -- the model (worker thread) --------------------------------------------------

    def load_model(self, path: str | Path) -> LoadedModel:
        """Load a model (blocking); a model that fails to load leaves the previous one loaded.

        A model loaded whose use the store cannot record for the open chat (a read-only or
        busy database, a file replaced under it) is closed again and the store's error
        raised: the previous model was closed already, so no model is left loaded.
        """
        with self._jobs.job():
            current = self._chat.users.take()  # no model while the swap runs, nor a reader of the old one
            engine, error = swap_engine(self._factory, self.settings, self.listener, current,
                                        Path(path).expanduser())
            if error is not None:
                self.engine = engine  # the previous model, when it could be loaded again
                raise error
            assert engine is not None  # loaded, since nothing failed
            adopt_engine(self._chat, engine)
            before, self.model_preset = self.model_preset, preset_of(self.models, engine.info.path)
            follow_model(self._chat, self.sampling, before, self.model_preset)
            self.engine = engine  # only now: whoever sees the model sees the chat's record of it
        return engine.info

    @property
    def model_info(self) -> LoadedModel | None:
        return self.engine.info if self.engine is not None else None

    @property
    def n_ctx(self) -> int | None:
        return self.engine.n_ctx if self.engine is not None else None

    def attach_file(self, path: str | Path) -> Attachment:
        """A text file to put in a message, its tokens counted (``sessions.attachments``).

        Reads the file: run it in a worker thread. ``AttachmentError`` says why it cannot
        be attached."""
        return self.count_attachment(attachments.read_attachment(path))

    def count_attachment(self, attachment: Attachment) -> Attachment:
        """``attachment`` with its tokens for the loaded model (as it is without one);
        ``AttachmentError`` when it alone is longer than the context."""
        with self._chat.users.borrowed() as engine:
            if engine is None:
                return attachment
            # Tokenizing reads the vocabulary only, never the context a reply is using.
            tokens = len(engine.tokenize(attachment.block, add_bos=False))
            return attachments.within_context(attachment, tokens, engine.n_ctx)

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

    def stop_template_render(self) -> bool:
        """Stop a chat template rendering in the running job now, if one is (any thread);
        whether one was. A model load cannot be stopped, its template's test render can."""
        return self._jobs.stop_render()

    # -- the turn to write a reply (see ``reply_turn``) ------------------------------

    def take_turn(self, *, wait: bool = False, should_stop: Any = lambda: False, on_wait: Any = lambda: None) -> None:
        """Take the open chat's turn to write a reply, then read the chat again.

        With ``wait`` (``llamachat ask``) this waits while another process writes a reply
        in the chat (``on_wait`` is called once if it does), so the next message goes
        after that reply; ``TurnTaken`` without ``wait``, or when ``should_stop`` says to
        give up. A new chat not saved yet needs no turn.
        """
        take_turn(self._turns, self._chat, wait=wait, should_stop=should_stop, on_wait=on_wait)

    def end_turn(self) -> None:
        """No reply follows for now (no model is loaded): let other processes answer."""
        self._turns.release()

    def close(self) -> None:
        """Stop what runs, wait for it, and close the model (the store is the caller's)."""
        self._deletions.close()  # final now: deleted chats' checkpoint files go
        self._cleanup.wait()
        self._jobs.closing()
        with self._jobs.job():
            engine, self.engine = self.engine, None
            if engine is not None:
                engine.close()
        self._turns.release()

    # -- sessions -------------------------------------------------------------------

    def new_session(self, *, system_prompt: str | None = None, sampling: SamplingSettings | None = None) -> None:
        """Start a new chat; it is saved with its first message (an unused one leaves nothing)."""
        self._turns.release()
        with self._chat.lock:
            info = self.model_info
            draft = SessionDraft(
                system_prompt=chat_settings.clean_prompt(system_prompt),
                sampling=sampling or new_chat_sampling(self.sampling, self.model_preset),
                model_path=str(info.path) if info else None, model_fingerprint=info.fingerprint if info else None)
            self._chat.conversation = Conversation(self._store, None, draft=draft)

    def open_session(self, session_id: int) -> Session:
        self._turns.release()
        with self._chat.lock:
            self._chat.conversation = Conversation(self._store, session_id)
            return self._store.get_session(session_id)

    def keep_model_for_chat(self) -> None:
        """Record the loaded model as the open chat's: the chat goes on with it, so reopening
        the chat (``--session``, the next start) loads it, as loading it for the chat would."""
        with self._chat.lock:
            info = self.model_info
            if info is not None and self._chat.conversation is not None:
                self._chat.conversation.record_model(str(info.path), info.fingerprint)

    @property
    def session_id(self) -> int | None:
        """The open session (None when none is open, or the chat is new and not saved yet)."""
        conversation = self._chat.conversation
        return conversation.session_id if conversation is not None else None

    def rename_session(self, title: str) -> Session:
        with self._chat.lock:
            return self._store.rename_session(self._chat.saved_id(), title)

    def export_session(self, path: Path, kind: ExportKind, *, whole_tree: bool = False) -> Path:
        """Write the open session to ``path`` (0600, atomically); safe from a worker thread."""
        return write_export(self._store, self._chat.saved_id(), path, kind, whole_tree=whole_tree)

    def delete_session(self, session_id: int) -> None:
        """Delete a saved session; deleting the open one leaves a new, empty chat open.

        ``undo_delete`` brings it back until the app closes; then the checkpoint files that
        only its branches reach are removed, in the background (``checkpoint_cleanup``)."""
        with self._chat.lock:
            chat = self._cleanup.read(session_id)
            deleted = self._store.delete_session_kept(session_id)
            if self.session_id == session_id:
                self.new_session()
        self._deletions.keep(deleted, chat)

    def wait_for_cleanup(self, timeout: float | None = None) -> bool:
        """Wait until the checkpoint files of deleted sessions are handed to the checkpoint
        store (``flush`` it to see them gone); False if ``timeout`` ran out first."""
        return self._cleanup.wait(timeout)

    # -- the open chat's settings ---------------------------------------------------

    def chat_settings(self) -> ChatSettings:
        """The system prompt of the branch shown and the sampling settings of the open chat."""
        with self._chat.lock:
            return chat_settings.settings_of(self._chat.conv(), self.sampling)

    def set_sampling(self, sampling: SamplingSettings) -> None:
        """Use ``sampling`` for the open chat's replies from now on (saved with it)."""
        with self._chat.lock:
            chat_settings.set_sampling(self._chat.conv(), self._store, sampling)

    def set_system_prompt(self, text: str | None) -> Message | None:
        """Continue under another system prompt, in a new branch from the root (the old one stays).

        Returns the new head; see ``chat_settings.set_system_prompt``.
        """
        with self._chat.lock:
            return chat_settings.set_system_prompt(self._chat.conv(), self._store, text)

    # -- reading the chat (any thread) ----------------------------------------------

    def snapshot(self) -> ChatSnapshot | None:
        """The open chat as it is now (None when no session is open)."""
        with self._chat.lock:
            conversation = self._chat.conversation
            if conversation is None:
                return None
            session = conversation.session
            return ChatSnapshot(session, conversation.tree.copy(), tuple(conversation.active_path()),
                                chat_settings.settings_of(conversation, self.sampling, session))

    def find(self, query: str) -> list[FindHit]:
        """Messages of the open chat holding ``query`` (case ignored): the branch shown first,
        in order, then the other branches' (``find``)."""
        with self._chat.lock:
            return find_in(self._chat.conv().tree, [m.id for m in self._chat.path(None)], query)

    def context_used(self) -> int | None:
        """Tokens of the active branch for the loaded model (None if not all known yet)."""
        with self._chat.users.borrowed() as engine:
            if engine is None or self._chat.conversation is None:
                return None
            with self._chat.lock:
                return chat_reads.context_used(self._chat.conv(), self._store, engine)

    # -- gestures on the tree (quick, UI thread) -------------------------------------

    def send(self, text: str, *, parent_id: int | None = None, join: bool = True,
             frozen: bool = False) -> Message:
        """Add a user message at the head (or under ``parent_id``: a fork); returns it.

        At a message of the user still waiting for its answer the text is joined to it,
        as a new version (with ``join=False``: put beside it), and the same text again
        answers it (``sessions.turns``): the message returned then holds more than
        ``text``, or is the waiting one itself. ``frozen``: the loaded model's tokens of
        the message are stored with it, in one transaction (on a full disk the question
        is then stored whole or not at all).
        """
        if not text.strip():
            raise ControllerError("the message is empty")
        with self._chat.lock, self._lent(frozen) as engine:
            conversation = self._chat.conv()
            freeze = _freezer(engine) if frozen else None
            with self._turns.asking(conversation.session_id):
                return conversation.add_user_message(text, parent_id, join=join, freeze=freeze)

    def edit(self, message_id: int, text: str, *, frozen: bool = False) -> Message:
        """A new sibling of ``message_id`` with ``text``; the original branch stays.
        ``frozen``: as ``send``."""
        with self._chat.lock, self._lent(frozen) as engine:
            conversation = self._chat.conv()
            freeze = _freezer(engine) if frozen else None
            with self._turns.asking(conversation.session_id, conversation.tree.get(message_id).role == "user"):
                return conversation.edit(message_id, text, freeze=freeze)

    def _lent(self, wanted: bool) -> AbstractContextManager[ChatEngine | None]:
        """The loaded engine, borrowed for a quick read when ``wanted`` (else None)."""
        return self._chat.users.borrowed() if wanted else nullcontext()

    def select(self, message_id: int) -> Message:
        """Show the branch last seen under ``message_id``; returns the new head."""
        with self._chat.lock:
            return self._chat.conv().select(message_id)

    def sibling(self, message_id: int, delta: int) -> Message:
        """Page to the version ``delta`` steps away (clamped); returns that version."""
        with self._chat.lock:
            return self._chat.conv().sibling(message_id, delta)

    def rewind(self, message_id: int) -> Message:
        """Move the head back to ``message_id``; nothing is deleted."""
        with self._chat.lock:
            return self._chat.conv().rewind(message_id)

    def delete_subtree(self, message_id: int, *, expected_ids: Collection[int] | None = None) -> int:
        """Delete a message and everything below it; returns how many were deleted.

        ``expected_ids``: the messages the user was asked about (default: the branch as
        shown); if the branch holds others by now, nothing is deleted (``ChatChanged``).
        """
        with self._chat.lock:
            conversation = self._chat.conv()
            count = conversation.delete_subtree(message_id, expected_ids=expected_ids)
            if conversation.last_deleted is not None:
                self._deletions.keep(conversation.last_deleted)
            return count

    @property
    def deletions_undoable(self) -> bool:
        """Whether a deletion can be brought back (``undo_delete``) at all in this run."""
        return self._deletions.undoable

    def deletion_to_undo(self) -> Deleted | None:
        """What ``undo_delete`` would bring back (None: nothing)."""
        return self._deletions.latest()

    def undo_delete(self) -> BroughtBack:
        """Bring back the latest deletion of this run (a chat, or a message with what followed
        it) and show it: a chat's messages come back into the open chat, which shows the
        branch it showed before, unless another window went on from where the deletion
        left the chat (then what it added stays shown, and ``BroughtBack.sentence`` says
        where the branch came back); a deleted chat is opened. ``NothingToUndo`` when
        there is nothing to bring back."""
        with self._chat.lock:
            brought = self._deletions.undo()
            deleted = brought.deleted
            if deleted.kind == "session" or deleted.session_id == self.session_id:
                self.open_session(deleted.session_id)
            return brought

    def regenerate(self, message_id: int) -> Message:
        """Get ready for a new answer: to the user message a reply answers, or to a user message.

        The head moves to that user message (returned); ``generate_reply`` then adds the
        new reply beside any existing one.
        """
        with self._chat.lock:
            conversation = self._chat.conv()
            with self._turns.asking(conversation.session_id):
                return conversation.rewind_to_question(message_id)

    # -- engine work (worker thread, blocking) ---------------------------------------

    def warm(self, leaf_id: int | None = None) -> Prepared:
        """Make the branch ending at ``leaf_id`` (default: the head) live now, e.g. after a switch."""
        with self._jobs.job():
            engine = self._chat.loaded()
            if self._jobs.stop_requested:
                raise DecodeCancelled()
            try:
                branch = self._chat.branch(engine, leaf_id)
            except GenerationCancelled:  # stopped while the template rendered
                raise DecodeCancelled() from None
            if len(branch.tokens) > engine.n_ctx:
                raise ContextOverflow.of_branch(len(branch.tokens), engine.n_ctx)
            return engine.prepare(branch.tokens, branch.ends, branch.stepped, self._replies.progress,
                                  need_logits=False)

    def generate_reply(self, *, max_tokens: int | None = None, sampling: SamplingSettings | None = None,
                       after_system: bool = False) -> Message:
        """Answer the user message at the head; the reply is stored and becomes the head.

        ``sampling`` (default: the chat's own settings) applies to this reply only.
        ``after_system``: a system message at the head is answered too (a served request
        that ends with an instruction).
        """
        t_request = time.perf_counter()
        with self._jobs.job(), self._turns.replying(self.session_id):
            return self._replies.answer(self.sampling, max_tokens=max_tokens, sampling=sampling, t_request=t_request,
                                        after_system=after_system)

    def generate_versions(self, count: int, *, max_tokens: int | None = None,
                          sampling: SamplingSettings | None = None,
                          shown: Callable[[], int] = lambda: 0, after_system: bool = False) -> list[Message]:
        """Answer the user message at the head ``count`` times at once; blocking.

        The prompt is evaluated once and the versions are sampled in one batch, each
        streamed under its index (``TextStreamed.version``) and stored with its seed
        (``sessions.controller.versions``). Returns the versions stored, in order (one
        stopped before its first token is not). ``shown``: the index of the version to
        end on, asked once they are written (the one the user is reading); it becomes
        the head.
        """
        if not 1 <= count <= MOST_VERSIONS:
            raise ControllerError(f"a number of versions from 1 to {MOST_VERSIONS}")
        t_request = time.perf_counter()
        with self._jobs.job(), self._turns.replying(self.session_id):
            return self._replies.answer_versions(count, self.sampling, max_tokens=max_tokens, sampling=sampling,
                                                 t_request=t_request, shown=shown, after_system=after_system)

    def continue_reply(self, message_id: int | None = None, *, max_tokens: int | None = None,
                       sampling: SamplingSettings | None = None) -> Message:
        """Write more of a reply cut at its length limit (default: the head); blocking.

        The longer reply is stored as a new version of it (see ``continuation``) and
        becomes the head; only the new tokens are evaluated.
        """
        t_request = time.perf_counter()
        with self._jobs.job(), self._turns.replying(self.session_id):
            return self._replies.go_on(message_id, self.sampling, max_tokens=max_tokens, sampling=sampling,
                                       t_request=t_request)

    def continue_from(self, message_id: int, chars: int, *, max_tokens: int | None = None,
                      sampling: SamplingSettings | None = None) -> Message:
        """Write a new version of a reply that keeps its first ``chars`` characters (cut
        between tokens) and goes on from there; blocking. The reply stays as it was.

        Only the tokens after the cut are evaluated where the memory kind allows it: the
        attention cells are cut at the token; a sliding window or a recurrent state is
        restored from the nearest snapshot before the cut and decoded again from there.
        """
        t_request = time.perf_counter()
        with self._jobs.job(), self._turns.replying(self.session_id):
            return self._replies.go_on_from(message_id, chars, self.sampling, max_tokens=max_tokens,
                                            sampling=sampling, t_request=t_request)

    # -- llamachat serve (worker thread, blocking) ------------------------------------

    def place_request(self, messages: Sequence[ServedMessage], *, continue_last: bool = False,
                      should_stop: Callable[[], bool] = lambda: False) -> PlacedRequest:
        """Open the served chat a client's conversation belongs to and put the conversation
        in its tree (``controller.served``): the longest run of it stored is reused, the
        rest added as a branch, and its last message becomes the head, to be answered
        (``generate_reply(after_system=True)``) or, with ``continue_last``, gone on from
        (``continue_reply``). The chat's turn is taken, waiting while another process
        writes a reply there until ``should_stop`` says to give up (``TurnTaken``)."""
        with self._jobs.job():
            engine = self._chat.loaded()
            self._turns.release()
            try:
                return place_request(self._chat, self._turns, engine, messages, continue_last=continue_last,
                                     wait_turn=should_stop)
            except TemplateStopped:
                raise GenerationCancelled("stopped before the reply started") from None

    def place_prompt(self, prompt: str | Sequence[int], *,
                     should_stop: Callable[[], bool] = lambda: False) -> PlacedRequest:
        """``place_request`` for a raw prompt of ``/v1/completions``: text (tokenized with
        the model's BOS) or token ids, cut along the longest run of stored messages that
        begins it (``controller.served.place_prompt``). ``PlacedRequest.continues`` says
        whether it ends at a reply to go on from."""
        with self._jobs.job():
            engine = self._chat.loaded()
            self._turns.release()
            return place_prompt(self._chat, self._turns, engine, prompt, wait_turn=should_stop)

    def clean_served(self, *, keep: int | None, max_age: float | None) -> list[int]:
        """Delete for good the served chats unchanged for ``max_age`` seconds and the least
        recently changed beyond the ``keep`` most recent, with the checkpoint files only
        they reach; a chat another process is answering in is left for next time.
        Returns the ids deleted."""
        deleted = []
        for session_id in served_to_clean(self._store, keep, max_age):
            if self._turns.holds(session_id) or not self._turns.take(session_id):
                continue
            try:
                with self._chat.lock:
                    chat = self._cleanup.read(session_id)
                    self._store.delete_session(session_id)
                    if self.session_id == session_id:
                        self.new_session()
            except SessionNotFound:
                continue
            finally:
                self._turns.release(session_id)
            deleted.append(session_id)
            if chat is not None:
                self._cleanup.start(chat)
        return deleted

    def trim_to_fit(self, leaf_id: int | None = None, *, reserve: int | None = None) -> Message:
        """Continue a branch too long for the context in a new branch without its oldest turns
        (``context_fit``); ``reserve`` (room for the reply) defaults to the chat's reply length
        limit, at most a quarter of the context. Tokenizes without the tree lock. Blocking."""
        with self._jobs.job():
            return trim_branch(self._chat, self._turns, self.sampling, leaf_id, reserve)


Freezer = Callable[[list[tuple[str, str]], str, str], "dict[str, list[int]] | None"]


def _freezer(engine: ChatEngine | None) -> Freezer | None:
    """A new message's tokens for ``engine`` (None without a model: they are computed when
    the branch is first used). A template that refuses the branch stores the message
    without them: the reply then fails in the template's words, and the message waits."""
    if engine is None:
        return None

    def freeze(history: list[tuple[str, str]], role: str, text: str) -> dict[str, list[int]] | None:
        try:
            return new_message_tokens(engine, history, role, text)
        except TemplateError:
            return None

    return freeze
