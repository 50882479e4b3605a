"""Swapping the loaded model for another, without ever leaving the chat with none.

Two models may not fit in memory together, so the current one is closed first. When the
new one fails to load (a bad file, too little memory), the previous one is loaded again
before the error is reported, so a bad pick in the model picker costs a reload, never
the chat.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from sessions.engine.protocol import ChatEngine, EngineFactory
from sessions.engine.settings import EngineSettings
from sessions.events import Listener, ModelLoaded, ModelLoadProgressed, NoticeRaised
from sessions.llama.fingerprint import is_legacy, legacy_fingerprint

if TYPE_CHECKING:
    from sessions.controller.open_chat import OpenChat
    from sessions.engine.reports import LoadedModel
    from sessions.store import SessionStore


def swap_engine(factory: EngineFactory, settings: EngineSettings, listener: Listener,
                current: ChatEngine | None, path: Path) -> tuple[ChatEngine | None, Exception | None]:
    """Close ``current`` and load ``path``: ``(engine now loaded, why the new one failed)``."""
    t0 = time.perf_counter()
    previous = current.info.path if current is not None else None
    if current is not None:
        current.close()

    def progress(fraction: float) -> None:
        listener(ModelLoadProgressed(fraction))

    try:
        engine = factory(path, settings, progress)
    except Exception as error:
        if previous is None or previous == path:
            return None, error
        try:
            back = factory(previous, settings, progress)
        except Exception:
            return None, error
        _announce(back, listener, time.perf_counter() - t0)
        return back, error
    if engine.template.is_fallback and engine.template.fallback_reason:
        listener(NoticeRaised(engine.template.fallback_reason))
    _announce(engine, listener, time.perf_counter() - t0)
    return engine, None


def adopt_engine(chat: OpenChat, engine: ChatEngine) -> None:
    """Make ``engine``, just loaded, the open chat's model: its tokens kept under an older
    identity refiled (``carry_legacy_tokens``) and the model recorded with the chat.

    A model whose use the store cannot record (a read-only or busy database, a file
    replaced under it) is closed again and the store's error raised.
    """
    info = engine.info
    try:
        carry_legacy_tokens(chat.store, info)
        with chat.lock:
            if chat.conversation is not None:
                chat.conversation.record_model(str(info.path), info.fingerprint)
    except BaseException:
        engine.close()  # held by no one otherwise: its memory would stay taken
        raise


def _announce(engine: ChatEngine, listener: Listener, seconds: float) -> None:
    info = engine.info
    devices = "" if engine.devices == "CPU" else engine.devices  # only worth saying when not just this CPU
    kind = info.kind.value if engine.checkpoint_notice is None else f"{info.kind.value}, no checkpoints"
    listener(ModelLoaded(info.name, kind, engine.n_ctx, seconds, devices))
    if engine.checkpoint_notice is not None:
        listener(NoticeRaised(engine.checkpoint_notice, "warning"))
    if engine.attention_notice:
        listener(NoticeRaised(engine.attention_notice))


def carry_legacy_tokens(store: SessionStore, info: LoadedModel) -> int:
    """Refile the frozen tokens that sessions made by earlier versions keep for this model.

    Those carry the model's old identity, a hash of the whole file. Only when a session
    that used this file still records such an identity is the whole file hashed (once:
    afterwards the session records the new identity), and tokens move only when that
    hash is the old identity of this very file.
    """
    path = Path(info.path)
    olds = {f for f in store.fingerprints_used_with(str(path), str(path.resolve())) if is_legacy(f)}
    if not olds:
        return 0
    old = legacy_fingerprint(path)
    return store.refile_tokens(old, info.fingerprint) if old in olds else 0
