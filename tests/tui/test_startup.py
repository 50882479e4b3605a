"""The start-up rules: which chat appears first and which model loads."""

from __future__ import annotations

import argparse
from pathlib import Path

from sessions.cli import LaunchOptions
from sessions.config import Config
from tui.entry import startup_request
from tui.startup import StartupPlan, StartupRequest, plan_startup


def plan(request: StartupRequest, last: int | None = None, model: str | None = None) -> StartupPlan:
    return plan_startup(request, last_session_id=last, configured_model=model)


def test_demo_wins_over_everything():
    assert plan(StartupRequest(demo=True, model_path=Path("x.gguf"), session_id=3), last=9).start == "demo"


def test_model_flag_starts_a_new_chat_with_that_model():
    assert plan(StartupRequest(model_path=Path("m.gguf")), last=9) == StartupPlan("new", model_path=Path("m.gguf"))


def test_session_flag_reopens_that_session():
    assert plan(StartupRequest(session_id=3), last=9) == StartupPlan("open", session_id=3)


def test_session_and_model_flags_reopen_that_session_with_that_model():
    assert plan(StartupRequest(session_id=3, model_path=Path("m.gguf")), last=9) == StartupPlan(
        "open", session_id=3, model_path=Path("m.gguf"))


def test_no_flags_reopens_the_last_session():
    assert plan(StartupRequest(), last=9, model="conf.gguf") == StartupPlan("open", session_id=9)


def test_no_flags_and_no_session_uses_the_configured_model_else_the_picker():
    assert plan(StartupRequest(), model="conf.gguf") == StartupPlan("new", model_path=Path("conf.gguf"))
    assert plan(StartupRequest()) == StartupPlan("pick")


def test_request_from_the_launch_options():
    args = argparse.Namespace(model="~/m.gguf", demo=False, session=None)
    options = LaunchOptions.from_args(args, Config(), Path("config.toml"))
    assert startup_request(options) == StartupRequest(model_path=Path("~/m.gguf").expanduser())
    bare = LaunchOptions.from_args(argparse.Namespace(), Config(), Path("config.toml"))
    assert startup_request(bare) == StartupRequest()
