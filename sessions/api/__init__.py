"""The core as its front ends see it: the app (``tui``), the command line (``sessions.cli``)
and the HTTP server (``sessions.serve``) import the core from here, from the small
modules at the top of ``sessions/`` (``tree``, ``sampling``, ``units``, ``text_safety``,
``errors``, ``events``...), and from nothing else (an import contract in ``pyproject.toml``).

By subject, so that a command loads only what it uses (the chat loads numpy and Jinja;
listing chats does not):

- ``chat``: ``SessionController``, the one door to a chat and its model, and what it
  hands out (snapshots, plans, what a switch or warm-ahead did, the chat's settings);
- ``runtime``: everything a chat runs on, opened and closed together (``open_runtime``);
- ``settings``: ``config.toml`` and the checks of the values the flags give;
- ``models``: model files on disk, downloads by name, devices and RPC servers;
- ``library``: the saved chats without a model (list, rename, delete, import, export);
- ``checkpoint_files``: the checkpoint folder as a whole (what it holds, a chat's share,
  clearing it).

The types here are the core's own words: none of the branch engine, the llama.cpp
bindings or the checkpoint store reaches a front end. ``docs/api.md`` says more.
"""
