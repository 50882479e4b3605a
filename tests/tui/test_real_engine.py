"""End to end on the real engine: a tiny llama, real checkpoints, real keys.

After two turns and an edit of the first message, paging back to the original version
must make its branch live again by *restoring* its saved state, not by reading the
whole conversation again: the status line reports tokens restored and none evaluated.
None, because that branch ends with a finished reply whose checkpoint was saved, and a
switch only shows the branch: it asks for no logits, so nothing is decoded again.
"""

from __future__ import annotations

import pytest

from sessions.api.chat import EngineSettings, SessionController
from sessions.checkpoints import CheckpointStore
from sessions.config import Config
from sessions.engine.factory import llama_engine_factory as engine_factory
from sessions.sampling import SamplingSettings
from sessions.store import SessionStore
from tests.tui.helpers import headers, ready, send, settle, shown_cost, shown_texts, type_text
from tui.app import LlamaChatApp
from tui.startup import StartupRequest

pytest.importorskip("llama_cpp")
pytestmark = pytest.mark.engine

MIB = 1024 * 1024


@pytest.fixture
def real_controller(tmp_path):
    store = SessionStore.open()
    checkpoints = CheckpointStore(tmp_path / "checkpoints", ram_bytes=64 * MIB, disk_bytes=256 * MIB)
    controller = SessionController(
        store, engine_factory=engine_factory(checkpoints),
        settings=EngineSettings(n_ctx=1024, n_batch=64, threads=1),
        sampling=SamplingSettings(temperature=0.0, max_tokens=12),
    )
    yield controller
    if controller.engine is not None:
        controller.engine.close()
    checkpoints.close()
    store.close()


async def test_switching_back_after_an_edit_restores_instead_of_recomputing(real_controller):
    from sessions.synth import make_model

    model = make_model("llama", "tiny")
    app = LlamaChatApp(real_controller, config=Config(), startup=StartupRequest(model_path=model))
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        assert screen.status.text_of("model").endswith("· plain")
        await send(pilot, "Tell me about the sea.")
        await send(pilot, "And the boats on it?")
        original = shown_texts(screen)
        assert [role for role, _ in original] == ["user", "assistant", "user", "assistant"]

        await pilot.press("ctrl+up", "ctrl+up", "ctrl+up", "ctrl+up", "f2")
        await type_text(pilot, " Briefly.")
        await pilot.press("enter")
        await settle(pilot)
        assert shown_texts(screen)[0] == ("user", "Tell me about the sea. Briefly.")
        assert "‹ 2/2 ›" in headers(screen)[0]

        await pilot.press("ctrl+up", "ctrl+up", "alt+left")  # back to the first version
        await settle(pilot)
        assert shown_texts(screen) == original
        restored, evaluated = shown_cost(screen)
        assert restored > 0
        assert evaluated == 0, f"switching back evaluated {evaluated} tokens"
