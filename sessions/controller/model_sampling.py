"""The sampling a new chat with the loaded model starts with (``sessions.sampling_presets``).

When a model loads, its recommended settings are read from its file's header (its own
``general.sampling.*`` keys, else its family's published ones); a new chat then starts
with them under the config's own choices. A chat not written in yet, made before the
model loaded (the app opens a new chat, then loads), follows the model too, unless its
settings were changed meanwhile.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from sessions.controller.model_catalogue import ModelCatalogue
from sessions.controller.open_chat import OpenChat
from sessions.discovery import ModelFileError
from sessions.sampling import SamplingSettings
from sessions.sampling_presets import Preset, new_chat_sampling, recommended, within_bounds


def preset_of(models: ModelCatalogue, path: Path) -> Preset | None:
    """The recommended settings of the model at ``path`` (None: it says none, or cannot be read)."""
    try:
        card = models.read_card(path)
    except ModelFileError:
        return None
    return within_bounds(recommended(card.architecture, dict(card.sampling)))


def follow_model(chat: OpenChat, defaults: SamplingSettings, before: Preset | None, now: Preset | None) -> None:
    """A chat not saved yet whose settings are still those a new chat got with the model
    before (``before``) takes those of the model now loaded."""
    with chat.lock:
        conversation = chat.conversation
        draft = conversation.draft if conversation is not None else None
        if conversation is None or draft is None or draft.sampling != new_chat_sampling(defaults, before):
            return
        conversation.draft = replace(draft, sampling=new_chat_sampling(defaults, now))
