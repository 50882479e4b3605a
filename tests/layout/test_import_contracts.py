"""The import contracts name every part of the core, so that nothing new slips past them.

import-linter checks only what a contract names: a package missing from the layers
contract may import anything, and a module missing from a forbidden list is open to the
front ends. So every package of ``sessions/`` must have a layer, and a module at the top
of ``sessions/`` must be a leaf (it imports no package of the core, only other leaves);
one that is not belongs in the package of its subject. The front ends reach the core only
through ``sessions.api`` and those leaves, so their contract must name every other package.
The contracts themselves run in ``lint-imports``.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from tests.layout.test_import_cycles import imports_of, module_files

REPO = Path(__file__).resolve().parents[2]
FRONT_ENDS = ["tui", "sessions.cli", "sessions.serve"]


def _contracts() -> list[dict]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    return config["tool"]["importlinter"]["contracts"]


def _packages() -> set[str]:
    return {f"sessions.{path.name}" for path in (REPO / "sessions").iterdir() if (path / "__init__.py").is_file()}


def _top_modules() -> set[str]:
    return {f"sessions.{path.stem}" for path in (REPO / "sessions").glob("*.py") if path.stem != "__init__"}


def test_every_package_of_the_core_has_a_layer():
    contract = next(c for c in _contracts() if c["type"] == "layers")
    layered = {name.strip() for layer in contract["layers"] for name in layer.split("|")}
    assert _packages() - layered == set(), "a package of sessions/ is in no layer of the contract"
    assert layered - _packages() - {"tui"} == set(), "the contract names a package that is gone"


def test_every_module_at_the_top_of_the_core_is_a_leaf():
    """A leaf imports nothing of the core but other leaves (``TYPE_CHECKING`` imports too)."""
    modules = module_files(REPO, ("sessions",))
    known = set(modules)
    leaves = _top_modules()
    for name in sorted(leaves):
        path, is_package = modules[name]
        uses = {used for used in imports_of(name, path, is_package, known) if used != "sessions"}
        assert uses <= leaves, f"{name} imports {sorted(uses - leaves)}: it belongs in the package of its subject"


def test_the_front_ends_contract_forbids_every_package_of_the_core_but_the_api():
    """The leaves are open to the front ends (the test above keeps them leaves); every
    package is closed but the API and the front ends' own."""
    contract = next(c for c in _contracts() if c["type"] == "forbidden" and c["source_modules"] == FRONT_ENDS)
    assert set(contract["forbidden_modules"]) == _packages() - {"sessions.api", *FRONT_ENDS}
