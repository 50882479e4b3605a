"""What each crash trial does: which chat gesture, and when the child is killed.

Gestures are drawn from the live tree of one long session per model (continue at the
head, fork with ``--at``, ``--edit`` a user message, ``--regenerate`` a reply), so the
trials keep growing a real branching conversation instead of replaying one fixed
script. When the active branch gets deep, the next gesture forks or edits near the
root, which keeps every branch well inside the small trial context.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from sessions.crashpoints import POINTS

from .children import KillPlan
from .crash_checks import Heads

KILL_KINDS: tuple[str, ...] = (*POINTS, "timed", "chars")
"""Every way a trial kills: each crash point, a random delay, after k reply characters."""

HOOK_MAX_COUNT = {
    "decode.batch": 3,
    "generate.token": 10,
    "checkpoint.before_rename": 3,
    "checkpoint.after_rename": 3,
    "store.before_commit": 2,
    "store.after_commit": 2,
}
"""The n of ``point:n`` is drawn from 1..this: how often one ``ask`` reaches the point."""

MAX_DELAY = 2.0
SURE_DELAY = 0.5
"""Every ``ask`` of a tiny model takes longer than this (imports and model load alone)."""
MAX_CHARS = 30
DEPTH_CAP = 24
"""A head deeper than this many messages makes the next gesture fork near the root."""
WORDS = ("sea boats night stars lighthouse keeper cat birds winter home map sky river "
         "bread garden lamp window story road rain music").split()


@dataclass(frozen=True)
class Op:
    kind: str
    """"continue", "fork", "edit" or "regenerate"."""
    args: tuple[str, ...]
    """The ``ask`` arguments that say where the message goes (and its text)."""
    expected_new: int
    """Messages a completed run adds (user message and reply, or just the reply)."""


def kill_plan(rng: random.Random, kind: str, *, sure: bool = False) -> KillPlan:
    """A kill of ``kind``; ``sure`` draws only moments that every run reaches."""
    if kind in HOOK_MAX_COUNT:
        return KillPlan("hook", point=kind, count=1 if sure else rng.randint(1, HOOK_MAX_COUNT[kind]))
    if kind == "timed":
        return KillPlan("timed", delay=round(rng.uniform(0.0, SURE_DELAY if sure else MAX_DELAY), 3))
    if kind == "chars":
        return KillPlan("chars", chars=rng.randint(1, MAX_CHARS))
    raise ValueError(f"unknown kill kind {kind!r}")


def random_kind(rng: random.Random) -> str:
    """Crash points three times in five, otherwise a timed or a characters kill."""
    roll = rng.random()
    if roll < 0.6:
        return rng.choice(POINTS)
    return "timed" if roll < 0.8 else "chars"


def sentence(rng: random.Random, label: str) -> str:
    return f"{label}: " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9)))


def depths(heads: Heads, session_id: int) -> dict[int, int]:
    """Depth (messages from the root, the root being 1) of every message of a session."""
    mine = {mid: m for mid, m in heads.messages.items() if m.session_id == session_id}
    found: dict[int, int] = {}
    for start in mine:
        chain, mid = [], start
        while mid is not None and mid not in found:
            chain.append(mid)
            parent = mine[mid].parent_id if mid in mine else None
            mid = parent if parent in mine else None
        base = found[mid] if mid is not None else 0
        for depth, item in enumerate(reversed(chain), base + 1):
            found[item] = depth
    return found


def choose_op(rng: random.Random, heads: Heads, session_id: int, label: str,
              depth_cap: int = DEPTH_CAP) -> Op:
    """A gesture on the session's current tree, chosen with ``rng``."""
    depth = depths(heads, session_id)
    head = heads.heads.get(session_id)
    deep = head is not None and depth.get(head, 0) >= depth_cap
    limit = max(1, depth_cap // 3) if deep else max(1, depth_cap - 2)
    ids = sorted(mid for mid, d in depth.items() if d <= limit)
    users = [mid for mid in ids if heads.messages[mid].role == "user"]
    replies = [mid for mid in ids if heads.messages[mid].role == "assistant"]
    if deep:
        kind = rng.choice(("fork", "edit"))
    else:
        kind = rng.choices(("continue", "fork", "edit", "regenerate"), weights=(4, 2, 2, 2))[0]
    text = sentence(rng, label)
    if kind == "fork" and ids:
        return Op("fork", ("--at", str(rng.choice(ids)), text), 2)
    if kind == "edit" and users:
        return Op("edit", ("--edit", str(rng.choice(users)), text), 2)
    if kind == "regenerate" and replies and not deep:
        return Op("regenerate", ("--regenerate", str(rng.choice(replies))), 1)
    if deep and ids:
        return Op("fork", ("--at", str(rng.choice(ids)), text), 2)
    return Op("continue", (text,), 2)


def sampling_args(rng: random.Random) -> tuple[str, ...]:
    """Greedy half the time, otherwise sampled with a drawn seed; a drawn reply length."""
    length = ("--max-tokens", str(rng.randint(8, 40)))
    if rng.random() < 0.5:
        return ("--temp", "0", *length)
    return ("--temp", "0.9", "--seed", str(rng.randint(0, 2**31)), *length)
