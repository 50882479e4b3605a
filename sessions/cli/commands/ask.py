"""``llamachat ask``: one turn of a chat from the shell, with the same engine as the app.

It appends (``--at``: forks, ``--edit``: edits as a sibling, ``--regenerate``: answers
again, ``--continue``: writes more of a reply cut at its length limit) a message in a
session, streams the reply to stdout and stores it. The text comes from the arguments or
from standard input (``sessions.cli.ask_input``), with each ``--file`` after it in a fenced
block (``sessions.attachments``); a session's own sampling settings apply, with the flags
given on top. ``--stats``
prints one JSON line on stderr saying how many tokens were restored from checkpoints and
how many were evaluated, which is how scripts (and the tests) check that a branch or a
reopened session only evaluated what was new.

The reply is printed with control characters made visible (``sessions.text_safety``): a
model's escape sequences must not drive the terminal (``show --json`` gives the exact
text). A branch longer than the context is an error with a hint; ``--trim`` instead goes
on in a new branch without the oldest turns, as the app offers to.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sessions.api.library import DatabaseFull, HeadMoved
from sessions.attachments import compose_message
from sessions.cli import interrupts
from sessions.cli.arguments import session_id
from sessions.cli.ask_input import add_sampling_flags, attached_files, message_text, sampling_overrides
from sessions.cli.context import CommandContext, tell
from sessions.cli.errors import CliError, UsageError
from sessions.cli.interrupts import Interrupts, silence_stdout
from sessions.errors import ContextOverflow, GenerationCancelled, LlamachatError, TurnTaken
from sessions.events import Event, NoticeRaised, TextStreamed
from sessions.sampling import MOST_VERSIONS
from sessions.stop_reason import StopReason
from sessions.text_safety import InertStream
from sessions.tree import TreeError

PLACE_TRIES = 3
"""Times ``ask`` places its message again when another window moved the head meanwhile."""

if TYPE_CHECKING:
    from sessions.api.chat import SessionController
    from sessions.api.library import Session
    from sessions.sampling import SamplingSettings
    from sessions.tree import Message


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "ask",
        help="send a message and stream the reply (no UI)",
        description="Add a user message to a session (a new one unless --session) and stream the reply.",
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--at", type=session_id, metavar="MSG", help="fork: put TEXT under message MSG")
    where.add_argument("--edit", type=session_id, metavar="MSG", help="TEXT replaces user message MSG as a sibling")
    where.add_argument("--regenerate", type=session_id, metavar="MSG",
                       help="answer again: a new version of reply MSG, or a new reply to your message MSG")
    where.add_argument("--continue", dest="continue_", type=session_id, metavar="MSG",
                       help="write more of reply MSG, cut at its length limit (a new, longer version of it)")
    parser.add_argument("-n", "--versions", dest="versions", type=_versions, default=1, metavar="N",
                        help=f"with --regenerate: write N new versions at once, in one batch (1 to {MOST_VERSIONS}; "
                             "the prompt is evaluated once; the first streams, the others follow once written; "
                             "a fixed --seed S gives version k the seed S+k)")
    parser.add_argument("--from", dest="from_", type=int, metavar="CHARS",
                        help="with --continue: keep the reply's first CHARS characters and go on from there "
                             "(a new version of any reply of this model)")
    parser.add_argument("--system", metavar="TEXT", help="system prompt of a new session")
    parser.add_argument("--file", dest="files", action="append", default=[], metavar="PATH",
                        help="attach a text file: its text follows TEXT in a fenced block named after it "
                             "(repeatable)")
    add_sampling_flags(parser)
    parser.add_argument("--stats", action="store_true", help="print a JSON line of statistics on stderr")
    parser.add_argument("--trim", action="store_true",
                        help="if the branch is longer than the context, continue in a new branch "
                             "without the oldest turns (the old branch stays); with --session "
                             "and no TEXT, answers the message left waiting")
    parser.add_argument("text", nargs="*", metavar="TEXT",
                        help="the message; `-`, or none with standard input not a terminal: read it from there")
    return parser


def _model_path(args: argparse.Namespace, ctx: CommandContext, session: Session | None,
                controller: SessionController) -> str:
    """The model to answer with, chosen as the app chooses it: the demo model with
    ``--demo``, else ``-m``, else ``ModelCatalogue.model_to_reopen`` (the session's own
    model while its file is there, else ``model`` of config.toml)."""
    if getattr(args, "demo", False):
        return str(controller.models.demo_model())
    if getattr(args, "model", None) and ctx.config.model:
        return ctx.config.model  # -m, made absolute by ``apply_flags``
    own = session.model_to_reopen if session is not None else None
    reopened = controller.models.model_to_reopen(own, ctx.config.model)
    if reopened is not None:
        return str(reopened)
    if session is not None and own:
        raise CliError(f"the model of session {session.id}, {own}, is not there any more; pass -m PATH")
    if ctx.config.model:
        return ctx.config.model  # loading it says what is wrong with it
    if session is not None and session.model_path:
        raise CliError(f"session {session.id} was imported: its file names the model {session.model_path}, "
                       "which is loaded only if you choose it; pass -m PATH")
    raise CliError("no model: pass -m PATH (or set `model` in config.toml)")


def _versions(text: str) -> int:
    count = int(text) if text.isdigit() else 0
    if not 1 <= count <= MOST_VERSIONS:
        raise argparse.ArgumentTypeError(f"a number of versions from 1 to {MOST_VERSIONS}")
    return count


def _takes_no_text(args: argparse.Namespace) -> bool:
    return args.regenerate is not None or args.continue_ is not None


def _check(args: argparse.Namespace, text: str) -> bool:
    """Refuse contradictory flags; True when the message left waiting is to be answered."""
    if _takes_no_text(args) and (text or args.files):
        raise UsageError(f"--{'regenerate' if args.regenerate is not None else 'continue'} takes no TEXT "
                         "and no --file")
    session_arg = getattr(args, "session", None)
    answer_waiting = (args.trim and not text and session_arg is not None
                      and args.at is None and args.edit is None and not _takes_no_text(args))
    if not _takes_no_text(args) and not text and not args.files and not answer_waiting:
        raise UsageError("TEXT is required (or --regenerate MSG, or --continue MSG)")
    if args.from_ is not None and args.continue_ is None:
        raise UsageError("--from needs --continue MSG (the reply to go on from)")
    if args.versions > 1 and args.regenerate is None:
        raise UsageError("-n/--versions needs --regenerate MSG (the reply to write new versions of)")
    if session_arg is not None and args.system:
        raise UsageError("--system applies to a new session only")
    if session_arg is None and (args.at or args.edit or _takes_no_text(args)):
        raise UsageError("--at, --edit, --regenerate and --continue need --session ID")
    return answer_waiting


def run(args: argparse.Namespace, ctx: CommandContext) -> int:
    # Deferred: the runtime loads numpy and the engine, which the other commands do not.
    from sessions.api.runtime import open_runtime

    text = message_text(args.text, wanted=not _takes_no_text(args))
    if args.system:
        message_text([args.system], wanted=False)  # the same UTF-8 check
    answer_waiting = _check(args, text)
    files = attached_files(args.files)  # before the model loads: a file that is not text costs no load
    session_arg = getattr(args, "session", None)
    overrides = sampling_overrides(args)
    out = _Output(ctx, InertStream())
    later: dict[int, list[str]] = {}
    """The text of the versions after the first (``--versions``), shown once they are written."""

    def listen(event: Event) -> None:
        if isinstance(event, TextStreamed) and event.version:
            later.setdefault(event.version, []).append(event.text)
        elif isinstance(event, TextStreamed):
            out.write(event.text)
        elif isinstance(event, NoticeRaised):
            ctx.note(f"{event.level}: {event.text}")

    new_chat = ctx.config.effective_sampling().with_(**overrides)  # --seed is in the config already
    with open_runtime(ctx.config, listener=listen, sampling=new_chat) as runtime:
        for notice in runtime.notices:
            ctx.note(f"warning: {notice}")
        controller = runtime.controller
        session = runtime.store.get_session(session_arg) if session_arg is not None else None
        stops = out.interrupts = Interrupts(controller.cancel, grace=interrupts.STOP_GRACE)
        written: list[Message] = []
        """Versions written before the last one (``--versions``)."""

        def converse() -> Message:
            if session is None:
                controller.new_session(system_prompt=args.system or ctx.config.system_prompt)
            else:
                controller.open_session(session.id)
            # Loaded with the chat open: it becomes the chat's model.
            controller.load_model(_model_path(args, ctx, session, controller))
            if session is not None:
                controller.take_turn(wait=True, should_stop=stops.stop_requested, on_wait=lambda: ctx.note(
                    f"waiting: another llamachat is writing a reply in session {session.id}"))
            if stops.happened:
                raise _Stopped("before anything was sent: nothing was saved")
            sampling = controller.chat_settings().sampling.with_(**overrides)
            if args.versions > 1 and sampling.deterministic:  # refused before the head moves to the question
                from sessions.api.chat import SAME_VERSIONS

                raise CliError(SAME_VERSIONS)
            message = compose_message(text, [controller.count_attachment(file) for file in files])
            question = (None if args.continue_ is not None
                        else _place_message(controller, args, message, answer_waiting))
            try:
                if question is None and args.from_ is not None:
                    return controller.continue_from(args.continue_, args.from_, sampling=sampling)
                if question is None:
                    return controller.continue_reply(args.continue_, sampling=sampling)
                if args.versions == 1:
                    return _answer(controller, args, sampling, stops.stop_requested)
                *before, last = controller.generate_versions(args.versions, sampling=sampling)
                written.extend(before)
                for k in sorted(later):  # the first streamed as it was written
                    out.next_reply()
                    out.write("".join(later[k]))
                return last
            except GenerationCancelled:
                if not stops.happened:
                    raise
                kept = f"your message is saved (message {question.id})" if question else "nothing was saved"
                raise _Stopped(f"before the reply started: {kept}") from None
            except DatabaseFull as full:
                if question is None:
                    raise
                raise CliError(f"the disk holding the session database {full.path} is full ({full.detail}): your "
                               f"question is saved (message {question.id}) with its tokens, but no reply was "
                               "written; free some space, then ask the same again to have it answered") from None

        try:
            with stops:
                reply = stops.run(converse)
        except _Stopped as stopped:
            out.end()
            ctx.note(f"{stops.cause} {stopped}")
            return stops.status
        except TurnTaken as error:
            out.end()
            if not stops.happened:  # taken between a reply refused as too long and its --trim
                raise CliError(str(error)) from None
            ctx.note(f"{stops.cause} while waiting for another llamachat's reply: nothing was saved")
            return stops.status
        except TreeError as error:
            out.end()
            raise CliError(str(error).strip("'\"")) from None
        except LlamachatError:
            out.end()
            raise  # one line on stderr (sessions.cli.reporting)
        out.end(replied=True)
        checkpoints = controller.keeps_checkpoints
    if args.stats:
        for version in [*written, reply]:
            if version.stats is not None:
                tell(ctx.err, json.dumps({**_stats_line(version), "checkpoints": checkpoints}))
    if stops.happened:
        ctx.note(_stopped_words(stops.cause, reply) if not written else _stopped_versions(stops.cause,
                                                                                          [*written, reply]))
        return stops.status
    return 0


class _Stopped(LlamachatError):
    """A signal (or the reader leaving) stopped ``ask`` before a reply was stored."""


class _Output:
    """The reply on stdout, drawn inert; a reader that left, or stdout failing in any other
    way, stops the reply (``Interrupts``), which is then kept as stopped."""

    def __init__(self, ctx: CommandContext, shown: Any) -> None:
        self.ctx = ctx
        self.shown = shown
        self.interrupts: Any = None
        self.gone = False
        self.wrote = False

    def write(self, text: str) -> None:
        if self.gone:
            return
        self.wrote = True
        self._put(self.shown.push(text))

    def next_reply(self) -> None:
        """End the reply written, and a blank line before the next one (``--versions``)."""
        self.end(replied=True)
        if self.ctx.out is not None and self.shown is not None:
            self.gone, self.wrote = False, False
            self.shown = InertStream()
            self._put("\n")

    def end(self, *, replied: bool = False) -> None:
        """The last piece held back and a line end, once: after a reply (even an empty
        one), or after what was written of one; nothing when nothing was."""
        if self.gone or not (self.wrote or replied):
            self.gone = True
            return
        self._put(self.shown.finish() + "\n")
        self.gone = True

    def _put(self, text: str) -> None:
        out = self.ctx.out
        if out is None:  # started with stdout closed (``>&-``)
            self._failed("it is closed")
            return
        try:
            out.write(text)
            out.flush()
        except BrokenPipeError:
            self.gone = True
            silence_stdout()
            if self.interrupts is not None:
                self.interrupts.reader_left()
        except (OSError, ValueError) as error:  # EIO: the terminal is gone; ENOSPC: a full disk
            silence_stdout()
            why = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
            self._failed(why)

    def _failed(self, why: str) -> None:
        self.gone = True
        if self.interrupts is not None:
            self.interrupts.output_failed(why)


def _stopped_words(cause: str, reply: Message) -> str:
    if reply.stats is not None and reply.stats.stop_reason == StopReason.CANCELLED:
        return (f"{cause}: the reply so far is saved as stopped (message {reply.id}; `llamachat ask --session "
                f"{reply.session_id} --continue {reply.id}` writes more)")
    return f"{cause} after the reply was saved whole (message {reply.id})"


def _stopped_versions(cause: str, versions: list[Message]) -> str:
    """Every version a stop left stored, not only the last (``--versions``)."""
    ids = ", ".join(str(version.id) for version in versions)
    stopped = [v for v in versions if v.stats is not None and v.stats.stop_reason == StopReason.CANCELLED]
    if not stopped:
        return f"{cause} after the {len(versions)} versions were saved whole (messages {ids})"
    whole = len(versions) - len(stopped)
    state = "saved as stopped" if not whole else f"saved, {len(stopped)} of them as stopped"
    first = stopped[0]
    return (f"{cause}: the {len(versions)} versions so far are {state} (messages {ids}; `llamachat ask --session "
            f"{first.session_id} --continue MSG` writes more of one)")


def _answer(controller: SessionController, args: argparse.Namespace, sampling: SamplingSettings,
            stopped: Callable[[], bool]) -> Message:
    """Answer the message at the head; with ``--trim`` a branch too long goes on without its oldest turns.

    A stop that came after the first try last looked for one (it then found the branch
    too long), or while the branch was trimmed, was used up when that job ended: the
    controller would not see it again, so ``stopped`` is asked before each next step, or
    the reply would be written whole.
    """
    try:
        return controller.generate_reply(sampling=sampling)
    except ContextOverflow as error:
        if not args.trim:
            raise CliError(f"{error}; `llamachat ask --session {controller.session_id} "
                           "--trim` answers it in a new branch without the oldest turns "
                           "(this branch stays)") from None
    if stopped():
        raise GenerationCancelled("stopped before the reply started")
    trimmed = controller.trim_to_fit()
    if stopped():
        raise _Stopped(f"before the reply started: your message is saved in a new branch without the "
                       f"oldest turns (message {trimmed.id})")
    return controller.generate_reply(sampling=sampling)


def _place_message(controller: SessionController, args: argparse.Namespace, text: str,
                   answer_waiting: bool) -> Message:
    """Put the message to answer at the head (new, forked, edited, or the one waiting); returns it.

    ``ask`` saw nothing of the chat but its head as it stood once the turn was taken: if
    another window moved the head since, the chat is read again and the message placed
    on the head as it is now.
    """
    for attempt in range(PLACE_TRIES):
        try:
            _place_once(controller, args, text, answer_waiting)
            break
        except HeadMoved:
            if attempt == PLACE_TRIES - 1:
                raise
    snapshot = controller.snapshot()
    assert snapshot is not None and snapshot.head is not None
    return snapshot.head


def _place_once(controller: SessionController, args: argparse.Namespace, text: str, answer_waiting: bool) -> None:
    if answer_waiting:
        snapshot = controller.snapshot()
        head = snapshot.head if snapshot is not None else None
        if head is None or head.role != "user":
            raise CliError(f"no message of session {controller.session_id} waits for an answer")
    elif args.regenerate is not None:
        controller.regenerate(args.regenerate)
    elif args.edit is not None:
        snapshot = controller.snapshot()
        edited = snapshot.message(args.edit) if snapshot is not None else None
        if edited is not None and edited.role != "user":
            raise CliError(f"message {args.edit} is not a user message")
        controller.edit(args.edit, text, frozen=True)
    else:
        # The question and its tokens in one transaction: a full disk stores both or
        # neither. A new text at a question left waiting by a failed ask goes beside it,
        # never joined to it (the app's send while a reply is written does join).
        controller.send(text, parent_id=args.at, join=False, frozen=True)


def _stats_line(reply: Message) -> dict[str, object]:
    stats = reply.stats
    assert stats is not None
    return {
        "session": reply.session_id,
        "message": reply.id,
        "parent": reply.parent_id,
        "tokens_restored": stats.tokens_restored,
        "tokens_evaluated": stats.tokens_evaluated,
        "tokens_generated": stats.tokens_generated,
        "prompt_seconds": round(stats.prompt_seconds, 6),
        "ttft_seconds": round(stats.ttft_seconds, 6),
        "generation_tps": round(stats.generation_tps, 3),
        "stop_reason": str(stats.stop_reason),
        "seed": stats.seed,
        "batch": stats.batch,
    }
