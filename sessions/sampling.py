"""Sampling settings: one typed value shared by the config, the store and the engine.

Kept in its own small module because three layers need it and none should import the
others just for this: the config gives defaults, a session stores its own copy, and the
engine builds a llama.cpp sampler chain from it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any


@dataclass(frozen=True)
class SamplingSettings:
    """How the next token is chosen. ``temperature == 0`` means greedy."""

    temperature: float = 0.8
    """Softmax temperature; 0 picks the most likely token every time (deterministic)."""
    top_k: int = 40
    """Keep only the k most likely tokens (0 disables)."""
    top_p: float = 0.95
    """Keep the smallest set of tokens whose probabilities add up to p (1.0 disables)."""
    min_p: float = 0.05
    """Drop tokens less likely than min_p times the most likely one (0 disables)."""
    repeat_penalty: float = 1.0
    """Penalise tokens seen in the last ``repeat_last_n`` tokens (1.0 disables)."""
    repeat_last_n: int = 64
    """How far back the repeat penalty looks."""
    seed: int = -1
    """Random seed for sampling; -1 picks a new one for every reply."""
    max_tokens: int = 1024
    """Longest reply, in tokens; generation stops there even without an end token."""

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> SamplingSettings:
        """Build from a stored or configured mapping, ignoring unknown keys.

        Unknown keys are dropped rather than rejected so that a session saved by a newer
        version still opens; values are coerced to the field's type.
        """
        if not data:
            return cls()
        known = {f.name: f for f in fields(cls)}
        values: dict[str, Any] = {}
        for name, value in data.items():
            if name in known:
                kind = type(getattr(cls(), name))
                values[name] = kind(value)
        return cls(**values)

    def with_(self, **changes: Any) -> SamplingSettings:
        return replace(self, **changes)
