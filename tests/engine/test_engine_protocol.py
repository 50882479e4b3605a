"""The engines the controller runs on have the shape of ``ChatEngine``: the real one and the fake.

The UI tests drive the controller with a fake engine; if its methods drifted from the
protocol (a renamed parameter, a missing method), those tests would go on passing against
an engine that no longer exists. mypy checks the same statically (``fake_engine`` asserts
it under ``TYPE_CHECKING``); this test fails in the suite itself.
"""

from __future__ import annotations

import inspect

import pytest

from sessions.engine.chat_engine import LlamaChatEngine
from sessions.engine.factory import llama_engine_factory
from sessions.engine.protocol import ChatEngine, EngineFactory
from tests.tui.fake_engine import FakeEngine, FakeEngineFactory, FakeScript

METHODS = sorted(name for name, value in vars(ChatEngine).items() if inspect.isfunction(value)
                 and not name.startswith("_"))
ATTRIBUTES = sorted(ChatEngine.__annotations__)
PROPERTIES = sorted(name for name, value in vars(ChatEngine).items() if isinstance(value, property))


def shape(function) -> list[tuple[str, object, bool]]:
    """Name, kind and whether it has a default, for each parameter but ``self``."""
    parameters = list(inspect.signature(function).parameters.values())
    if parameters and parameters[0].name == "self":
        parameters = parameters[1:]
    return [(p.name, p.kind, p.default is not p.empty) for p in parameters]


def test_the_protocol_lists_what_the_controller_uses():
    assert METHODS == ["clear_abort", "close", "detokenize", "generate", "generate_versions", "plan", "prepare",
                       "request_abort", "save_checkpoints", "saved_tiers", "tokenize", "warm_ahead"]
    assert ATTRIBUTES == ["checkpoint_notice", "info", "n_ctx", "template"]
    assert PROPERTIES == ["attention_notice", "devices"]


@pytest.mark.parametrize("engine", [LlamaChatEngine, FakeEngine])
@pytest.mark.parametrize("method", METHODS)
def test_each_engine_method_takes_the_protocol_parameters(engine, method):
    assert shape(getattr(engine, method)) == shape(getattr(ChatEngine, method))


def test_the_fake_has_the_protocol_attributes(tmp_path):
    fake = FakeEngine(tmp_path / "m.gguf", FakeScript())
    assert all(hasattr(fake, name) for name in ATTRIBUTES + PROPERTIES)


@pytest.mark.parametrize("name", PROPERTIES)
def test_the_real_engines_have_the_protocol_properties(name):
    from sessions.engine.process import EngineProcess

    assert isinstance(getattr(LlamaChatEngine, name), property)
    assert isinstance(getattr(EngineProcess, name), property)


@pytest.mark.parametrize("factory", [llama_engine_factory(None), FakeEngineFactory()])
def test_each_factory_is_called_as_the_controller_calls_it(factory):
    assert shape(factory) == shape(EngineFactory.__call__)


def test_a_drifted_engine_would_be_caught():
    class Drifted:
        def prepare(self, target, ends, on_progress=None, stepped=None): ...

    assert shape(Drifted.prepare) != shape(ChatEngine.prepare)
