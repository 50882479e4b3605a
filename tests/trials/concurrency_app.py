"""Concurrency trial with the real front ends: ``llamachat ask`` processes and the app,
on one session, with the database damaged and restored in the middle.

    python -m tests.trials.concurrency_app [--asks N] [--rounds N] [--app-rounds N] [--seed S]

Several ``llamachat ask --session S`` processes (a tiny real model, greedy, a few tokens
per reply) run one after another in each of ``--asks`` slots, each asking its own
numbered question, while the app runs in another process, driven through Pilot
(``app_worker``). They meet every rule at once: a send on a head another process moved
is refused and sent again, ``ask`` waits while another process writes a reply in the
session, the app refuses then and its user waits. Halfway through, the app is closed (a
user quits it), this process takes the database's lock exclusively (waiting for the
``ask`` runs inside to close it), damages the page of the oldest message and lets go;
the next opener restores the backup and carries over what was written since. Then a
second app starts and the traffic goes on.

Every message a process was told was saved (``ask`` exited 0 and printed its ids with
``--stats``; the app showed it stored) is looked up at the end: ``lost`` counts those
missing or changed; ``misplaced`` a reply not under its question, a question under a
question, a question stored twice. Both must be 0.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import selectors
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

from sessions.store import SessionStore
from tests.trials.concurrency import REPO, MessageTally, damage, prepare

LIMIT_SECONDS = 900.0
RETRYABLE = ("another llamachat has it open", "busy:", "restoring it from its backup")
"""What an ``ask`` run may meet while the database is being restored: it runs again."""


@dataclass
class AppTrialReport(MessageTally):
    asks: int
    rounds: int
    app_rounds: int
    ask_runs: int = 0

    def summary(self) -> str:
        e = self.events
        return (f"concurrency (front ends): {self.asks} ask slots x {self.rounds} rounds ({self.ask_runs} ask runs) "
                f"and the app ({self.app_rounds} rounds, closed and opened again) on one session, database damaged "
                f"after {self.damaged_after} messages and restored {self.recoveries} time(s): {self.sent} messages "
                f"sent, {self.stored} stored, {self.lost} lost, {self.misplaced} misplaced; {e['waited']} ask waits "
                f"for another reply, {e['queued']} app sends refused while another reply was written, "
                f"{e['conflict']} app sends refused on a changed chat, {e['retried']} ask runs repeated during the "
                f"restore; {len(self.failures)} failures ({self.seconds:.1f} s)"
                + "".join(f"\n  {failure}" for failure in self.failures[:5]))


class _Trial:
    def __init__(self, workdir: Path, asks: int, rounds: int, app_rounds: int, seed: int) -> None:
        self.workdir = workdir
        self.rng = random.Random(seed)
        self.report = AppTrialReport(asks, rounds, app_rounds)
        self.env = dict(os.environ, LLAMACHAT_DATA_DIR=str(workdir / "data"),
                        LLAMACHAT_CACHE_DIR=str(workdir / "cache"), LLAMACHAT_CONFIG=str(workdir / "config.toml"))
        self.db = workdir / "data" / "sessions.sqlite3"
        self.fake_model = workdir / "fake-model.gguf"
        self.fake_model.write_bytes(b"GGUF stand-in for the fake engine")
        self.sent: dict[int, dict] = {}
        self.selector = selectors.DefaultSelector()
        self.asks_left = {slot: rounds for slot in range(asks)}
        self.app: subprocess.Popen | None = None
        self.app_done = 0
        self.apps_started = 0

    def run(self) -> AppTrialReport:
        from sessions.synth import make_model

        t0 = time.monotonic()
        self.model = str(make_model("llama", "tiny"))
        self.session_id = prepare(self.db)
        try:
            for slot in self.asks_left:
                self._start_ask(slot, 0)
            self._start_app(self.report.app_rounds // 2)
            self._follow(t0 + LIMIT_SECONDS)
        finally:
            for key in list(self.selector.get_map().values()):
                process = key.data[1]
                if process.poll() is None:
                    process.kill()
                process.wait()
        self._check()
        self.report.seconds = time.monotonic() - t0
        return self.report

    # -- the processes -------------------------------------------------------------------

    def _start_ask(self, slot: int, round_: int) -> None:
        text = f"ask {slot} round {round_} question"
        process = subprocess.Popen(
            [sys.executable, "-m", "sessions.cli", "ask", "-m", self.model, "--session", str(self.session_id),
             "--temp", "0", "--max-tokens", "4", "--stats", text],
            cwd=REPO, env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.report.ask_runs += 1
        self.selector.register(process.stderr, selectors.EVENT_READ, ("ask", process, slot, round_, text, []))

    def _start_app(self, rounds: int) -> None:
        self.apps_started += 1
        self.app_idle = False
        self.app = subprocess.Popen(
            [sys.executable, "-m", "tests.trials.app_worker", str(self.session_id), f"app {self.apps_started}",
             str(rounds), str(self.fake_model)],
            cwd=REPO, env=self.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.app_buffer = b""
        self.selector.register(self.app.stdout, selectors.EVENT_READ, ("app", self.app))

    def _follow(self, deadline: float) -> None:
        while self.selector.get_map():
            if time.monotonic() > deadline:
                self.report.failures.append("the processes did not finish in time")
                return
            for key, _ in self.selector.select(timeout=5):
                if key.data[0] == "ask":
                    self._ask_output(key)
                else:
                    self._app_output(key)
            self._maybe_damage()

    def _ask_output(self, key) -> None:
        _, process, slot, round_, text, lines = key.data
        chunk = os.read(key.fileobj.fileno(), 65536)
        if chunk:
            if b"waiting: another llamachat" in chunk:
                self.report.events["waited"] += 1
            lines.append(chunk.decode(errors="replace"))
            return
        self.selector.unregister(key.fileobj)
        key.fileobj.close()
        lines[:] = "".join(lines).splitlines()
        status = process.wait()
        if status == 0:
            stats = json.loads(lines[-1])
            self._sent(stats["parent"], None, "user", text)
            self._sent(stats["message"], stats["parent"], "assistant", None)
            round_ += 1
        elif any(words in line for line in lines for words in RETRYABLE):
            self.report.events["retried"] += 1
        else:
            self.report.failures.append(f"ask {slot} round {round_} exited {status}: {' | '.join(lines)}")
            return
        if round_ < self.report.rounds:
            self._start_ask(slot, round_)

    def _app_output(self, key) -> None:
        """Whatever the app wrote: whole lines are events (a pipe read, never a buffered
        readline, so no line waits unseen in a buffer while ``select`` sees nothing)."""
        process = key.data[1]
        chunk = os.read(key.fileobj.fileno(), 65536)
        if not chunk:
            self.selector.unregister(key.fileobj)
            if self.app is process:
                self.app = None
            if process.wait() != 0:
                self.report.failures.append(f"the app exited with status {process.returncode}")
            return
        self.app_buffer += chunk
        *lines, self.app_buffer = self.app_buffer.split(b"\n")
        for line in lines:
            self._app_event(line.decode())

    def _app_event(self, line: str) -> None:
        event = json.loads(line)
        self.report.events[event["event"]] += 1
        if event["event"] == "sent":
            self._sent(event["id"], event["parent"], event["role"], event["text"])
            if event["role"] == "assistant":
                self.app_done += 1
        elif event["event"] == "idle":
            self.app_idle = True
        elif event["event"] == "recovered":
            self.report.recoveries += 1
        elif event["event"] == "stuck":
            self.report.failures.append(line.strip())

    def _sent(self, message_id: int, parent: int | None, role: str, text: str | None) -> None:
        self.sent[message_id] = {"parent": parent, "role": role, "text": text}

    def _maybe_damage(self) -> None:
        """Halfway through the asks: the first app closed, the database damaged, a second
        app started; once everything is done, the last app closed."""
        report = self.report
        asked = sum(1 for sent in self.sent.values() if sent["role"] == "user" and sent["text"].startswith("ask "))
        if not report.damaged_after and asked >= report.asks * report.rounds // 2:
            self._close_app()
            damage(self.db, self.rng)
            report.damaged_after = len(self.sent)
            self._start_app(report.app_rounds - report.app_rounds // 2)
        elif report.damaged_after and self.app_idle and \
                not any(key.data[0] == "ask" for key in self.selector.get_map().values()):
            self._close_app()

    def _close_app(self) -> None:
        """Quit the app (a line on its stdin) and read what it says until it has closed."""
        app = self.app
        if app is None:
            return
        assert app.stdin is not None and app.stdout is not None
        try:
            app.stdin.write(b"quit\n")
            app.stdin.flush()
        except BrokenPipeError:  # it ended already (a failure it reported)
            pass
        key = self.selector.get_key(app.stdout)
        while self.app is app:
            self._app_output(key)

    # -- the check -----------------------------------------------------------------------

    def _check(self) -> None:
        report = self.report
        report.recoveries = len(list(self.db.parent.glob(self.db.name + ".corrupt-*")))
        with SessionStore.open(self.db) as store:
            tree = store.load_tree(self.session_id)
        questions = Counter(m.text for m in [tree.get(i) for i in self._ids(tree)] if m.role == "user")
        report.sent = len(self.sent)
        for message_id, sent in self.sent.items():
            if message_id not in tree or (sent["text"] is not None and tree.get(message_id).text != sent["text"]):
                report.lost += 1
                continue
            report.stored += 1
            message = tree.get(message_id)
            parent = tree.get(message.parent_id) if message.parent_id is not None else None
            wrong_parent = sent["parent"] is not None and message.parent_id != sent["parent"]
            nested = message.role == "user" and parent is not None and parent.role == "user"
            twice = message.role == "user" and questions[message.text] > 1
            if wrong_parent or nested or twice or message.role != sent["role"]:
                report.misplaced += 1

    @staticmethod
    def _ids(tree) -> list[int]:
        return [m.id for root in tree.roots() for m in [root, *tree.descendants(root.id)]]


def run_app_trial(workdir: Path, *, asks: int = 3, rounds: int = 4, app_rounds: int = 4,
                  seed: int = 1) -> AppTrialReport:
    return _Trial(workdir, asks, rounds, app_rounds, seed).run()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.trials.concurrency_app",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--asks", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--app-rounds", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="llamachat-concurrency-app-"))
    try:
        report = run_app_trial(work, asks=args.asks, rounds=args.rounds, app_rounds=args.app_rounds, seed=args.seed)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps({**asdict(report), "events": dict(report.events)}) if args.json else report.summary())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
