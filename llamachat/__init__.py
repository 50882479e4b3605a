"""The ``llamachat`` command: the one entry point, which picks the command line or the app.

The command line (``sessions.cli``) and the app (``tui``) are siblings over the
controller and never import each other; this package alone imports both. Nothing
imports it.
"""
