"""No module of ``llamachat``, ``sessions`` or ``tui`` imports, directly or through others, a module that imports it.

A circle of imports is how mixins crept in (each half typed ``self`` as the other), and it
makes the import order of a package matter. The graph is read from the source (every
``import`` statement, including those inside functions and ``TYPE_CHECKING`` blocks), so
a circle is caught even where Python would tolerate it at run time.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("sessions", "tui")


def module_files(root: Path, packages: tuple[str, ...]) -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, whether it is a package's ``__init__``)."""
    found = {}
    for package in packages:
        for path in (root / package).rglob("*.py"):
            parts = list(path.relative_to(root).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            found[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return found


def imports_of(name: str, path: Path, is_package: bool, known: set[str]) -> set[str]:
    """The modules among ``known`` that the module ``name`` imports anywhere in its source."""
    package = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in known)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(parts + ([base] if base else []))
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                if submodule in known:
                    found.add(submodule)
                elif base in known:
                    found.add(base)
    found.discard(name)
    return found


def import_circles(root: Path, packages: tuple[str, ...]) -> list[list[str]]:
    """Every group of modules that import each other (strongly connected, more than one)."""
    files = module_files(root, packages)
    graph = {name: imports_of(name, path, is_package, set(files)) for name, (path, is_package) in files.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    circles.append(sorted(group))
    return circles


def test_no_module_imports_a_module_that_imports_it_back():
    circles = import_circles(REPO, PACKAGES)
    assert circles == [], "modules that import each other: " + "; ".join(" <-> ".join(c) for c in circles)


def test_the_check_finds_a_circle_through_a_type_checking_import_and_a_relative_one(tmp_path):
    package = tmp_path / "pkg"
    (package / "screens").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "screens" / "__init__.py").write_text("")
    (package / "screens" / "main.py").write_text("from pkg.screens.actions import Actions\n")
    (package / "screens" / "actions.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .main import Main\n")
    (package / "screens" / "alone.py").write_text("from . import main\n")  # one way only: no circle
    assert import_circles(tmp_path, ("pkg",)) == [["pkg.screens.actions", "pkg.screens.main"]]
