"""Changing the open chat's settings from the keys: the dialog, then applying what it returns.

Sampling settings apply from the next reply on and are saved with the chat. A new system
prompt cannot change what the model has already read, so it starts a new branch from the
root (``SessionController.set_system_prompt``); the screen then shows that branch and
says where the old one went. Both wait for a reply being written to finish rather than
stopping it: nothing here is urgent.
"""

from __future__ import annotations

from sessions.api.chat import ChatSettings
from sessions.sampling_presets import Preset
from tui.screens.chat_host import ChatHost
from tui.screens.job_flow import after_switch
from tui.screens.settings_dialog import ChatSettingsScreen

NEW_BRANCH = ("The new system prompt starts a new branch; the one you were on stays "
              "(Alt+← on the system message pages back to it).")


def open_chat_settings(screen: ChatHost) -> None:
    controller = screen.controller
    if controller.snapshot() is None:
        controller.new_session(system_prompt=screen.config.system_prompt)
    snapshot = controller.snapshot()
    assert snapshot is not None

    async def chosen(result: ChatSettings | None) -> None:
        if result is not None:
            await screen.gestures.when_idle(lambda: apply_settings(screen, result), stop=False)

    presets = {name: Preset(name, values) for name, values in screen.config.presets.items()}
    dialog = ChatSettingsScreen(snapshot.settings, template=controller.template_words, defaults=controller.sampling,
                                model=controller.model_preset, presets=presets)
    screen.app.push_screen(dialog, chosen)


async def apply_settings(screen: ChatHost, wanted: ChatSettings) -> None:
    controller = screen.controller
    before = controller.chat_settings()
    controller.set_sampling(wanted.sampling)
    if wanted.system_prompt == before.system_prompt:
        screen.notify("Chat settings saved.", timeout=3)
        return
    controller.set_system_prompt(wanted.system_prompt)
    await screen.show_head()
    if controller.session_id is None:
        screen.notify("Saved: the chat starts with this system prompt.", timeout=4)
    else:
        screen.notify(NEW_BRANCH, timeout=8)
        await after_switch(screen)
