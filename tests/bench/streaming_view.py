"""How far the screen lags behind a reply streamed as fast as a GPU writes, and the CPU the
app spends drawing it, as one JSON line.

Run: ``python -m tests.bench.streaming_view [--tokens 4000] [--rate 500] [--messages 200]``.

A chat of ``--messages`` messages is written to a fresh store; then the real app runs in a
child process on a pseudo-terminal (so Textual draws every frame and writes it, as in a
terminal), over the fake engine of the UI tests, which streams a Markdown reply of
``--tokens`` numbered words (prose, code blocks and a table) at ``--rate`` chunks a second,
one chunk a word (``chunks``: the numbered words and the others around them, "Some prose,",
a code line's ``x =``, a fence). Each numbered word (``w0123``, ``v0123`` in code, ``c0123``
in the table) is noted when first written to the terminal, which this process reads; its
lag is that moment less the moment the engine handed over the chunk holding it (both
``CLOCK_MONOTONIC``). It prints:

- ``lag_ms``: the lag's p50, p90, p99 and most, over the numbers seen (``seen`` of
  ``tokens``: a number drawn and replaced within one frame is never written);
- ``cpu_cores``: the app's CPU time (every thread) over the wall time, from the first
  number to the last one drawn: 1.0 is one core busy; ``cpu_ms_per_token``: that CPU time
  per chunk handed over, what keeping up costs whatever else the machine runs (at
  ``--rate`` chunks a second the app needs ``rate * cpu_ms_per_token / 1000`` cores), and
  ``load``, the machine's one-minute load average at the end (other programs' work slows
  the app down);
- ``stream_s``: how long the engine took to hand the reply over (``tokens / rate`` when
  the app keeps up with it).
"""

from __future__ import annotations

import argparse
import bisect
import fcntl
import json
import os
import pty
import re
import select
import signal
import statistics
import struct
import sys
import tempfile
import termios
import time
from pathlib import Path

from sessions.api.chat import SessionController
from sessions.config import Config
from sessions.sampling import SamplingSettings
from sessions.store import SessionStore
from sessions.store.records import NewMessage
from tests.bench.long_chat import message_text
from tests.tui.fake_engine import FakeEngineFactory, FakeScript, chunks
from tui.app import LlamaChatApp
from tui.startup import StartupRequest

SIZE = (120, 40)
MARKER = re.compile(rb"[wvc](\d{4})")
LIMIT_SECONDS = 180.0


def reply_text(tokens: int) -> str:
    """A Markdown reply of ``tokens`` chunks with a numbered word each: paragraphs, a code
    block every few paragraphs and one table, as a long answer has."""
    parts: list[str] = []
    count = 0

    def words(prefix: str, n: int) -> list[str]:
        nonlocal count
        made = [f"{prefix}{(count + k) % 10000:04d}" for k in range(n)]
        count += n
        return made

    section = 0
    while count < tokens:
        left = tokens - count
        section += 1
        if section % 4 == 2 and left > 40:
            lines = [" ".join(words("v", 6)) for _ in range(5)]
            parts.append("```python\n" + "\n".join(f"x = [{line}]" for line in lines) + "\n```")
        elif section == 7 and left > 80:
            rows = [" | ".join(words("c", 4)) for _ in range(16)]
            parts.append("| a | b | c | d |\n|---|---|---|---|\n" + "\n".join(f"| {row} |" for row in rows))
        else:
            parts.append("Some prose, " + " ".join(words("w", min(left, 40))) + ".")
    return "\n\n".join(parts)


def numbered_chunks(tokens: int) -> dict[int, int]:
    """Each number of the reply (``w0123`` is 123): the index of the chunk the fake engine
    hands it over in. Not the number itself: the words around the numbered ones ("Some
    prose,", a code line's ``x =``, a fence) are chunks of their own."""
    found: dict[int, int] = {}
    for index, part in enumerate(chunks(reply_text(tokens))):
        for match in MARKER.finditer(part.encode()):
            found.setdefault(int(match.group(1)), index)
    return found


def write_chat(messages: int) -> int:
    with SessionStore.open() as store:  # the fake's tokens are bytes: room for the whole reply
        session = store.create_session(title="streaming", sampling=SamplingSettings(temperature=0.0,
                                                                                   max_tokens=1 << 22))
        news = [NewMessage(None if i == 0 else i - 1, "user" if i % 2 == 0 else "assistant", message_text(i))
                for i in range(messages)]
        ids = store.add_messages(session.id, news)
        store.set_active_leaf(session.id, ids[-1])
        return session.id


def child(result: Path, session_id: int, tokens: int, rate: float) -> None:
    """The app, over the fake engine streaming the reply at ``rate``; on the way out it
    writes when each chunk was handed over."""
    model = result.with_name("fake.gguf")
    model.write_bytes(b"GGUF fake model")
    script = FakeScript(replies=[reply_text(tokens)], n_ctx=1 << 22, tokens_per_second=rate)
    with SessionStore.open() as store:
        controller = SessionController(store, engine_factory=FakeEngineFactory(script),
                                       sampling=SamplingSettings(temperature=0.0, max_tokens=1 << 22))
        app = LlamaChatApp(controller, config=Config(), startup=StartupRequest(session_id=session_id,
                                                                              model_path=model))
        try:
            app.run()
        finally:
            controller.close()
            result.write_text(json.dumps({"streamed_at": script.streamed_at}))


