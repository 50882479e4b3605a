"""What a search of the Hub finds: a GGUF repository, its downloads and likes."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class HubModel:
    """A model repository on the Hub that holds GGUF files."""

    repo: str
    downloads: int = 0
    likes: int = 0
