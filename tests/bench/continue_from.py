""""Continue from here" in the middle of a long reply, against re-processing, as JSON lines.

Run: ``python -m tests.bench.continue_from [--arch llama gemma3 lfm2 mamba] [--size bench]``.
For each model (bench-size made models by default, gemma3's window at 512 tokens) it
builds a chat of ``--turns`` turns in one prefill, generates a reply of ``--reply``
tokens after it (greedy), and cuts that reply in the middle, as Alt+G or
``llamachat ask --continue MSG --from CHARS`` does. Then it makes the cut branch live:

- ``same objects``: in the engine that wrote the reply (the cut right after it);
- ``reopened``: in new objects on a copy of the checkpoint files as the reply left them,
  RAM empty (a new process), the way the app takes (``whole_reply_first``);
- ``from scratch``: in a fresh context with no checkpoints, as a front end that
  re-processes the prompt does.

Each record gives the tokens evaluated and restored, the seconds, and the time inside
``llama_decode``; the summary gives each route's speed-up over re-processing. What a kind
must evaluate (``tests/engine/test_exactness.py`` holds it on tiny models): attention cells
are cut at the token (the last kept one is decoded again, for its logits; after a reopen
once the whole reply is restored); a sliding window too while the ring still holds the
window before the cut, else from the nearest window snapshot; a recurrent or hybrid state
from the nearest snapshot before the cut (one every ``restart_spacing`` tokens inside a
reply).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from tests.bench.warm_ahead import chat, flat


def emit(record: dict) -> None:
    print(json.dumps(record), flush=True)


def route(result, seconds: float | None = None) -> dict:
    return {"tokens_evaluated": result.tokens_evaluated, "tokens_restored": result.tokens_restored,
            "seconds": round(result.seconds if seconds is None else seconds, 4),
            "decode_seconds": round(result.decode_seconds, 4)}


def run(arch: str, size: str, turns: int, reply_tokens: int, threads: int, root: Path) -> dict:
    from sessions.checkpoints import CheckpointStore
    from sessions.controller.branch_tokens import BranchTokens
    from sessions.controller.continuation import whole_reply_first
    from sessions.engine.chat_engine import LlamaChatEngine
    from sessions.llama.context import ContextParams
    from sessions.sampling import SamplingSettings
    from sessions.synth import make_model

    path = make_model(arch, size, swa_window=512)
    params = ContextParams(n_ctx=8192, n_batch=512, n_threads=threads)
    folder, reopen_folder = root / arch, root / f"{arch}-reopened"

    def store(where: Path) -> CheckpointStore:
        return CheckpointStore(where, ram_bytes=4 << 30, disk_bytes=50 << 30)

    with store(folder) as first:
        engine = LlamaChatEngine(path, params, checkpoints=first)
        messages = chat(engine, turns)[0]
        prompt = engine.prepare(*flat(messages), reply_follows=True)
        reply = engine.generate(prompt.logits, SamplingSettings(temperature=0.0), max_tokens=reply_tokens).tokens
        engine.save_checkpoints()  # as the controller does once the reply is stored
        first.flush()
        # The files as the reply left them, for the reopen: the cut below saves its own tip.
        shutil.copytree(folder, reopen_folder)
        cut = len(reply) // 2
        stepped = [False] * len(messages) + [True]
        whole = BranchTokens(*flat([*messages, reply]), stepped)
        branch = BranchTokens(*flat([*messages, reply[:cut]]), stepped)
        same = engine.prepare(branch.tokens, branch.ends, branch.stepped)
        engine.close()
    with store(reopen_folder) as second:
        # As the app does it (``SessionController.continue_from``): the whole reply first
        # where that is cheaper, then the cut.
        engine = LlamaChatEngine(path, params, checkpoints=second)
        t0 = time.perf_counter()
        first_part = whole_reply_first(engine, whole, branch)
        reopened = engine.prepare(branch.tokens, branch.ends, branch.stepped)
        reopened_seconds = time.perf_counter() - t0
        engine.close()
    engine = LlamaChatEngine(path, params, checkpoints=None)
    scratch = engine.prepare(branch.tokens, branch.ends)  # in batches, as a front end re-processes a prompt
    engine.close()
    reopened_route = route(reopened, reopened_seconds)
    if first_part is not None:
        reopened_route.update(whole_reply_restored_first=first_part.tokens_restored,
                              tokens_restored=first_part.tokens_restored + reopened.tokens_restored,
                              decode_seconds=round(first_part.decode_seconds + reopened.decode_seconds, 4))
    record = {
        "arch": arch, "event": "continue from the middle of a reply", "prompt_tokens": len(flat(messages)[0]),
        "reply_tokens": len(reply), "cut_at": cut, "same_objects": route(same), "reopened": reopened_route,
        "from_scratch": route(scratch),
        "speedup_same_objects": round(scratch.seconds / max(same.seconds, 1e-9), 1),
        "speedup_reopened": round(scratch.seconds / max(reopened_seconds, 1e-9), 1),
    }
    emit(record)
    return record


def main(argv: list[str] | None = None) -> int:
    from sessions.synth import SIZES

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", nargs="+", default=["llama", "gemma3", "lfm2", "mamba"],
                        choices=["llama", "gemma3", "lfm2", "mamba"])
    parser.add_argument("--size", choices=SIZES, default="bench")
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--reply", type=int, default=400, help="tokens of the reply cut in its middle")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="continue-from-") as root:
        for arch in args.arch:
            run(arch, args.size, args.turns, args.reply, args.threads, Path(root))
    emit({"event": "done", "seconds": round(time.perf_counter() - t0, 1)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
