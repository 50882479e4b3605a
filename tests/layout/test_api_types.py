"""The API is typed in its own words.

Every type in the signature of a public method of ``SessionController``, and of the
parts it hands the front ends (its library, its routes, its model catalogue), is one that
``sessions.api`` hands out, one of the leaves at the top of ``sessions/``, or the
standard library's: the annotations are resolved against those names alone, so one that
names anything else fails here. No type of the branch engine, the llama.cpp bindings or
the checkpoint store may be among them.
"""

from __future__ import annotations

import collections.abc
import contextlib
import importlib
import inspect
import pathlib
import types
import typing
from pathlib import Path

import pytest

from sessions.api.chat import BranchRoutes, ModelCatalogue, SessionController, SessionLibrary

REPO = Path(__file__).resolve().parents[2]
API = ("chat", "settings", "library", "models", "checkpoint_files", "runtime")
MACHINERY = ("sessions.branching", "sessions.llama", "sessions.checkpoints")
CLASSES = (SessionController, SessionLibrary, BranchRoutes, ModelCatalogue)


def _public(module: types.ModuleType) -> dict[str, object]:
    return {name: value for name, value in vars(module).items() if not name.startswith("_")}


def _namespace() -> dict[str, object]:
    names: dict[str, object] = {**_public(typing), **_public(collections.abc), "Path": pathlib.Path,
                                "AbstractContextManager": contextlib.AbstractContextManager}
    leaves = sorted(path.stem for path in (REPO / "sessions").glob("*.py") if path.stem != "__init__")
    for leaf in leaves:
        names.update(_public(importlib.import_module(f"sessions.{leaf}")))
    for module in API:
        names.update(_public(importlib.import_module(f"sessions.api.{module}")))
    return names


def _members() -> list[tuple[str, object]]:
    found = []
    for cls in CLASSES:
        for name, value in vars(cls).items():
            if name.startswith("_"):  # the core makes them (``runtime.open_runtime``)
                continue
            function = value.fget if isinstance(value, property) else value
            if inspect.isfunction(function):
                found.append((f"{cls.__name__}.{name}", function))
    return found


def _classes_in(hint: object) -> set[type]:
    found = {hint} if isinstance(hint, type) else set()
    for arg in typing.get_args(hint):
        found |= _classes_in(arg)
    return found


@pytest.mark.parametrize(("name", "function"), _members(), ids=[name for name, _ in _members()])
def test_each_public_method_is_typed_in_the_apis_words(name, function):
    hints = typing.get_type_hints(function, globalns=_namespace())
    assert "return" in hints, f"{name} says nothing of what it returns"
    machinery = [cls for hint in hints.values() for cls in _classes_in(hint) if cls.__module__.startswith(MACHINERY)]
    assert machinery == []


def test_the_check_sees_the_methods_and_would_catch_a_stray_type():
    assert len(_members()) > 60

    def leaks(plan: Plan) -> None: ...  # noqa: F821 (a name the API does not hand out)

    with pytest.raises(NameError):
        typing.get_type_hints(leaks, globalns=_namespace())
