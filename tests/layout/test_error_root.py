"""Every exception class of the project derives from the one root, ``LlamachatError``.

The app and the command line catch the root, so a class that did not derive from it
would turn a refusal written for the user into a crash (the app) or an "unexpected"
line (the command line). Every module of ``sessions`` and ``tui`` found
on disk is imported and searched, so a new module or class cannot slip through.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import sessions
import tui
from sessions.errors import LlamachatError

ALLOWED_OUTSIDE_THE_ROOT: dict[str, str] = {
    # "module.Class": "why it must not derive from LlamachatError",
    # None today: the engine's child process sends its errors as data (sessions.engine.wire),
    # not as exception classes of their own.
}


def defined_exceptions() -> list[type[Exception]]:
    """Every ``Exception`` subclass defined (not imported) in a module of the project."""
    found = []
    for package in (sessions, tui):
        for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            module = importlib.import_module(info.name)
            found += [value for value in vars(module).values()
                      if inspect.isclass(value) and issubclass(value, Exception)
                      and value.__module__ == module.__name__]
    return found


def test_every_exception_class_of_the_project_derives_from_the_root():
    classes = defined_exceptions()
    names = {f"{cls.__module__}.{cls.__qualname__}" for cls in classes}
    assert {"sessions.store.errors.StoreError", "tui.theme_loader.ThemeFileError"} <= names  # the walk finds them
    outside = sorted(f"{cls.__module__}.{cls.__qualname__}" for cls in classes
                     if not issubclass(cls, LlamachatError))
    assert outside == sorted(ALLOWED_OUTSIDE_THE_ROOT)


def test_the_root_keeps_the_other_bases_code_catches():
    """A class that was a ``ValueError``, an ``OSError`` or a ``KeyError`` still is one."""
    from sessions.bounded_read import NotRegularFile
    from sessions.checkpoints import InvalidSegmentError
    from sessions.paths import NotAFolder
    from sessions.tree import TreeError

    assert issubclass(NotRegularFile, OSError) and issubclass(NotAFolder, NotADirectoryError)
    assert issubclass(InvalidSegmentError, ValueError) and issubclass(TreeError, KeyError)
    assert all(issubclass(cls, LlamachatError) for cls in (NotRegularFile, NotAFolder, InvalidSegmentError, TreeError))


def test_every_error_the_api_hands_the_front_ends_is_under_the_root():
    """The front ends catch ``LlamachatError`` (from ``sessions.errors``): each family the
    API re-exports for them to tell apart is one of its subclasses."""
    import importlib
    import inspect

    found = []
    for name in ("chat", "settings", "library", "models", "checkpoint_files"):
        module = importlib.import_module(f"sessions.api.{name}")
        found += [value for value in vars(module).values() if inspect.isclass(value) and issubclass(value, Exception)]
    assert len(found) >= 10
    assert [cls for cls in found if not issubclass(cls, LlamachatError)] == []
