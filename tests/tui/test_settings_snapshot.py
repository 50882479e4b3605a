"""A snapshot of the chat settings dialog over a chat, at the same fixed size as the others."""

from __future__ import annotations

from sessions.sampling import SamplingSettings
from sessions.store import SessionStore
from sessions.tree import GenerationStats
from tests.tui.test_main_snapshots import SIZE, quiet
from tui.startup import StartupRequest

SAMPLING = SamplingSettings(temperature=0.3, top_k=20, top_p=0.9, min_p=0.02, repeat_penalty=1.1, max_tokens=512,
                            seed=7)


def write_chat(model_path) -> int:
    """A short chat under a system prompt, with its own sampling settings (fixed times)."""
    with SessionStore.open() as store:
        prompt = "You are a terse assistant. Answer in one sentence."
        session = store.create_session(model_path=str(model_path), model_fingerprint="fake-" + model_path.name,
                                       system_prompt=prompt, sampling=SAMPLING, created_at=0.0)
        system = store.add_message(session.id, None, "system", prompt, created_at=1.0)
        ask = store.add_message(session.id, system.id, "user", "What is a KV cache?", created_at=2.0)
        reply = store.add_message(session.id, ask.id, "assistant", "The attention keys and values of past tokens.",
                                  stats=GenerationStats(tokens_generated=11, stop_reason="eog"), created_at=3.0)
        store.set_active_leaf(session.id, reply.id)
        return session.id


def test_chat_settings_dialog(snap_compare, make_app, fake_model):
    session_id = write_chat(fake_model)
    app = make_app(startup=StartupRequest(session_id=session_id))

    async def open_settings(pilot):
        await quiet(pilot)
        await pilot.press("ctrl+s")
        await pilot.pause()
        pilot.app.screen.query_one("TextArea").cursor_blink = False
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=open_settings)
