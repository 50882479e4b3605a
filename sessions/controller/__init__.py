"""The one door into the core: ``SessionController`` and what it hands out or raises.

``job_control`` holds the engine lock and the stop protocol, ``model_loading`` swaps
models, ``reply`` writes one reply, ``snapshot`` is what the UI reads,
``library`` the saved sessions and ``model_catalogue`` the models to choose from.
"""

from sessions.controller.chat_settings import ChatSettings
from sessions.controller.model_catalogue import ModelCatalogue
from sessions.controller.session_controller import SessionController
from sessions.controller.snapshot import ChatSnapshot
from sessions.engine.settings import EngineSettings
from sessions.errors import ContextOverflow, ControllerError, GenerationCancelled, ReplyNotSaved, TurnTaken

__all__ = [
    "ChatSettings",
    "ChatSnapshot",
    "ContextOverflow",
    "ControllerError",
    "EngineSettings",
    "GenerationCancelled",
    "ModelCatalogue",
    "ReplyNotSaved",
    "SessionController",
    "TurnTaken",
]
