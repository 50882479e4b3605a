"""Long chats: how long the app takes to open one and show its last message, the memory it
then holds, and how long Ctrl+Q takes, as JSON lines.

Run: ``python -m tests.bench.long_chat [--sizes 1000 5000 20000] [--table]``.
For each size a chat of that many messages (user and assistant in turn, some replies with
lists and code) is written to a fresh store; then a new process runs the real app on it,
headless (Textual's ``run_async(headless=True)``, 100×40) with the fake engine of the UI
tests, opening that chat as ``llamachat --session ID`` does. It reports:

- ``open_s``: from the app's start to the last message's text drawn on the terminal;
- ``rss_mb`` (memory held then) and ``peak_rss_mb`` (the most the process ever held);
- ``quit_s``: from Ctrl+Q to the app's end, and ``exit_s`` to the process's end (the
  store closed, the threads ended);
- ``widgets``: how many widgets the screen holds once the chat is shown.

``--table`` adds one chat of a single reply holding a 2,000-row, 200-column Markdown table.
A child that runs past ``--limit`` seconds is stopped and reported as such.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SIZE = (100, 40)
"""The terminal the app is drawn in."""
LOOK_EVERY = 0.02
"""Seconds between two looks at the terminal, in the child."""


def emit(record: dict) -> None:
    print(json.dumps(record), flush=True)


def message_text(index: int) -> str:
    """The text of message ``index``: varied, as a chat is, and ending with its number so the
    last one can be told apart on screen."""
    if index % 2 == 0:
        return f"Question {index}: how does part {index % 17} of the plan work? number {index}"
    body = [f"Here is the answer about part {index % 17}, in a few lines."]
    if index % 5 == 1:
        body += ["", *(f"- point {k}: detail of point {k} for this answer" for k in range(4))]
    if index % 7 == 3:
        body += ["", "```python", *(f"value_{k} = compute({k}, {index})" for k in range(5)), "```"]
    body += ["", f"That is all for now. number {index}"]
    return "\n".join(body)


def table_text(rows: int = 2000, columns: int = 200) -> str:
    header = "| " + " | ".join(f"c{c}" for c in range(columns)) + " |"
    rule = "|" + "---|" * columns
    lines = [header, rule] + ["| " + " | ".join(f"{r}.{c}" for c in range(columns)) + " |" for r in range(rows)]
    return "\n".join(lines) + "\n\nnumber end"


def write_chat(texts: list[str]) -> int:
    """A chat of ``texts`` (user first, then in turn) in the store of this environment; its id."""
    from sessions.store import SessionStore
    from sessions.store.records import NewMessage

    store = SessionStore.open()
    try:
        session = store.create_session(title="long chat")
        news = [NewMessage(parent=None if i == 0 else i - 1, role="user" if i % 2 == 0 else "assistant", text=text)
                for i, text in enumerate(texts)]
        ids = store.add_messages(session.id, news)
        store.set_active_leaf(session.id, ids[-1])
        return session.id
    finally:
        store.close()


def rss_mb(field: str = "VmRSS") -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return round(int(line.split()[1]) / 1024, 1)
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


async def open_and_quit(session_id: int, model: Path, last_words: str) -> dict:
    """In the child: run the app on the chat, wait for ``last_words`` on screen, then quit.

    The app runs headless without a Pilot: a Pilot waits at most 30 seconds for the screen
    to settle, and a slow open is what is measured here. The terminal is looked at every
    ``LOOK_EVERY`` seconds, whenever the app lets the loop run.
    """
    from textual import events

    from sessions.api.chat import SessionController
    from sessions.config import Config
    from sessions.sampling import SamplingSettings
    from sessions.store import SessionStore
    from tests.tui.fake_engine import FakeEngineFactory
    from tests.tui.helpers import screen_text
    from tui.app import LlamaChatApp
    from tui.startup import StartupRequest

    store = SessionStore.open()
    controller = SessionController(store, engine_factory=FakeEngineFactory(),
                                   sampling=SamplingSettings(temperature=0.0))
    app = LlamaChatApp(controller, config=Config(), startup=StartupRequest(session_id=session_id, model_path=model))
    record: dict = {}
    start = time.perf_counter()
    running = asyncio.create_task(app.run_async(headless=True, size=SIZE))

    def shown() -> bool:
        try:
            return any(last_words in line for line in screen_text(app))
        except Exception:  # no screen drawn yet
            return False

    while not shown():
        if running.done():
            raise RuntimeError("the app ended before showing the chat")
        await asyncio.sleep(LOOK_EVERY)
    record["open_s"] = round(time.perf_counter() - start, 3)
    record["rss_mb"] = rss_mb()
    record["widgets"] = sum(1 for _ in app.screen.walk_children())
    quit_at = time.perf_counter()
    record["quit_at"] = time.time()  # for the parent, which sees when the process ends
    app.post_message(events.Key("ctrl+q", None))
    await running
    record["quit_s"] = round(time.perf_counter() - quit_at, 3)
    record["peak_rss_mb"] = rss_mb("VmHWM")
    store.close()
    return record


def child(args: argparse.Namespace) -> int:
    record = asyncio.run(open_and_quit(args.session, Path(args.model), args.last_words))
    print(json.dumps(record), flush=True)
    return 0


def measure(case: str, texts: list[str], limit: float, last_words: str | None = None) -> dict:
    """Write the chat and open it in a new process; what that process measured (the chat is
    shown once ``last_words`` are drawn: by default the last line of its last message)."""
    with tempfile.TemporaryDirectory(prefix="llamachat-long-") as folder:
        root = Path(folder)
        env = {**os.environ, "LLAMACHAT_CONFIG": str(root / "config" / "config.toml"),
               "LLAMACHAT_DATA_DIR": str(root / "data"), "LLAMACHAT_CACHE_DIR": str(root / "cache"), "TZ": "UTC"}
        os.environ.update({k: env[k] for k in ("LLAMACHAT_CONFIG", "LLAMACHAT_DATA_DIR", "LLAMACHAT_CACHE_DIR")})
        session_id = write_chat(texts)
        model = root / "fake-model.gguf"
        model.write_bytes(b"GGUF fake model")
        last_words = last_words or texts[-1].splitlines()[-1]
        command = [sys.executable, "-m", "tests.bench.long_chat", "--child", "--session", str(session_id),
                   "--model", str(model), "--last-words", last_words]
        record: dict = {"case": case, "messages": len(texts), "terminal": f"{SIZE[0]}x{SIZE[1]}"}
        try:
            done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=limit)
        except subprocess.TimeoutExpired:
            return {**record, "stopped_after_s": limit}
        ended = time.time()
        if done.returncode != 0:
            return {**record, "error": done.stderr.strip().splitlines()[-1:] or done.returncode}
        measured = json.loads(done.stdout.strip().splitlines()[-1])
        measured["exit_s"] = round(ended - measured.pop("quit_at"), 3)
        return {**record, **measured}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[1000, 5000, 20000])
    parser.add_argument("--table", action="store_true", help="also one reply holding a 2,000×200 table")
    parser.add_argument("--limit", type=float, default=120.0, help="seconds a child may run")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--session", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--last-words", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args)
    for size in args.sizes:
        emit(measure(f"{size} messages", [message_text(i) for i in range(size)], args.limit))
    if args.table:
        # Only the first characters of so long a message are drawn, then a line about the rest.
        emit(measure("2000x200 table", ["show me a big table", table_text()], args.limit,
                     last_words="more characters not shown here"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
