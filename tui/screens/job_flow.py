"""The engine's side of the chat screen: what the core reports while a job runs, how
every job ends, and the reply and warm-up jobs the screen starts.

The screen's handlers of ``CoreEvent`` and ``Worker.StateChanged`` are these (``core_event``,
``job_changed``); the jobs run in thread workers (``tui.engine_work.EngineWork``), never
on the UI thread.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from textual.worker import Worker, WorkerState

from sessions import events as core
from sessions.errors import ContextOverflow
from tui.engine_work import describe_failure
from tui.events import CoreEvent, severity
from tui.screens import chat_rules, trim_flow
from tui.screens.chat_host import ChatHost

if TYPE_CHECKING:
    from sessions.api.chat import RoutePlan
    from sessions.sampling import SamplingSettings
    from tui.engine_work import Warmed


async def core_event(screen: ChatHost, message: CoreEvent) -> None:
    """What the core reported (``CoreEvent``), shown where it belongs."""
    match message.event:
        case core.ModelLoadProgressed(fraction):
            screen.progress.show_fraction(f"loading the model: {fraction:.0%}", fraction)
        case core.ModelLoaded(name, kind, n_ctx, _seconds, devices):
            # Heard before the controller holds the model: its template and the branch's
            # tokens are shown when the load job ends (``show_loaded_model``).
            screen.status.set_model(name, kind, devices)
            screen.status.set_context(None, n_ctx)
            screen.progress.hide()
        case core.PromptProgressed(done, total) as progress if 0 < total and done < total:
            what = "switching" if screen.jobs.running("warm") else "reading the prompt"
            screen.progress.show_prompt(done, total, progress.eta_seconds, what=what,
                                        stop_key=screen.key_of("stop"))
        case core.PromptProgressed():
            screen.progress.hide()
        case core.TextStreamed(text) as streamed:
            screen.progress.hide()
            screen.conversation_view.append_text(text, opens_in_reasoning=streamed.opens_in_reasoning,
                                                 version=streamed.version)
            shown = streamed.version in (None, screen.conversation_view.shown_version)
            if streamed.tokens_per_second and shown:
                screen.status.set_speed(streamed.tokens_per_second, streaming=True)
            if streamed.context_used and shown:  # the meter follows the reply, not "?" until it is stored
                screen.status.set_context(streamed.context_used, screen.controller.n_ctx, streaming=True)
        case core.ReplyFinished(reply, stats, kept):
            await screen.conversation_view.finish_stream(reply)
            screen.status.set_speed(stats.generation_tps)
            screen.status.set_cost(stats.tokens_restored, stats.tokens_evaluated, stats.prompt_seconds, kept=kept)
            await screen.refresh_view()
            screen.status.set_context(screen.controller.context_used(), screen.controller.n_ctx)
        case core.NoticeRaised(text, level):
            screen.notify(text, severity=severity(level), markup=False)


async def job_changed(screen: ChatHost, event: Worker.StateChanged) -> None:
    """An engine job started or ended; once none runs, the gestures that waited run."""
    worker = event.worker
    if not screen.jobs.owns(worker):
        return
    if event.state == WorkerState.RUNNING and worker.group == "load" and not screen.progress.active:
        screen.progress.show_fraction(f"{worker.description}…", None)
    if not worker.is_finished:
        return
    if event.state == WorkerState.SUCCESS:
        await job_succeeded(screen, worker.group, worker.result)
    else:
        await job_failed(screen, worker.group, worker.error)
    if not screen.jobs.running():
        screen.progress.hide()
    await screen.gestures.run_waiting()
    if not screen.jobs.running():
        screen.warm_ahead.again()
    if not screen.jobs.running() and screen.tree_panel.has_class("-open"):
        screen.refresh_panels()  # the saved marks, not read while the job ran
        screen.switch_costs.refresh()


async def job_succeeded(screen: ChatHost, group: str, result: Any) -> None:
    if group == "load":
        screen.status.set_note("")
        screen.show_loaded_model()
        if screen.reply_wanted:
            screen.reply_wanted = False
            await start_reply(screen)
        elif not screen.gestures.waiting:
            await after_switch(screen)
    elif group == "trim":
        screen.conversation_view.select(None)
        await screen.refresh_view()
        screen.status.set_note("continued in a new branch without the oldest turns")
        await start_reply(screen)
    elif group == "warm":
        warmed = cast("Warmed", result)
        done = warmed.result
        screen.status.set_cost(done.tokens_restored, done.tokens_evaluated, done.seconds, warmed.estimate_seconds,
                               kept=done.plan.keep)
        screen.status.set_context(done.plan.target_len, screen.controller.n_ctx)
        screen.status.set_note("")


async def job_failed(screen: ChatHost, group: str, error: BaseException | None) -> None:
    if group == "generate":
        await screen.conversation_view.drop_reply()
        await screen.refresh_view()
        if isinstance(error, ContextOverflow):
            trim_flow.offer_trim(screen, error)
            return
    if group == "load":
        if screen.reply_wanted:  # no reply follows now: give back the turn the send took
            screen.reply_wanted = False
            screen.controller.end_turn()
        if screen.controller.model_info is None:
            screen.status.set_model("no model")
        else:  # the model loaded before is back
            screen.show_loaded_model()
    if group == "trim":
        screen.status.set_note("")
        await screen.refresh_view()  # a branch refused because the chat changed elsewhere
    words = describe_failure(group, error) if error is not None else None
    if words is not None:
        screen.notify(words[0], severity=severity(words[1]), markup=False)


async def start_reply(screen: ChatHost, *, sampling: SamplingSettings | None = None) -> None:
    """Write a reply to the user message at the head (once the model is loaded);
    ``sampling``: for this reply only."""
    if not screen.jobs.model_ready:
        screen.reply_wanted = True
        if screen.jobs.loading:
            screen.notify("The reply will start once the model has loaded.", timeout=3)
        else:
            screen.controller.end_turn()  # another window or command may answer meanwhile
            screen.notify("No model is loaded: press F5 to choose one.", severity="warning")
        return
    screen.status.set_speed(None)  # the speed shown from here is this reply's
    await screen.conversation_view.begin_reply()
    screen.jobs.reply(sampling)


async def start_versions(screen: ChatHost, count: int) -> None:
    """Write ``count`` versions of the reply to the user message at the head at once, each
    streamed into a version of its own that the paging keys show while it is written."""
    screen.status.set_speed(None)
    view = screen.conversation_view
    await view.begin_versions(count)
    screen.jobs.versions(count, lambda: view.shown_version)


async def after_switch(screen: ChatHost) -> None:
    """After the branch changed: say what making it live costs, then do it in the background."""
    snapshot = screen.controller.snapshot()
    head = snapshot.head if snapshot is not None else None
    if not screen.jobs.model_ready or head is None or screen.jobs.running():
        return

    def planned(plan: RoutePlan) -> None:
        note = chat_rules.switch_note(plan)
        if note:
            screen.status.set_note(note)
            screen.notify(note, timeout=4)

    screen.jobs.warm(head.id, planned)
