"""How well the switch-cost estimate shown before a switch predicts what the switch takes.

Run: ``python -m tests.bench.switch_estimate [--arch gemma3] [--threads 1] [--turns 5]``.
It builds a chat of generated replies on a bench-size made model (about 100M parameters),
then makes branch switches of every kind: back to a branch held in RAM, after an edit, in a
reopened session (disk), and the same switches with no checkpoints at all (everything,
generated replies included, evaluated again). For each it prints, as one JSON line, the
estimate ``plan_for`` gave before the switch and the seconds the switch then took.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.bench.workload import w1_texts


@contextmanager
def controller(path: Path, root: Path, threads: int, checkpoints: bool) -> Iterator:
    """A controller with the model loaded over the sessions and checkpoints in ``root``;
    everything is closed on the way out, as a quitting app closes it."""
    from sessions.api.chat import EngineSettings, SessionController
    from sessions.checkpoints import CheckpointStore
    from sessions.engine.factory import llama_engine_factory
    from sessions.sampling import SamplingSettings
    from sessions.store import SessionStore

    store = SessionStore.open(root / "sessions.sqlite3")
    ck = CheckpointStore(root / "checkpoints", ram_bytes=8 << 30, disk_bytes=50 << 30) if checkpoints else None
    ctl = SessionController(store, engine_factory=llama_engine_factory(ck),
                            settings=EngineSettings(n_ctx=8192, n_batch=512, threads=threads),
                            sampling=SamplingSettings(temperature=0.0, max_tokens=96))
    try:
        ctl.load_model(path)
        yield ctl
    finally:
        ctl.close()
        if ck is not None:
            ck.close()
        store.close()


RECORDS: list[dict] = []
"""Every switch measured in this run (``--record`` writes them for the test that replays them)."""


def switch(ctl, label: str, leaf_id: int, **extra) -> dict:
    from dataclasses import asdict

    from sessions.controller.branch_tokens import branch_tokens

    plan = ctl.routes.plan_for(leaf_id)
    tokens, ends, stepped = branch_tokens(ctl._store, ctl.engine, ctl.snapshot().tree.path_to(leaf_id))
    route = ctl.engine.branches.plan(tokens, ends, need_logits=False, stepped=stepped)  # the parts it restores
    done = ctl.warm(leaf_id)
    record = {"event": label, "restored": done.tokens_restored, "evaluated": done.tokens_evaluated,
              "estimate_s": round(plan.estimate_seconds, 3), "actual_s": round(done.seconds, 3),
              "actual_over_estimate": round(done.seconds / plan.estimate_seconds, 2) if plan.estimate_seconds else None,
              **extra}
    print(json.dumps(record), flush=True)
    # What the estimate was made from, for ``tests/controller/test_switch_estimate.py`` to price again.
    RECORDS.append({**record, "ends": ends, "stepped": stepped,
                    "evaluate_from": plan.evaluate_from, "target_len": plan.target_len,
                    "restore": [asdict(part) for part in route.restore],
                    "snapshot": asdict(route.snapshot) if route.snapshot else None,
                    "rewind": asdict(route.rewind) if route.rewind else None,
                    "cost": asdict(plan.rates)})
    return record


def run(path: Path, threads: int, turns: int) -> None:
    with tempfile.TemporaryDirectory(prefix="llamachat-switch-") as folder:
        root = Path(folder)
        with controller(path, root, threads, checkpoints=True) as ctl:
            texts = w1_texts(ctl.engine.tokenize)
            ctl.new_session(system_prompt=texts["system"])
            users = []
            for user in texts["users"][:turns]:
                users.append(ctl.send(user))
                ctl.generate_reply()
            leaf = ctl.snapshot().head
            session = ctl.session_id
            edited = ctl.edit(users[1].id, texts["edits"][2])
            switch(ctl, "after an edit of turn 2 (restore the prefix, evaluate the new message)", edited.id)
            edit_reply = ctl.generate_reply()
            switch(ctl, "back to the first branch (restore from RAM)", leaf.id)
            switch(ctl, "to the edit again (restore from RAM)", edit_reply.id)

        with controller(path, root, threads, checkpoints=True) as ctl:
            ctl.open_session(session)
            switch(ctl, "reopened: the first branch (restore from disk)", leaf.id)
            switch(ctl, "reopened: the edit (restore from disk)", edit_reply.id)

        with controller(path, root, threads, checkpoints=False) as ctl:
            ctl.open_session(session)
            switch(ctl, "no checkpoints: the first branch (all evaluated, replies token by token)", leaf.id)
            switch(ctl, "no checkpoints: the edit", edit_reply.id)
            switch(ctl, "no checkpoints: back to the first branch", leaf.id)


def main(argv: list[str] | None = None) -> int:
    from sessions.synth import make_model

    parser = argparse.ArgumentParser(prog="python -m tests.bench.switch_estimate")
    parser.add_argument("--arch", default="gemma3", choices=["llama", "gemma3", "lfm2", "mamba"])
    parser.add_argument("--model", type=Path, help="any GGUF instead of a made model")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--record", type=Path, help="add this run's switches, with what their estimates were "
                        "made from, to this JSON file (under the model's name)")
    args = parser.parse_args(argv)
    path = args.model or make_model(args.arch, "bench", swa_window=512)
    run(path, args.threads, args.turns)
    if args.record:
        recorded = json.loads(args.record.read_text()) if args.record.exists() else {}
        recorded[args.model.name if args.model else f"{args.arch} (bench size)"] = RECORDS
        args.record.write_text(json.dumps(recorded, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
