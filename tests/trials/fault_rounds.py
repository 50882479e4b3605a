"""The fault trial's rounds on files: clock jumps for the backup, FIFOs where files are read.

Each round asks through the trial (``FaultTrials.ask``), so every reply in them is
checked as in any other round; what is checked here is the backup, the recovery and
what a FIFO did to the process.
"""

from __future__ import annotations

import os
import random
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING

from sessions.store import SessionStore
from sessions.store.backup import backup_made, backup_path

from .crash_checks import Heads
from .fault_files import (
    HOUR,
    YEAR,
    checkpoint_files,
    clock_at,
    damage_page_of,
    lie_about_mtime,
    placeable,
    readable_rows,
    rows,
    run_briefly,
    state,
    theme_problems,
    write_backup_at,
)
from .fault_own_files import OwnFileRounds

if TYPE_CHECKING:
    from .faults import FaultTrials

NOT_REGULAR = "not a regular file"
LOST_SAID = re.compile(r"(\d+) message\(s\) (?:written|brought back by an undo) after the backup could not be "
                       r"recovered")


class FileRounds:
    """The rounds of the classes ``clock-*`` and ``fifo-*``, on the trial's folders."""

    def __init__(self, trial: FaultTrials, workdir: Path) -> None:
        self.trial = trial
        self.scratch = workdir / "damaged-copy.sqlite3"
        self.own = OwnFileRounds(trial, workdir, lambda name: self.recover(name, trial.rng))

    def run(self, name: str) -> None:
        if name.startswith("clock-"):
            self.clock(name)
        elif hasattr(self.own, name.replace("-", "_")):
            getattr(self.own, name.replace("-", "_"))(name)
        else:
            getattr(self, name.replace("-", "_"))(name)

    # -- clock jumps ----------------------------------------------------------------------

    def clock(self, name: str) -> None:
        """A backup whose stamp is ahead of the clock, and an mtime that lies; the next due
        backup must hold the newest session, and a recovery must bring back every row."""
        trial, rng, db = self.trial, self.trial.rng, self.trial.db
        now = time.time()
        stamp = now + rng.uniform(HOUR, 10 * YEAR) if name == "clock-future-stamp" else now
        write_backup_at(db, stamp)
        lie_about_mtime(backup_path(db), rng)
        arch = rng.choice(list(trial.models))
        if trial.ask(name, arch, None, None) is None:
            return
        set_back = now - rng.uniform(HOUR, YEAR) if name == "clock-set-back" else None
        with clock_at(set_back):  # the next open: the clock still wrong, or right again
            SessionStore.open(db).close()
        made = backup_made(backup_path(db))
        if made is None or made[1] != state(db) or rows(backup_path(db)) != rows(db):
            trial.fail(name, "after the next due backup, the backup does not hold the newest session")
        elif made[0] > time.time() or (set_back is not None and made[0] != set_back):
            trial.fail(name, f"the new backup says it was made at {made[0]}, not by the clock of its open")
        trial.ask_in_turn(name, arch, None)  # a reply the backup does not hold
        self.recover(name, rng)

    def recover(self, name: str, rng: random.Random) -> None:
        """Damage a page where the oldest message's text appears (its row or its session's
        title); ``llamachat sessions`` recovers. Every row the backup held must
        come back as it holds it, every newer row that can be placed as the damaged file
        reads it, and the notice must count exactly the newer ones that could not."""
        trial, db = self.trial, self.trial.db
        held = rows(backup_path(db))
        before = rows(db)
        damage_page_of(db, before[min(before)][3], rng)
        readable, sessions = readable_rows(db, before, self.scratch)
        usable = placeable(readable, sessions, held)
        status, _, err = run_briefly(["-m", "sessions.cli", "sessions"], trial.env)
        if status != 0 or "could not be used" not in err:
            trial.fail(name, f"no recovery said after the damage (status {status}): {err[-300:]}")
        trial.report.recoveries += 1
        after = rows(db)
        for mid, row in {**usable, **held}.items():
            if mid not in after or after[mid][2:] != row[2:]:
                trial.report.lost += 1
                trial.fail(name, f"message {mid}, in the backup or readable, is {after.get(mid)} after recovery")
            elif after[mid] != row:
                trial.report.misplaced += 1
                trial.fail(name, f"message {mid} is {after[mid]} after recovery, was {row}")
        if usable and max(usable) not in after:
            trial.fail(name, "the recovery chose a backup older than the newest readable row")
        taken = sum(1 for mid in before if mid not in held and mid not in after)
        said = sum(int(count) for count in LOST_SAID.findall(err))  # newer ones, and ones an undo brought back
        if taken and said != taken:
            trial.fail(name, f"{taken} newer messages the damage took, not said as such: {err[-300:]}")
        trial.report.taken_by_damage += taken
        trial.heads = Heads({}, {})  # what the damage took is not a loss of ours
        trial.refresh(name)
        for arch, session in trial.sessions.items():
            if session not in trial.heads.heads:  # its row was on the damaged page
                trial.start_anew(arch)

    # -- FIFOs ----------------------------------------------------------------------------

    def fifo_config(self, name: str) -> None:
        trial = self.trial
        config = trial.config
        text = config.read_text()
        config.unlink()
        os.mkfifo(config)
        try:
            trial.ask_in_turn(name, trial.rng.choice(list(trial.models)), None, warning=NOT_REGULAR)
        finally:
            config.unlink()
            config.write_text(text)

    def fifo_theme(self, name: str) -> None:
        trial = self.trial
        themes = trial.config.parent / "themes"
        themes.mkdir(exist_ok=True)
        fifo = themes / f"round-{trial.round}.toml"
        os.mkfifo(fifo)
        try:
            status, problems, err = theme_problems(trial.env)
        finally:
            fifo.unlink()
        if status is None:
            trial.fail(name, "loading the themes hung on a FIFO")
        elif status != 0 or len(problems) != 1 or str(fifo) not in problems[0] or NOT_REGULAR not in problems[0]:
            trial.fail(name, f"a FIFO theme gave status {status} and {problems}: {err[-300:]}")
        trial.refresh(name)

    def fifo_checkpoint(self, name: str) -> None:
        trial = self.trial
        files = checkpoint_files(trial.cache)
        chosen = trial.rng.sample(files, min(len(files), trial.rng.randint(1, 4)))
        for path in chosen:
            path.unlink()
            os.mkfifo(path)
        try:
            trial.ask_in_turn(name, trial.rng.choice(list(trial.models)), None, warning=NOT_REGULAR,
                              warnings=range(len(chosen) + 1))
            if not all(path.exists() for path in chosen):
                trial.fail(name, "a FIFO named like a checkpoint was deleted (it is not llamachat's)")
        finally:
            for path in chosen:
                path.unlink(missing_ok=True)
