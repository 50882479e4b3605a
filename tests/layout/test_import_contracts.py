"""The import contract that keeps the UI at the controller's door names every other part of the core.

import-linter cannot say "everything but the controller", so the contract lists the core's
modules and packages one by one; a module added to ``sessions/`` without being listed
there would be open to the UI. The contracts themselves run in ``lint-imports``.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOORS = {"sessions.controller", "sessions.events"}


def test_the_ui_contract_names_every_part_of_the_core_but_the_controller_and_the_events():
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    contract = next(c for c in contracts if c["type"] == "forbidden" and c["source_modules"] == ["tui"])
    core = {f"sessions.{path.stem}" for path in (REPO / "sessions").iterdir()
            if (path.suffix == ".py" and path.stem != "__init__") or (path / "__init__.py").is_file()}
    assert DOORS <= core
    assert set(contract["forbidden_modules"]) == core - DOORS
