"""The GPU check's machinery: steps under time limits, commands killed at them, and one
JSON report rewritten as figures come, so that a run cut short keeps what it measured.

Standard library only: it runs before anything is installed.
"""

from __future__ import annotations

import json
import os
import queue
import resource
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

LATE_START_SECONDS = 10
"""A step is not started with less of the budget left: it could not finish anything."""

Body = Callable[[dict, float], None]
"""A step's work: it fills its report entry, within the seconds given."""


class Skip(Exception):
    """The step does not run here, for the reason given."""


class TimedOut(Exception):
    pass


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def children_cpu_seconds() -> float:
    """User and system time of every finished process this one started, and theirs: a
    step's work in core-seconds, which other programs on a busy machine do not inflate."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class Runner:
    """Runs steps in order, each within its own limit and the budget they share, and keeps
    ``report`` (with ``derive(report["steps"])`` as its figures) in ``out/gpu_check.json``."""

    def __init__(self, out: Path, report: dict, budget: float, derive: Callable[[dict], dict]):
        out.mkdir(parents=True, exist_ok=True)
        self.report, self.derive = report, derive
        self.json_path = out / "gpu_check.json"
        self.log = (out / "gpu_check.log").open("a", buffering=1)
        self.started = time.monotonic()
        self.deadline = self.started + budget
        # Re-entrant: the signal handler writes the report from the thread it interrupts.
        self.lock = threading.RLock()
        self.child: subprocess.Popen | None = None
        report.update(started=now(), finished=False, budget_seconds=budget)
        self.write()

    def say(self, text: str) -> None:
        line = f"[gpu_check {time.monotonic() - self.started:7.1f}s] {text}"
        print(line, flush=True)
        self.log.write(line + "\n")

    def write(self) -> None:
        """The whole report, replaced in one rename: a reader never sees half a file."""
        with self.lock:
            self.report["updated"] = now()
            self.report["elapsed_seconds"] = round(time.monotonic() - self.started, 2)
            self.report["figures"] = self.derive(self.report["steps"])
            temp = self.json_path.with_suffix(".json.tmp")
            temp.write_text(json.dumps(self.report, indent=1))
            os.replace(temp, self.json_path)

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def step(self, name: str, cap: float, needs: tuple[str, ...], body: Body) -> None:
        """Run ``body`` for step ``name`` unless a step it needs did not succeed (or was not
        replaced by something that stands for it) or the budget is spent."""
        steps = self.report["steps"]
        entry = steps[name]
        missing = [n for n in needs if steps[n]["status"] != "ok" and not steps[n].get("replaced_by")]
        left = self.remaining()
        if missing:
            entry.update(status="skipped", reason="needs " + ", ".join(f"{n} ({steps[n]['status']})" for n in missing))
        elif left < LATE_START_SECONDS:
            entry.update(status="skipped", reason=f"out of time: {left:.0f} s of the budget left")
        else:
            timeout = min(cap, left)
            entry.update(status="running", started_at_seconds=round(time.monotonic() - self.started, 2),
                         timeout_seconds=round(timeout))
            self.say(f"step {name} (at most {timeout:.0f} s)")
            self.write()
            t0, cpu0 = time.monotonic(), children_cpu_seconds()
            try:
                body(entry, timeout)
                entry["status"] = "ok"
            except Skip as why:
                entry.update(status="skipped", reason=str(why))
            except TimedOut as why:
                entry.update(status="timed_out", reason=str(why))
            except Exception as error:
                entry.update(status="failed", reason=f"{type(error).__name__}: {error}")
            entry["seconds"] = round(time.monotonic() - t0, 2)
            entry["cpu_seconds"] = round(children_cpu_seconds() - cpu0, 2)
        self.say(f"step {name}: {entry['status']}" + (f" ({entry['reason']})" if entry.get("reason") else ""))
        self.write()

    def run(self, command: list[str], timeout: float, *, cwd: Path, env: dict[str, str] | None = None,
            on_line: Callable[[str], None] | None = None) -> list[str]:
        """Run ``command``: its output into the log, each stdout line to ``on_line`` as it
        comes; killed with its children when ``timeout`` passes. Its stdout lines."""
        self.say("$ " + " ".join(command))
        lines: list[str] = []
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=self.log,
                                   text=True, process_group=0)
        self.child = process
        got: queue.Queue[str | None] = queue.Queue()

        def pump() -> None:
            assert process.stdout is not None
            for line in process.stdout:
                got.put(line)
            got.put(None)

        threading.Thread(target=pump, daemon=True).start()
        end = time.monotonic() + timeout
        try:
            while (line := got.get(timeout=max(0.0, end - time.monotonic()))) is not None:
                self.log.write(line)
                lines.append(line.rstrip("\n"))
                if on_line is not None:
                    on_line(line)
            process.wait(timeout=max(1.0, end - time.monotonic()))
        except (queue.Empty, subprocess.TimeoutExpired):
            self.kill(process)
            raise TimedOut(f"stopped after {timeout:.0f} s") from None
        finally:
            self.child = None
        if process.returncode != 0:
            raise RuntimeError(f"exit status {process.returncode}: {' '.join(command[:6])}")
        return lines

    def kill(self, process: subprocess.Popen) -> None:
        """``process`` and every process it started (its own process group)."""
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()

    def records_into(self, entry: dict) -> Callable[[str], None]:
        """Benchmarks print one JSON object per line: each is kept, and the report rewritten."""
        entry["records"] = []

        def take(line: str) -> None:
            line = line.strip()
            if not line.startswith("{"):
                return
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                return
            with self.lock:
                entry["records"].append(record)
            self.write()

        return take

    def stop(self, signum: int) -> None:
        """The run tool's limit: end the command under way, keep what was measured."""
        if self.child is not None:
            self.kill(self.child)
        for entry in self.report["steps"].values():
            if entry["status"] == "running":
                entry.update(status="stopped", reason=f"signal {signum}")
        self.report["stopped_by_signal"] = signum
        self.write()

    def close(self) -> None:
        self.report["finished"] = True
        self.write()
        self.log.close()
