"""What a process does with signals, per thread, as Linux reports it: for the message of a
test that signals a child and sees nothing happen (a signal ignored, blocked in every
thread, or caught by a thread other than the one waiting)."""

from __future__ import annotations

from pathlib import Path

FIELDS = ("SigPnd", "ShdPnd", "SigBlk", "SigIgn", "SigCgt")


def signal_state(pid: int) -> str:
    """One line per thread of ``pid``: its name and the signal masks (hex, bit n-1 for
    signal n; SIGINT is 0x2); "gone" once the process has exited."""
    lines = []
    for task in sorted(Path(f"/proc/{pid}/task").glob("*")):
        try:
            status = dict(line.split(":\t", 1) for line in (task / "status").read_text().splitlines()
                          if ":\t" in line)
        except OSError:
            continue
        fields = " ".join(f"{key}={status.get(key, '?').strip()}" for key in FIELDS)
        lines.append(f"{task.name} {status.get('Name', '?').strip()}: {fields}")
    return "\n".join(lines) or "gone"
