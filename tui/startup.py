"""What the app should open first, decided from the command line and the store.

Kept apart from the screen so the rules read in one place and can be tested without a
terminal: ``--demo`` makes the demo model and starts a new chat with it; ``--session ID``
reopens that session with its model (``ModelCatalogue.model_to_reopen``, which ``ask``
follows too), or with the model ``-m PATH`` names; ``-m PATH`` alone starts a new chat
with that model; with no flags the last session is reopened, else the configured model
starts a new chat, else the model picker is shown.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Start = Literal["demo", "new", "open", "pick"]


@dataclass(frozen=True)
class StartupRequest:
    """The flags that decide the first screen (all optional)."""

    demo: bool = False
    model_path: Path | None = None
    """``-m``: a new chat with this model."""
    session_id: int | None = None
    """``--session``: reopen this session."""


@dataclass(frozen=True)
class StartupPlan:
    """What to do first: which session to show and which model to load."""

    start: Start
    model_path: Path | None = None
    """The model to load (for "open": instead of the session's own)."""
    session_id: int | None = None


def plan_startup(request: StartupRequest, *, last_session_id: int | None,
                 configured_model: str | None) -> StartupPlan:
    """Apply the start-up rules (see the module docstring)."""
    if request.demo:
        return StartupPlan("demo")
    if request.session_id is not None:
        return StartupPlan("open", session_id=request.session_id, model_path=request.model_path)
    if request.model_path is not None:
        return StartupPlan("new", model_path=request.model_path)
    if last_session_id is not None:
        return StartupPlan("open", session_id=last_session_id)
    if configured_model:
        return StartupPlan("new", model_path=Path(configured_model).expanduser())
    return StartupPlan("pick")
