"""Real models' KV and state shapes on thin bodies, by name (the table follows in its own change)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Shape:
    arch: str
    fields: dict


SHAPES: dict[str, Shape] = {}
