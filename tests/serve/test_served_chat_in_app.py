"""A chat a client had with ``llamachat serve`` opens in the app with its branches."""

from __future__ import annotations

import pytest

from sessions.api.chat import SessionController
from sessions.config import Config
from sessions.sampling import SamplingSettings
from sessions.store import SessionStore
from sessions.synth import make_model
from tests.serve.server_process import ServeProcess
from tests.tui.fake_engine import FakeEngineFactory, FakeScript
from tests.tui.helpers import headers, settle, shown_texts
from tui.app import LlamaChatApp
from tui.startup import StartupRequest

pytestmark = pytest.mark.engine

SYSTEM = {"role": "system", "content": "You know the harbour."}
QUESTION = {"role": "user", "content": "Which boats sail at night?"}


async def test_a_served_chat_opens_in_the_app_with_its_swipe_and_edit():
    with ServeProcess(make_model("llama", "tiny"), "-c", "1024", "--temp", "0", "--max-tokens", "8") as server:
        client = server.client()
        name = client.models.list().data[0].id
        first = client.chat.completions.create(model=name, messages=[SYSTEM, QUESTION]).model_dump()
        swipe = client.chat.completions.create(model=name, messages=[SYSTEM, QUESTION], temperature=1.0,
                                               seed=3).model_dump()
        edited = {"role": "user", "content": "Which boats sail at dawn?"}
        edit = client.chat.completions.create(model=name, messages=[SYSTEM, edited]).model_dump()
    session = first["llamachat"]["session"]
    assert swipe["llamachat"]["session"] == edit["llamachat"]["session"] == session

    with SessionStore.open() as store:
        controller = SessionController(store, engine_factory=FakeEngineFactory(FakeScript()),
                                       sampling=SamplingSettings(temperature=0.0))
        app = LlamaChatApp(controller, config=Config(), startup=StartupRequest(session_id=session))
        async with app.run_test(size=(100, 40)) as pilot:
            screen = await settle(pilot)
            # The head is where the last request left it: the edited question and its reply.
            assert shown_texts(screen) == [("system", SYSTEM["content"]), ("user", edited["content"]),
                                           ("assistant", edit["choices"][0]["message"]["content"])]
            assert "2/2" in headers(screen)[1]  # the edited question, beside the first one
            await pilot.press("ctrl+up", "ctrl+up", "alt+left")  # the reply, the question, its first version
            await settle(pilot)
            assert shown_texts(screen)[1] == ("user", QUESTION["content"])
            assert shown_texts(screen)[2][1] == swipe["choices"][0]["message"]["content"]
            assert "2/2" in headers(screen)[2]  # the swipe, beside the first reply
