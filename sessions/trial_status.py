"""The exit status of a model's trial load when llama.cpp refuses the file without crashing.

Shared by the child that runs the trial (``sessions.llama.trial_load``) and the parent
that reads it (``sessions.discovery.probe``). A leaf of its own: the child imports nothing
else of the core, so its start stays short.
"""

REFUSED = 3
