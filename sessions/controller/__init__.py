"""The one door into the core: ``SessionController`` and what it hands out or raises.

``job_control`` holds the engine lock and the stop protocol, ``model_loading`` swaps
models, ``reply`` writes one reply, ``snapshot`` is what the UI reads,
``library`` the saved sessions and ``model_catalogue`` the models to choose from (on disk,
from saved chats, fetched from the Hub).
The UI imports the core from here (and ``sessions.events``) alone, so every type, error
and helper it needs is re-exported below. May import any package of the core but the CLI.
"""

from sessions.attachments import Attachment, AttachmentError, appended
from sessions.bounded_read import NotRegularFile, read_regular_file
from sessions.config import Config, ConfigError, update_config
from sessions.config.sampling_input import LABELS as SAMPLING_LABELS
from sessions.config.sampling_input import SamplingValueError, parse_sampling_value
from sessions.controller.chat_settings import ChatSettings
from sessions.controller.find import FindHit
from sessions.controller.model_catalogue import ModelCatalogue
from sessions.controller.served import PlacedRequest, ServedMessage
from sessions.controller.session_controller import SessionController
from sessions.controller.snapshot import ChatSnapshot
from sessions.controller.versions import MOST_VERSIONS
from sessions.discovery import ModelCard, ModelFileError
from sessions.engine.reports import Prepared, RoutePlan, Tier, WarmedAhead
from sessions.engine.settings import EngineSettings
from sessions.errors import (
    ContextOverflow,
    ControllerError,
    DecodeCancelled,
    GenerationCancelled,
    LlamachatError,
    ReplyNotSaved,
    TurnTaken,
)
from sessions.exchange import ExchangeError, ExportKind, Imported
from sessions.hub import DownloadProgress, DownloadStopped, HubError, HubModel, progress_text
from sessions.memory_kind import MemoryKind
from sessions.paths import config_dir
from sessions.reasoning import ReasoningSplitter, ReplyView, split_reply
from sessions.sampling import SamplingSettings
from sessions.stop_reason import StopReason
from sessions.store import Deleted, NothingToUndo, SearchHit, Session, SessionSummary, StoreError, title_from_text
from sessions.templates.chat_template import TemplateError
from sessions.text_safety import inert, is_inert
from sessions.tree import ConversationTree, Message, TreeError
from sessions.units import human_count, human_size

__all__ = [
    "MOST_VERSIONS",
    "SAMPLING_LABELS",
    "Attachment",
    "AttachmentError",
    "ChatSettings",
    "ChatSnapshot",
    "Config",
    "ConfigError",
    "ContextOverflow",
    "ControllerError",
    "ConversationTree",
    "DecodeCancelled",
    "Deleted",
    "DownloadProgress",
    "DownloadStopped",
    "EngineSettings",
    "ExchangeError",
    "ExportKind",
    "FindHit",
    "GenerationCancelled",
    "HubError",
    "HubModel",
    "Imported",
    "LlamachatError",
    "MemoryKind",
    "Message",
    "ModelCard",
    "ModelCatalogue",
    "ModelFileError",
    "NotRegularFile",
    "NothingToUndo",
    "PlacedRequest",
    "Prepared",
    "ReasoningSplitter",
    "ReplyNotSaved",
    "ReplyView",
    "RoutePlan",
    "SamplingSettings",
    "SamplingValueError",
    "SearchHit",
    "ServedMessage",
    "Session",
    "SessionController",
    "SessionSummary",
    "StopReason",
    "StoreError",
    "TemplateError",
    "Tier",
    "TreeError",
    "TurnTaken",
    "WarmedAhead",
    "appended",
    "config_dir",
    "human_count",
    "human_size",
    "inert",
    "is_inert",
    "parse_sampling_value",
    "progress_text",
    "read_regular_file",
    "split_reply",
    "title_from_text",
    "update_config",
]
