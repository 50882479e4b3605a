"""llamachat's UI-free core.

Everything that knows about conversations, storage, configuration and llama.cpp lives
here; the Textual app in ``tui/`` is a thin layer over it. This package must never import
``textual`` (a test runs ``import sessions`` in a fresh interpreter to prove it), and it
keeps heavy imports (``llama_cpp``, ``numpy``, ``gguf``) out of module import time so the
shell subcommands start fast.
"""

import os

__version__ = "0.1.0"

# numpy's OpenBLAS starts a pool of threads when numpy is imported, and they spin before
# they sleep: about 65 ms of processor time in every process that imports numpy (an ask,
# the engine's child, a server, the app), for nothing, since llamachat does no matrix work
# in numpy (llama.cpp does all of it). Set here, before anything of the core imports numpy;
# a value the user set is kept, and a program that imported numpy first keeps its pool.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
