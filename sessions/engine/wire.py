"""What the app and its engine process say to each other over their socket.

Messages are tuples whose first item names them, pickled by ``multiprocessing``'s
``Connection``. The parent sends ``("load", LoadRequest)`` once, then ``("call", name,
args)`` one at a time, and at any moment ``("abort",)``, ``("clear",)`` (the engine's
``request_abort`` / ``clear_abort``), ``("stop",)`` (stop the reply being written) and
``("close",)``. The child answers a load with ``("loaded", Loaded)`` and a call with
``("result", value)``; meanwhile it sends ``("load_progress", fraction)``,
``("progress", done, total, rate)``, ``("text", str)``, ``("version_text", index, str)``
and ``("notice", str)``.
A failure is ``("error", WireError)``: the exception's class travels by name and is
rebuilt on the other side only from the list below, so the parent raises the same
``ModelLoadError`` or ``ContextFull`` as an engine in its own process would.
"""

from __future__ import annotations

from dataclasses import dataclass

from sessions.engine.reports import LoadedModel
from sessions.engine.settings import EngineSettings
from sessions.errors import BatchUnavailable, ContextOverflow, ControllerError, DecodeCancelled
from sessions.llama.context import ContextFull, DecodeError
from sessions.llama.model import ModelLoadError
from sessions.llama.placement import Placement
from sessions.rpc.errors import RpcError


@dataclass(frozen=True)
class LoadRequest:
    path: str
    settings: EngineSettings
    checkpoint_dir: str | None
    """Folder of the checkpoint store the child opens; None: no checkpoints."""


@dataclass(frozen=True)
class Loaded:
    info: LoadedModel
    n_ctx: int
    load_seconds: float
    placement: Placement | None
    checkpoint_notice: str | None = None


@dataclass(frozen=True)
class WireError:
    kind: str
    message: str


def _classes() -> dict[str, type[BaseException]]:
    found = (BatchUnavailable, ContextFull, DecodeCancelled, DecodeError, ModelLoadError, ContextOverflow,
             ControllerError, RpcError, ValueError, RuntimeError, OSError, MemoryError)
    return {cls.__name__: cls for cls in found}


def to_wire(error: BaseException) -> WireError:
    known = _classes()
    for cls in type(error).__mro__:
        if cls.__name__ in known and known[cls.__name__] is cls:
            return WireError(cls.__name__, str(error))
    return WireError("RuntimeError", f"{type(error).__name__}: {error}")


def from_wire(error: WireError) -> BaseException:
    cls = _classes().get(error.kind, RuntimeError)
    return cls(error.message) if error.message else cls()
