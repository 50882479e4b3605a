"""Run ``llamachat`` as a child process and kill it with SIGKILL at a chosen moment.

The crash trials need three kinds of kill: at a named crash point inside the child
(``LLAMACHAT_CRASH_AT``, the child kills itself), after a wall-clock delay, and once
the child has printed some characters of its reply. The last two are sent from here
while both output pipes are drained, so a chatty child can never block on a full pipe
and a kill is never late because this side was waiting on the wrong stream.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from sessions.crashpoints import ENV_VAR

REPO = Path(__file__).resolve().parents[2]
CHILD_TIMEOUT = 300.0


@dataclass(frozen=True)
class KillPlan:
    """When to kill: ``kind`` is "hook", "timed", "chars" or "none"."""

    kind: str
    point: str | None = None
    """The crash point of a hook kill."""
    count: int = 0
    """The hook fires the ``count``-th time the point is reached."""
    delay: float = 0.0
    """Seconds after start of a timed kill."""
    chars: int = 0
    """Reply characters printed before a chars kill."""

    @property
    def label(self) -> str:
        return self.point if self.kind == "hook" and self.point else self.kind

    def describe(self) -> str:
        if self.kind == "hook":
            return f"{self.point}:{self.count}"
        if self.kind == "timed":
            return f"timed {self.delay:.2f}s"
        if self.kind == "chars":
            return f"after {self.chars} chars"
        return "no kill"


@dataclass(frozen=True)
class ChildResult:
    returncode: int
    stdout: str
    stderr: str
    killed: bool
    """The child died of SIGKILL (its own crash point or ours)."""
    seconds: float
    timed_out: bool = False
    """Killed because it ran past the time limit: a hang, never a planned kill."""

    def stats(self) -> dict | None:
        """The ``--stats`` JSON line of ``ask`` (the last stderr line), if it got there."""
        lines = self.stderr.strip().splitlines()
        if self.returncode != 0 or not lines:
            return None
        try:
            value = json.loads(lines[-1])
        except ValueError:
            return None
        return value if isinstance(value, dict) else None


def child_env(base: Mapping[str, str], plan: KillPlan | None = None, **overrides: str) -> dict[str, str]:
    """``base`` with the hook armed only as ``plan`` says (never inherited by accident)."""
    env = {k: v for k, v in base.items() if k != ENV_VAR}
    env.update(overrides)
    if plan is not None and plan.kind == "hook":
        env[ENV_VAR] = f"{plan.point}:{plan.count}"
    return env


def start(args: Sequence[str], env: Mapping[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "sessions.cli", *args],
        cwd=REPO, env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )


def run_llamachat(args: Sequence[str], env: Mapping[str, str], plan: KillPlan = KillPlan("none"),
                  timeout: float = CHILD_TIMEOUT) -> ChildResult:
    """Run ``python -m sessions.cli ARGS`` and kill it as ``plan`` says."""
    t0 = time.monotonic()
    child = start(args, child_env(env, plan))
    out, err, timed_out = _drain(child, plan, t0, timeout)
    returncode = child.wait()
    return ChildResult(returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"),
                       returncode == -signal.SIGKILL, time.monotonic() - t0, timed_out)


def finish(child: subprocess.Popen, timeout: float = CHILD_TIMEOUT) -> ChildResult:
    """Wait for a child started with ``start`` (no kill planned)."""
    t0 = time.monotonic()
    timed_out = False
    try:
        out, err = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        child.kill()
        out, err = child.communicate()
        timed_out = True
    return ChildResult(child.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"),
                       child.returncode == -signal.SIGKILL, time.monotonic() - t0, timed_out)


def _drain(child: subprocess.Popen, plan: KillPlan, t0: float, timeout: float) -> tuple[bytes, bytes, bool]:
    """Both pipes until they close; (stdout, stderr, killed for running too long)."""
    chunks = {"out": bytearray(), "err": bytearray()}
    selector = selectors.DefaultSelector()
    selector.register(child.stdout, selectors.EVENT_READ, "out")
    selector.register(child.stderr, selectors.EVENT_READ, "err")
    sent = timed_out = False
    deadline = t0 + (plan.delay if plan.kind == "timed" else timeout)
    while selector.get_map():
        wait = max(0.0, deadline - time.monotonic())
        events = selector.select(timeout=wait)
        for key, _ in events:
            data = os.read(key.fileobj.fileno(), 65536)
            if not data:
                selector.unregister(key.fileobj)
                continue
            chunks[key.data] += data
        printed = len(chunks["out"].decode("utf-8", "ignore"))
        if not sent and (
            (plan.kind == "chars" and printed >= plan.chars)
            or (time.monotonic() >= deadline and child.poll() is None)
        ):
            _kill(child)
            timed_out = plan.kind != "timed" and not (plan.kind == "chars" and printed >= plan.chars)
            sent = True
            deadline = time.monotonic() + timeout  # then drain what is left
    selector.close()
    child.stdout.close()
    child.stderr.close()
    return bytes(chunks["out"]), bytes(chunks["err"]), timed_out


def _kill(child: subprocess.Popen) -> None:
    try:
        child.send_signal(signal.SIGKILL)
    except ProcessLookupError:
        pass
