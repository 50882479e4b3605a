"""Crash and corruption trials: the program is killed and its files damaged on purpose.

``python -m tests.trials.crash`` and ``python -m tests.trials.corruption`` run the full
trials on demand; the ``test_*`` modules here run short forms of them in CI.
"""
