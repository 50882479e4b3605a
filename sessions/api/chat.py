"""A chat and its model, through ``SessionController``, and the types it hands out.

Every gesture of the app, ``llamachat ask`` and a request of ``llamachat serve`` is a
method of the controller, or of the parts it holds (``library``: the saved chats;
``routes``: what a switch would cost, where a branch's states are kept, warm-ahead;
``models``: the models to choose from), typed in the types below or in the leaves of
``sessions/`` (``tree.Message``, ``sampling.SamplingSettings``, ``errors``...). The
controller reports as it works through ``sessions.events``. Open one with
``runtime.open_runtime``; ``ChatEngine`` is the engine it drives, in the engine's own
words, which a test may stand in for (``EngineFactory``).
"""

from __future__ import annotations

from sessions.controller.branch_routes import BranchRoutes
from sessions.controller.chat_settings import ChatSettings
from sessions.controller.continuation import CAN_CONTINUE, check_continuable
from sessions.controller.find import FindHit
from sessions.controller.library import SessionLibrary
from sessions.controller.model_catalogue import ModelCatalogue
from sessions.controller.served import PlacedRequest, ServedMessage
from sessions.controller.session_controller import SessionController
from sessions.controller.snapshot import ChatSnapshot
from sessions.controller.undo_deletes import BroughtBack
from sessions.controller.versions import SAME_VERSIONS
from sessions.engine.protocol import ChatEngine, EngineFactory
from sessions.engine.reports import LoadedModel, Prepared, Rates, RoutePlan, Tier, WarmedAhead
from sessions.engine.settings import EngineSettings
from sessions.templates.chat_template import TemplateError

__all__ = [
    "CAN_CONTINUE",
    "SAME_VERSIONS",
    "BranchRoutes",
    "BroughtBack",
    "ChatEngine",
    "ChatSettings",
    "ChatSnapshot",
    "EngineFactory",
    "EngineSettings",
    "FindHit",
    "LoadedModel",
    "ModelCatalogue",
    "PlacedRequest",
    "Prepared",
    "Rates",
    "RoutePlan",
    "ServedMessage",
    "SessionController",
    "SessionLibrary",
    "TemplateError",
    "Tier",
    "WarmedAhead",
    "check_continuable",
]
