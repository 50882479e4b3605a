"""The engine the controller talks to: its protocol, its assembly, and the child process that runs it.

``chat_engine`` joins a model's template to a ``BranchEngine``; ``process``, ``child`` and ``wire`` run it apart.
May import branching, templates, llama, rpc, checkpoints and config; never the controller or the store.
"""
