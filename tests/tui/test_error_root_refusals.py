"""The app catches the core's one error root: a refusal of any family is told in words.

Families the screen never named (a checkpoint store that closed, a context llama.cpp
would not make) reach the user as their sentence, and the app goes on.
"""

from __future__ import annotations

import pytest

from sessions.checkpoints import StoreClosedError
from sessions.llama.context import DecodeError
from tests.tui.helpers import ready, wait_for


@pytest.mark.parametrize("error", [StoreClosedError(),
                                   DecodeError("could not create a context of 8,192 tokens (out of memory?)")])
async def test_a_gesture_refused_with_any_error_of_the_root_is_a_notification(make_app, error):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)

        def gesture() -> None:
            raise error

        await screen.gestures.when_idle(gesture)
        await wait_for(pilot, lambda: any(n.message == str(error) for n in app._notifications), "the refusal")
        assert app.is_running
