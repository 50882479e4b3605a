"""Which chat the screen shows and which model it loads: the first chat at start-up
(``tui.startup``), a new chat, a stored one, and another model from the picker.

The model loads behind the screen as an engine job (``EngineWork.load``).
"""

from __future__ import annotations

from pathlib import Path

from sessions.errors import LlamachatError
from sessions.units import human_size
from tui.screens import chat_rules
from tui.screens.chat_host import ChatHost
from tui.screens.chat_rules import InputMode
from tui.screens.dialogs import Choice, ChoiceScreen
from tui.screens.job_flow import after_switch
from tui.screens.model_picker import ModelPicker
from tui.startup import plan_startup


async def start(screen: ChatHost) -> None:
    """What the app opens first (see ``tui.startup``); the model loads behind the screen."""
    try:
        last_session_id = screen.controller.library.last_session_id()
    except LlamachatError as error:  # a damaged or replaced database: start as if it held no chat
        screen.notify(f"Could not read the saved chats: {error}", severity="error", markup=False)
        last_session_id = None
    plan = plan_startup(screen.startup, last_session_id=last_session_id, configured_model=screen.config.model)
    if plan.start == "demo":
        await new_chat(screen)
        screen.show_demo_banner(True)
        screen.progress.show_fraction("making the demo model (random weights, made once)…", None)
        screen.jobs.load(None, demo=True)
    elif plan.start == "new":
        await new_chat(screen)
        screen.jobs.load(plan.model_path)
    elif plan.start == "open" and plan.session_id is not None:
        await open_chat(screen, plan.session_id, model_path=plan.model_path)
    else:
        choose_model(screen)


async def new_chat(screen: ChatHost) -> None:
    screen.reply_wanted = False  # a message waiting in the chat left waits no more (its turn went too)
    screen.controller.new_session(system_prompt=screen.config.system_prompt)
    await screen.show_head(InputMode())
    screen.chat_input.focus()


async def open_chat(screen: ChatHost, session_id: int, *, model_path: Path | None = None,
                    message_id: int | None = None) -> None:
    """Show a stored session; load its model (or ``model_path``) when another one is loaded.

    With ``message_id`` the branch holding that message is shown, the message selected.
    """
    try:
        session = screen.controller.open_session(session_id)
        if message_id is not None:
            screen.controller.select(message_id)
    except LlamachatError as error:
        screen.refused(str(error))
        return
    screen.reply_wanted = False  # a message waiting in the chat left waits no more (its turn went too)
    await screen.show_head(InputMode(), selected=message_id)
    wanted = model_path or screen.controller.models.model_to_reopen(session.model_to_reopen, screen.config.model)
    info = screen.controller.model_info
    if info is not None and (wanted is None or Path(info.path) == wanted):
        try:
            screen.controller.keep_model_for_chat()
        except LlamachatError as error:  # the chat is shown; only its record of the model failed
            screen.notify(str(error), severity="error", markup=False)
        await after_switch(screen)
    elif wanted is not None:
        screen.jobs.load(wanted)
    else:
        screen.notify(chat_rules.no_model_note(session), severity="warning", markup=False)
        choose_model(screen)


def choose_model(screen: ChatHost) -> None:
    """The model picker (F5); a chat that has a model of its own asks before it changes
    (``model_change_question``), and can go to a new chat with the model instead."""
    info = screen.controller.model_info
    loaded = Path(info.path) if info is not None else None

    async def change(path: Path, answer: str | None) -> None:
        if answer == "new":
            await screen.gestures.when_idle(lambda: new_chat_with(screen, path))
        elif answer == "switch":
            await screen.gestures.when_idle(lambda: switch_to_model(screen, path))

    async def chosen(path: Path | None) -> None:
        if path is None:
            if screen.controller.model_info is None:
                screen.status.set_note("no model loaded: press F5 to choose one")
            return
        path = Path(path)
        if loaded is not None and same_file(path, loaded):
            screen.notify(f"{path.name} is the model loaded now.", timeout=3, markup=False)
            return
        question = model_change_question(screen, path)
        if question is None:
            await screen.gestures.when_idle(lambda: switch_to_model(screen, path))
            return
        choices = [Choice("switch", "Switch", "primary"), Choice("new", "New chat with it")]
        screen.app.push_screen(ChoiceScreen(question, choices), lambda answer: change(path, answer))

    screen.app.push_screen(ModelPicker(screen.controller.models, screen.config, loaded=loaded), chosen)


def same_file(one: Path, other: Path) -> bool:
    try:
        return one.resolve() == other.resolve()
    except OSError:  # a path that cannot be resolved names no file both could be
        return one == other


def model_change_question(screen: ChatHost, path: Path) -> str | None:
    """What changing the open chat's model to ``path`` costs, as a question; None when the
    chat has no model of its own yet (nothing written, or none loaded or recorded)."""
    snapshot = screen.controller.snapshot()
    if snapshot is None or snapshot.session is None or not any(m.role != "system" for m in snapshot.path):
        return None
    info = screen.controller.model_info
    own = info.name if info is not None else snapshot.session.model_to_reopen
    if own is None:
        return None
    try:
        size = f" ({human_size(path.stat().st_size)})"
    except OSError:
        size = ""
    tokens = screen.controller.context_used()
    branch = f"the {tokens:,} tokens of this branch" if tokens else "this branch"
    return (f"Switch this chat from {Path(own).name if info is None else own} to {path.name}{size}? "
            f"The model loads, then {branch} are read again by it before its next reply: "
            f"the states saved for the old model do not fit the new one (they stay, for "
            f"switching back).")


async def new_chat_with(screen: ChatHost, path: Path) -> None:
    """A new chat with the model at ``path``; the chat shown before keeps its own model."""
    await new_chat(screen)
    await switch_to_model(screen, path)


async def switch_to_model(screen: ChatHost, path: Path) -> None:
    if screen.controller.snapshot() is None:
        await new_chat(screen)
    screen.show_demo_banner(False)
    screen.jobs.load(path)