def cpu_seconds(pid: int) -> float:
    """User and system time of every thread of ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Terminal:
    """The child's pseudo-terminal: everything it writes, with when each read came."""

    def __init__(self, fd: int, pid: int) -> None:
        self.fd, self.pid = fd, pid
        self.output = bytearray()
        self.starts: list[int] = []
        self.times: list[float] = []
        self._looked = 0
        """How much of the output ``has`` has looked at."""

    def has(self, pattern: re.Pattern[bytes] | bytes) -> bool:
        """Whether ``pattern`` is in what was written since the last look (and a little
        before it, so that nothing split between two reads is missed): looking at the whole
        output each time made this process fall behind the app, and the app then waited to
        write."""
        start = max(0, self._looked - 64)
        self._looked = len(self.output)
        if isinstance(pattern, bytes):
            return self.output.find(pattern, start) >= 0
        return pattern.search(self.output, start) is not None

    def read_until(self, done, what: str, limit: float = LIMIT_SECONDS) -> None:
        deadline = time.monotonic() + limit
        while not done():
            if time.monotonic() > deadline:
                raise SystemExit(f"timed out waiting for {what}")
            if select.select([self.fd], [], [], 0.5)[0]:
                try:
                    chunk = os.read(self.fd, 1 << 16)
                except OSError:  # every process on the terminal has ended
                    if done():
                        return
                    raise SystemExit(f"the app ended before {what}") from None
                self.starts.append(len(self.output))
                self.times.append(time.monotonic())
                self.output += chunk

    def first_seen(self) -> dict[int, float]:
        """Each number's first appearance in the output, and when it was read."""
        seen: dict[int, float] = {}
        for match in MARKER.finditer(self.output):
            number = int(match.group(1))
            if number not in seen:
                seen[number] = self.times[bisect.bisect_right(self.starts, match.start()) - 1]
        return seen


def measure(tokens: int, rate: float, messages: int, folder: Path) -> dict:
    env = {**os.environ, "LLAMACHAT_DATA_DIR": str(folder / "data"), "LLAMACHAT_CACHE_DIR": str(folder / "cache"),
           "LLAMACHAT_CONFIG": str(folder / "config.toml"), "TERM": "xterm-256color"}
    os.environ.update({key: env[key] for key in ("LLAMACHAT_DATA_DIR", "LLAMACHAT_CACHE_DIR", "LLAMACHAT_CONFIG")})
    session_id = write_chat(messages)
    result = folder / "child.json"
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(sys.executable, [sys.executable, "-m", "tests.bench.streaming_view", "--child", str(result),
                                   "--session", str(session_id), "--tokens", str(tokens), "--rate", str(rate)], env)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", SIZE[1], SIZE[0], 0, 0))
    terminal = Terminal(fd, pid)
    try:
        terminal.read_until(lambda: terminal.has(b"number " + str(messages - 1).encode()), "the chat drawn")
        terminal.read_until(lambda: b"Fake Model" in terminal.output, "the model loaded")
        os.write(fd, b"go")
        time.sleep(0.3)  # the two letters typed before Enter: the benchmark's only pause
        os.write(fd, b"\r")
        terminal.read_until(lambda: terminal.has(MARKER), "the first chunk drawn")
        cpu_before, wall_before = cpu_seconds(pid), time.monotonic()
        last = f"{(tokens - 1) % 10000:04d}".encode()
        try:
            terminal.read_until(lambda: terminal.has(re.compile(rb"[wvc]" + last)), "the last chunk")
        except SystemExit:
            seen = terminal.first_seen()
            print(f"seen {len(seen)} numbers, the highest {max(seen, default=None)}; the terminal ends with "
                  f"{bytes(terminal.output[-600:])!r}", file=sys.stderr)
            raise
        cpu_after, wall_after = cpu_seconds(pid), time.monotonic()
        os.write(fd, b"\x11")  # Ctrl+Q
        terminal.read_until(lambda: result.exists(), "the app's end", limit=60)
        os.waitpid(pid, 0)
        pid = 0
    finally:
        if pid:  # still running: the run failed
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    streamed = json.loads(result.read_text())["streamed_at"]
    seen = terminal.first_seen()
    lags = sorted(1000 * (seen[number] - streamed[at]) for number, at in numbered_chunks(tokens).items()
                  if number in seen)

    def quantile(q: float) -> float:
        return round(lags[min(len(lags) - 1, int(q * len(lags)))], 1)

    return {"tokens": tokens, "rate": rate, "messages": messages, "seen": len(lags),
            "lag_ms": {"p50": quantile(0.5), "p90": quantile(0.9), "p99": quantile(0.99),
                       "max": round(lags[-1], 1), "mean": round(statistics.fmean(lags), 1)},
            "cpu_cores": round((cpu_after - cpu_before) / (wall_after - wall_before), 2),
            "chunks": len(streamed), "cpu_ms_per_token": round(1000 * (cpu_after - cpu_before) / len(streamed), 2),
            "load": round(os.getloadavg()[0], 1),
            "stream_s": round(streamed[-1] - streamed[0], 2), "terminal": f"{SIZE[0]}x{SIZE[1]}"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=4000)
    parser.add_argument("--rate", type=float, default=500.0)
    parser.add_argument("--messages", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--session", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        child(args.child, args.session, args.tokens, args.rate)
        return 0
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory(prefix="llamachat-stream-") as folder:
            print(json.dumps(measure(args.tokens, args.rate, args.messages, Path(folder))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
