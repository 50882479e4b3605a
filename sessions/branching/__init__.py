"""Moving the context between branches: ``planner`` picks a route, ``BranchEngine`` runs it.

A checkpoint is taken in ``captures`` and restored in ``restore`` (reads: ``restore_reads``, ``swa_ring``).
May import ``llama`` and ``checkpoints``; never templates, the engine, the controller or the store.
"""
