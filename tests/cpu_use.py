"""Where the suite's CPU goes, test by test: a pytest plugin and its summary.

The suite's time on two cores is its CPU, so this is what to measure before cutting it::

    LLAMACHAT_CPU_LOG=/tmp/cpu .venv/bin/python -m pytest -n auto -p tests.cpu_use
    .venv/bin/python -m tests.cpu_use /tmp/cpu

Each test's line holds its own CPU (every thread of the worker that ran it, fixtures
included) and its children's: the processes it started and waited for
(``RUSAGE_CHILDREN``; one killed and never waited for is not counted). The summary adds
them up by folder and by file.
"""

from __future__ import annotations

import collections
import json
import os
import resource
import sys
import time
from pathlib import Path

import pytest

ENV = "LLAMACHAT_CPU_LOG"


def _children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    folder = os.environ.get(ENV)
    if not folder:
        yield
        return
    wall, own, children = time.time(), time.process_time(), _children()
    yield
    line = {"id": item.nodeid, "wall": time.time() - wall, "cpu": time.process_time() - own,
            "children": _children() - children}
    Path(folder).mkdir(parents=True, exist_ok=True)
    with open(Path(folder) / f"cpu-{os.getpid()}.jsonl", "a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")


def summary(folder: Path, top: int = 30) -> str:
    """The totals, by folder and the ``top`` files, from a run's lines in ``folder``."""
    lines = [json.loads(text) for path in sorted(folder.glob("cpu-*.jsonl"))
             for text in path.read_text(encoding="utf-8").splitlines()]
    by_folder: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0, 0.0])
    by_file: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for line in lines:
        file = line["id"].split("::")[0]
        for key, table in (("/".join(file.split("/")[:2]), by_folder), (file, by_file)):
            table[key][0] += 1
            table[key][1] += line["cpu"]
            table[key][2] += line["children"]
    own, children = sum(line["cpu"] for line in lines), sum(line["children"] for line in lines)
    out = [f"{len(lines)} tests: {own:.1f} CPU s in the workers, {children:.1f} in the processes they started"]
    for title, table, count in (("by folder", by_folder, len(by_folder)), (f"the {top} costliest files", by_file, top)):
        out.append(f"\n{title} (tests, own CPU s, children's CPU s):")
        for name, (n, cpu, child) in sorted(table.items(), key=lambda kv: -(kv[1][1] + kv[1][2]))[:count]:
            out.append(f"  {name:70s} {n:5.0f} {cpu:8.1f} {child:8.1f}")
    return "\n".join(out)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(f"usage: python -m tests.cpu_use FOLDER (the {ENV} of a run)")
    print(summary(Path(sys.argv[1])))
