"""Sampling settings: one typed value shared by the config, the store and the engine.

Kept in its own small module because three layers need it and none should import the
others just for this: the config gives defaults, a session stores its own copy, and the
engine builds a llama.cpp sampler chain from it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

BOUNDS: dict[str, tuple[float, float]] = {
    "temperature": (0.0, 100.0),
    "top_k": (0, 2**31 - 1),
    "top_p": (0.0, 1.0),
    "min_p": (0.0, 1.0),
    "repeat_penalty": (0.0, 100.0),
    "repeat_last_n": (-1, 2**31 - 1),
    "seed": (-1, 2**32 - 1),
    "max_tokens": (1, 2**31 - 1),
}
"""Allowed range of each setting, the same as the config file's ``[sampling]`` rules (a
test keeps them equal): llama.cpp takes these as int32, uint32 and float through ctypes,
which wraps an integer out of range without a word and passes a NaN on."""

MOST_VERSIONS = 8
"""Most versions of a reply sampled at once (``SessionController.generate_versions``)."""


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

    @property
    def deterministic(self) -> bool:
        """Every sample of the same logits is the same token (greedy, or top-k 1): several
        versions of a reply would all be the same reply."""
        return self.greedy or self.top_k == 1

    def out_of_range(self) -> str | None:
        """Why a setting cannot go to llama.cpp (the first one found), or None."""
        for name, (low, high) in BOUNDS.items():
            value = getattr(self, name)
            if not (math.isfinite(value) and low <= value <= high):
                return f"sampling setting {name} is {value!r}, outside {low}..{high}"
        return None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> SamplingSettings:
        """Build from a stored or configured mapping, ignoring unknown keys.

        Unknown keys are dropped rather than rejected so that a session saved by a newer
        version still opens; values are coerced to the field's type. A value outside
        ``BOUNDS`` raises ``ValueError`` (the store reports it as a damaged session).
        """
        if not data:
            return cls()
        known = {f.name: f for f in fields(cls)}
        values: dict[str, Any] = {}
        for name, value in data.items():
            if name in known:
                kind = type(getattr(cls(), name))
                values[name] = kind(value)
        settings = cls(**values)
        problem = settings.out_of_range()
        if problem:
            raise ValueError(problem)
        return settings

    def with_(self, **changes: Any) -> SamplingSettings:
        return replace(self, **changes)
