"""The disk budget holds for the folder, across processes writing into it at once.

Four real processes each write checkpoints into one folder, all at once, each under the
same budget: every write decides from the folder's real total under the folder's lock,
so together they end within the budget (each one's own index alone would let them end
at four times it).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

from sessions.checkpoints.listing import list_files

from .test_checkpoint_store import COMPAT

BUDGET = 256 << 10
SEGMENT = 16 << 10
WRITERS = 4
EACH = 24  # segments a writer writes: together six times the budget


def test_four_processes_writing_at_once_end_within_the_budget(tmp_path):
    folder = tmp_path / "ck"
    script = textwrap.dedent(f"""
        import sys
        from sessions.checkpoints import CheckpointStore, Segment, StateCompat, prefix_hash
        writer = int(sys.argv[1])
        compat = StateCompat({COMPAT.model_fingerprint!r}, {COMPAT.params!r})
        print("ready", flush=True)
        sys.stdin.readline()  # all four start together
        with CheckpointStore({str(folder)!r}, ram_bytes=1 << 20, disk_bytes={BUDGET}) as store:
            for k in range({EACH}):
                tokens = [writer, k, *range(10)]
                store.put(Segment(compat, prefix_hash(tokens), None, 0, len(tokens), bytes({SEGMENT})))
            assert store.flush(60)
    """)
    procs = [subprocess.Popen([sys.executable, "-c", script, str(w)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True) for w in range(WRITERS)]
    try:
        for proc in procs:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        for proc in procs:
            assert proc.wait(120) == 0
    finally:
        for proc in procs:
            proc.kill()
    files = list_files(folder, headers=False)
    total = sum(f.size for f in files)
    assert files and total <= BUDGET, f"{total} bytes on disk for a budget of {BUDGET}"
    assert total >= BUDGET - 2 * (SEGMENT + 200)  # the budget was used, not emptied
