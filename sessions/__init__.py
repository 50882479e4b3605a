"""llamachat's UI-free core.

Everything that knows about conversations, storage, configuration and llama.cpp lives
here; the Textual app in ``tui/`` is a thin layer over it. This package must never import
``textual`` (a test runs ``import sessions`` in a fresh interpreter to prove it), and it
keeps heavy imports (``llama_cpp``, ``numpy``, ``gguf``) out of module import time so the
shell subcommands start fast.
"""

__version__ = "0.1.0"
