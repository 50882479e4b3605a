"""How many threads the tests give llama.cpp: two where the cores allow it (so the
several-thread path is what the exactness tests check), one when parallel test workers
share the cores.

llama.cpp's threads wait for each other at every step of a batch. Two workers each
running two threads on two cores keep taking the cores from each other's waiting
threads, and a test of a tenth of a second then takes minutes.
"""

from __future__ import annotations

import os

WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
TEST_THREADS = 2 if (os.cpu_count() or 1) >= 2 * WORKERS else 1
