"""Everything a chat runs on, opened in one place and closed in the reverse order.

The app and ``llamachat ask`` both start here: the session store, the checkpoint store
the config asks for, and a controller over the real llama.cpp engine. Leaving the
``with`` block stops a running job, closes the model, waits for the checkpoint writer
(the next run restores from what it wrote) and closes the database, whatever happened
inside.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sessions.config import Config
from sessions.controller.session_controller import SessionController
from sessions.engine import factory
from sessions.engine.settings import EngineSettings
from sessions.events import Listener, NoticeRaised, ignore
from sessions.sampling import SamplingSettings
from sessions.store import SessionStore

if TYPE_CHECKING:
    from sessions.checkpoints import CheckpointStore
    from sessions.engine.protocol import EngineFactory


@dataclass
class Runtime:
    config: Config
    store: SessionStore
    checkpoints: CheckpointStore | None
    """None when checkpoints are turned off (``--no-checkpoints``)."""
    controller: SessionController
    notices: list[str] = field(default_factory=list)
    """What the user should be told at start (a database restored from its backup)."""


@contextmanager
def open_runtime(config: Config, *, listener: Listener = ignore, sampling: SamplingSettings | None = None,
                 engine_factory: EngineFactory | None = None) -> Iterator[Runtime]:
    """Open the store, the checkpoints and the controller for ``config``; close them after.

    Checkpoint problems (a corrupt file found and deleted) reach the controller's
    listener as ``NoticeRaised``, whichever listener it has by then. The checkpoint writer
    looks at its folder on a thread of its own as soon as the store opens, before the
    controller exists: what it finds then (a folder that is a file) is kept and joins the
    ``notices`` instead of being lost. ``engine_factory`` replaces the llama.cpp engine (tests).
    """
    with ExitStack() as stack:
        store = SessionStore.open()
        stack.callback(store.close)
        controller: SessionController | None = None
        early: list[str] = []
        told = threading.Lock()

        def problem(text: str) -> None:
            with told:
                if controller is None:
                    early.append(text)
                    return
            controller.listener(NoticeRaised(text, "warning"))

        checkpoints = factory.open_checkpoints(config, problem)
        if checkpoints is not None:
            stack.callback(checkpoints.close)  # after the model: it waits for the disk writes
        made = SessionController(
            store, engine_factory=engine_factory or factory.llama_engine_factory(checkpoints, on_problem=problem),
            settings=EngineSettings.from_config(config),
            sampling=sampling or config.effective_sampling(), listener=listener, checkpoints=checkpoints,
            undo_seconds=None if config.undo_minutes is None else config.undo_minutes * 60,
        )
        stack.callback(made.close)
        with told:
            controller = made
            notices = [store.recovery_notice] if store.recovery_notice else []
            notices.extend(early)
        yield Runtime(config, store, checkpoints, controller, notices)
