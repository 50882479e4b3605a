"""The app over two RPC servers: chat, branch, switch back, quit, reopen; a server lost.

The same gestures as on one machine, with the real engine in its child process: switching
back to the original branch after an edit restores its saved state (the status line says
so), a new app on the same files reopens the session and answers from the checkpoints on
disk, and a server killed while the app writes a reply is one notification naming it,
with every sent message still on screen.
"""

from __future__ import annotations

import pytest

from sessions.api.chat import SessionController
from sessions.checkpoints import CheckpointStore
from sessions.config import Config
from sessions.engine.factory import llama_engine_factory
from sessions.events import TextStreamed
from sessions.sampling import SamplingSettings
from sessions.store import SessionStore
from tests.tui.helpers import headers, ready, send, settle, shown_cost, shown_texts, type_text, wait_for
from tui.app import LlamaChatApp
from tui.startup import StartupRequest

from .conftest import split_settings, tiny_model

pytestmark = [pytest.mark.rpc, pytest.mark.engine]


class App:
    """Store, checkpoints and controller as the entry point (``tui.entry``) builds them, with --rpc."""

    def __init__(self, tmp_path, endpoints, max_tokens: int = 12):
        self.store = SessionStore.open()
        self.checkpoints = CheckpointStore(tmp_path / "ck", ram_bytes=64 << 20, disk_bytes=256 << 20)
        self.ctl = SessionController(
            self.store, engine_factory=llama_engine_factory(self.checkpoints),
            settings=split_settings("llama", endpoints), sampling=SamplingSettings(temperature=0.0,
                                                                                    max_tokens=max_tokens))

    def app(self, **startup) -> LlamaChatApp:
        return LlamaChatApp(self.ctl, config=Config(), startup=StartupRequest(**startup))

    def close(self) -> None:
        if self.ctl.engine is not None:
            self.ctl.engine.close()
        self.checkpoints.close()
        self.store.close()


async def test_chat_branch_quit_and_reopen_over_rpc(shared_pair, tmp_path):
    first = App(tmp_path, shared_pair.endpoints)
    try:
        async with first.app(model_path=tiny_model("llama")).run_test(size=(100, 30)) as pilot:
            screen = await ready(pilot)
            model = screen.status.text_of("model")
            assert "· plain · CPU + 2 RPC (" in model  # where the layers run
            assert all(endpoint in model for endpoint in shared_pair.endpoints)
            await send(pilot, "Tell me about the sea.")
            await send(pilot, "And the boats on it?")
            original = shown_texts(screen)
            await pilot.press("ctrl+up", "ctrl+up", "ctrl+up", "ctrl+up", "f2")
            await type_text(pilot, " Briefly.")
            await pilot.press("enter")
            await settle(pilot)
            assert "‹ 2/2 ›" in headers(screen)[0]
            await pilot.press("ctrl+up", "ctrl+up", "alt+left")  # back to the first version
            await settle(pilot)
            assert shown_texts(screen) == original
            restored, evaluated = shown_cost(screen)
            assert restored > 0 and evaluated <= 16
            assert screen.status.text_of("last").startswith(f"restored {restored:,} tokens")
            session_id = first.ctl.session_id
    finally:
        first.close()  # quit: the engine process finishes its checkpoint writes

    second = App(tmp_path, shared_pair.endpoints)
    try:
        async with second.app(session_id=session_id).run_test(size=(100, 30)) as pilot:
            screen = await ready(pilot)
            assert shown_texts(screen) == original
            restored, evaluated = shown_cost(screen)
            assert restored > 0 and evaluated == 0  # from the disk, in a new engine process
            await send(pilot, "One more question.")
            restored, evaluated = shown_cost(screen)
            assert restored == 0 and 0 < evaluated < 40  # only the new message
    finally:
        second.close()


async def test_a_server_lost_during_a_reply_is_one_notification(pair, tmp_path):
    a, b = pair.servers
    app_parts = App(tmp_path, pair.endpoints, max_tokens=1500)
    streamed = [0]

    def kill_b(event) -> None:
        if isinstance(event, TextStreamed):
            streamed[0] += 1
            if streamed[0] == 3:
                b.kill()

    try:
        app = app_parts.app(model_path=tiny_model("llama"))
        async with app.run_test(size=(100, 30)) as pilot:
            screen = await ready(pilot)
            await send(pilot, "Tell me about the sea.")
            listener = app_parts.ctl.listener
            app_parts.ctl.listener = lambda event: (kill_b(event), listener(event))
            screen.chat_input.focus()
            await type_text(pilot, "And the stars?")
            await pilot.press("enter")
            await settle(pilot)
            assert streamed[0] >= 3
            texts = [n.message for n in app._notifications]
            lost = [t for t in texts if b.endpoint in t]
            assert len(lost) == 1 and "\n" not in lost[0] and a.endpoint not in lost[0]
            roles = [role for role, _ in shown_texts(screen)]
            assert roles[:3] == ["user", "assistant", "user"] and shown_texts(screen)[2][1] == "And the stars?"
            b.restart()
            await wait_for(pilot, lambda: screen.gestures.idle, "idle")
    finally:
        app_parts.close()
