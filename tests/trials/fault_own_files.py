"""The fault trial's rounds on llamachat's own files: an undo that a recovery must keep, a
nearly full data disk, and a FIFO in place of each file llamachat reads.

- ``undo-recovery``: a question and its reply are deleted (as F8 does), another process
  opens the database while the backup is due (so the backup records the deletion), the
  deletion is undone, then a page is damaged and ``llamachat sessions`` recovers: the
  recovery must bring back what the undo had (``FileRounds.recover`` checks every row).
- ``full-data-disk``: a chat on a small file system of its own, left with a few dozen KB
  free; a long question, then another: each is stored with its tokens or not at all, the
  error names what was kept, and no message holds both questions.
- ``fifo-own-files``: a FIFO where llamachat reads one of its files (the recovery notice,
  the ``-wal`` or ``-shm`` beside the database, the list of recent downloads, the list of
  probed models, ``config.toml`` for ``llamachat config``, a Hugging Face cache's
  ``refs/main`` or snapshot file read offline): the process must end before the deadline,
  going on without the file or saying in one sentence that it cannot.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from sessions.store import SessionStore, backup

from .fault_files import rows, run_briefly

if TYPE_CHECKING:
    from .faults import FaultTrials

QUESTION = "the long question of a full disk round " + "word " * 390
OTHER = "another question, asked after the first " * 8
FREE_KB = (48, 64, 80, 96, 112, 128, 160, 192)
"""Free space left on the small disk: the sizes where a question used to lose its tokens."""
COMMIT = "0123456789abcdef0123456789abcdef01234567"


class OwnFileRounds:
    def __init__(self, trial: FaultTrials, workdir: Path, recover: Callable[[str], None]) -> None:
        self.trial = trial
        self.workdir = workdir
        self.recover = recover

    # -- an undo, then a recovery ---------------------------------------------------------

    def undo_recovery(self, name: str) -> None:
        trial, db = self.trial, self.trial.db
        session = trial.rng.choice(sorted(trial.sessions.values()))
        head = trial.heads.heads.get(session)
        reply = trial.heads.messages.get(head) if head is not None else None
        if reply is None or reply.parent_id is None:
            trial.fail(name, f"session {session} has no reply at its head to delete")
            return
        question = reply.parent_id
        with SessionStore.open(db) as app:
            deleted = app.delete_subtree_kept(question, expected_ids={question, head})
            _age_backup(db)
            status, _out, err = run_briefly(["-m", "sessions.cli", "sessions"], trial.env)  # while it is due
            if status != 0 or question in rows(backup.backup_path(db)):
                trial.fail(name, f"the backup was not taken with the deletion in it (status {status}): {err[-300:]}")
            app.put_back(deleted)
        self.recover(name)

    # -- a nearly full data disk ----------------------------------------------------------

    def full_data_disk(self, name: str) -> None:
        trial = self.trial
        folder = self.workdir / "small-disk"
        folder.mkdir(exist_ok=True)
        if not _mount(folder):
            trial.report.skipped[name] += 1  # a file system of its own needs mount (root)
            return
        try:
            self._on_small_disk(name, folder)
        finally:
            subprocess.run(["umount", "-l", str(folder)], capture_output=True, timeout=60)

    def _on_small_disk(self, name: str, folder: Path) -> None:
        trial = self.trial
        env = dict(trial.env, LLAMACHAT_DATA_DIR=str(folder / "data"))
        model = trial.models[trial.rng.choice(sorted(trial.models))]
        ask = ["-m", "sessions.cli", "ask", "-m", model, "--temp", "0", "--max-tokens", "5"]
        status, _out, err = run_briefly([*ask, "hello"], env)
        if status != 0:
            trial.fail(name, f"the first ask on the small disk failed (status {status}): {err[-300:]}")
            return
        db = folder / "data" / "sessions.sqlite3"
        free = trial.rng.choice(FREE_KB) * 1024
        filler = folder / "filler"
        info = os.statvfs(folder)
        filler.write_bytes(b"\0" * max(info.f_bavail * info.f_frsize - free, 0))
        try:
            for text in (QUESTION, OTHER):
                before = _stored(db)
                status, _out, err = run_briefly([*ask, "--session", "1", text], env)
                self._check_full(name, before, _stored(db), status, err)
        finally:
            filler.unlink()
        if any(QUESTION.strip() in t and OTHER.strip() in t for t, _ in _stored(db).values()):
            trial.report.misplaced += 1
            trial.fail(name, "a retry merged two questions into one message")

    def _check_full(self, name: str, before: dict[int, tuple[str, bool]], after: dict[int, tuple[str, bool]],
                    status: int | None, err: str) -> None:
        trial = self.trial
        new = {mid: row for mid, row in after.items() if mid not in before}
        if status is None or "Traceback" in err:
            trial.fail(name, f"an ask on a full disk hung or failed badly: {err[-300:]}")
            return
        if any(not has_tokens for _text, has_tokens in after.values()):
            trial.report.lost += 1
            trial.fail(name, "a message was stored without its tokens")
        trial.report.full_disk[("stored" if new else "refused")] += 1
        if status == 0:
            return
        said = [line for line in err.splitlines() if line.startswith("llamachat: error: ")]
        if len(said) != 1:
            trial.fail(name, f"status {status} without one sentence: {err[-300:]}")
        elif "nothing was saved" in said[0] and new:
            trial.report.lost += 1
            trial.fail(name, f"told that nothing was saved, yet {sorted(new)} were: {said[0]}")
        elif "nothing was saved" not in said[0] and not any(f"(message {mid})" in said[0] for mid in new):
            trial.fail(name, f"a question was stored, and the error does not name it: {said[0]}")

    # -- FIFOs where llamachat reads its own files ----------------------------------------

    def fifo_own_files(self, name: str) -> None:
        trial = self.trial
        cases = {"recovery-notice": self._notice, "database-wal": self._beside_database,
                 "recent-downloads": self._recent_downloads, "probed-models": self._probed_models,
                 "config-shown": self._config_shown, "hub-ref": self._hub_cache, "hub-snapshot": self._hub_cache}
        case = trial.rng.choice(sorted(cases))
        trial.report.fifos[case] += 1
        cases[case](f"{name} {case}", case)
        trial.refresh(name)

    def _fifo(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        if os.path.lexists(path):
            path.unlink()
        os.mkfifo(path)
        return path

    def _ended(self, where: str, argv: list[str], env: dict[str, str] | None = None) -> tuple[int, str, str] | None:
        status, out, err = run_briefly(argv, env or self.trial.env)
        if status is None:
            self.trial.fail(where, f"`{' '.join(argv[2:4])}` waited on the FIFO until the deadline")
            return None
        if "Traceback" in err:
            self.trial.fail(where, f"a traceback: {err[-300:]}")
        return status, out, err

    def _notice(self, where: str, _case: str) -> None:
        db = self.trial.db
        fifo = self._fifo(db.with_name(db.name + backup.NOTICE_SUFFIX))
        try:
            done = self._ended(where, ["-m", "sessions.cli", "sessions"])
            if done is not None and done[0] != 0:
                self.trial.fail(where, f"a FIFO recovery notice stopped `sessions` (status {done[0]}): {done[2]}")
        finally:
            fifo.unlink()

    def _beside_database(self, where: str, _case: str) -> None:
        db = self.trial.db
        fifo = self._fifo(db.with_name(db.name + self.trial.rng.choice(("-wal", "-shm"))))
        try:
            done = self._ended(where, ["-m", "sessions.cli", "sessions"])
            if done is not None and not (done[0] == 1 and done[2].count("\n") == 1
                                         and f"{fifo} beside it is not a regular file" in done[2]):
                self.trial.fail(where, f"a FIFO beside the database gave status {done[0]}: {done[2][-300:]}")
        finally:
            fifo.unlink()

    def _recent_downloads(self, where: str, _case: str) -> None:
        fifo = self._fifo(self.trial.db.with_name("recent_downloads.json"))
        code = ("from sessions.controller.model_catalogue import ModelCatalogue\n"
                "print(len(ModelCatalogue().remembered()))")
        try:
            done = self._ended(where, ["-c", code])  # what the app's model picker lists first
            if done is not None and (done[0] != 0 or done[1].strip() != "0"):
                self.trial.fail(where, f"the model picker's list on a FIFO: status {done[0]}: {done[2][-300:]}")
        finally:
            fifo.unlink()

    def _probed_models(self, where: str, _case: str) -> None:
        foreign = self.workdir / "foreign" / "model.gguf"  # not made by llamachat: probed before its load
        if not foreign.exists():
            foreign.parent.mkdir(exist_ok=True)
            shutil.copyfile(self.trial.models[sorted(self.trial.models)[0]], foreign)
        fifo = self._fifo(self.trial.cache / "probed-models.json")
        try:
            done = self._ended(where, ["-m", "sessions.cli", "ask", "-m", str(foreign), "--max-tokens", "3",
                                       "--temp", "0", f"round {self.trial.round}: a FIFO of probed models"])
            if done is not None and done[0] != 0:
                self.trial.fail(where, f"an ask with a FIFO list of probed models: status {done[0]}: {done[2][-300:]}")
        finally:
            if fifo.exists() and not fifo.is_file():
                fifo.unlink()

    def _config_shown(self, where: str, _case: str) -> None:
        config = self.trial.config
        text = config.read_text()
        self._fifo(config)
        try:
            done = self._ended(where, ["-m", "sessions.cli", "config"])
            if done is not None and not (done[0] == 1 and f"could not read the config file {config}: not a "
                                         "regular file" in done[2]):
                self.trial.fail(where, f"`llamachat config` on a FIFO: status {done[0]}: {done[2][-300:]}")
        finally:
            config.unlink()
            config.write_text(text)

    def _hub_cache(self, where: str, case: str) -> None:
        home = self.workdir / "hf-home"
        folder = home / "hub" / "models--org--tiny-GGUF"
        shutil.rmtree(folder, ignore_errors=True)
        if case == "hub-ref":
            self._fifo(folder / "refs" / "main")
        else:
            (folder / "refs").mkdir(parents=True)
            (folder / "refs" / "main").write_text(COMMIT)
            self._fifo(folder / "snapshots" / COMMIT / "tiny-Q4_K_M.gguf")
        env = dict(self.trial.env, HF_HOME=str(home), HF_ENDPOINT="http://127.0.0.1:9")  # the Hub out of reach
        done = self._ended(where, ["-m", "sessions.cli", "pull", "org/tiny-GGUF"], env)
        if done is not None and not (done[0] == 1 and done[2].startswith("llamachat: error: could not reach")):
            self.trial.fail(where, f"`pull` offline with a FIFO in the cache: status {done[0]}: {done[2][-300:]}")
        done = self._ended(where, ["-m", "sessions.cli", "models"], env)
        if done is not None and done[0] != 0:
            self.trial.fail(where, f"`models` with a FIFO in the cache: status {done[0]}: {done[2][-300:]}")
        shutil.rmtree(folder, ignore_errors=True)


def _age_backup(db: Path) -> None:
    """The backup says it was made a backup period ago: the next open writes it again."""
    conn = sqlite3.connect(backup.backup_path(db))
    try:
        with conn:
            conn.execute(f"UPDATE {backup.BACKUP_TABLE} SET made_at = ?",
                         (time.time() - backup.BACKUP_EVERY_SECONDS - 60,))
    finally:
        conn.close()


def _stored(db: Path) -> dict[int, tuple[str, bool]]:
    """Each message's text and whether it has tokens, read without writing (the disk is full)."""
    conn = sqlite3.connect(db.resolve().as_uri() + "?mode=ro", uri=True)
    try:
        tokens = {row[0] for row in conn.execute("SELECT message_id FROM message_tokens")}
        return {mid: (text, mid in tokens) for mid, text in conn.execute("SELECT id, text FROM messages")}
    finally:
        conn.close()


def _mount(folder: Path) -> bool:
    if os.geteuid() != 0:
        return False
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m,mode=0700", "tmpfs", str(folder)],
                              capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0
