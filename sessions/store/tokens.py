"""Frozen token sequences as compact blobs.

The tokens a model saw for a message are stored per model fingerprint (different models
tokenize differently). A little-endian int32 array keeps them small and exact, and the
byte order is fixed so a database copied between machines still reads back the same ids.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Iterable

from sessions.store.errors import StoreError


def pack_tokens(tokens: Iterable[int]) -> bytes:
    """Token ids as a blob; a negative id (no vocabulary has one) is refused."""
    try:
        values = array("i", tokens)
    except (TypeError, OverflowError) as error:
        raise StoreError(f"tokens must be 32-bit integers ({error})") from error
    if values and min(values) < 0:
        raise StoreError(f"token ids cannot be negative (found {min(values)})")
    if sys.byteorder != "little":
        values.byteswap()
    return values.tobytes()


def unpack_tokens(blob: bytes) -> list[int]:
    values = array("i")
    values.frombytes(blob)
    if sys.byteorder != "little":
        values.byteswap()
    return values.tolist()
