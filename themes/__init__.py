"""llamachat's colour themes, one TOML file each (read by ``tui.theme_loader``).

A package only so ``importlib.resources`` can find the files wherever llamachat is
installed; user themes use the same format in the ``themes`` folder beside config.toml.
"""
