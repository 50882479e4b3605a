"""``python -m sessions.cli``: the subcommands without the Textual app."""

import sys

from sessions.cli.runner import main

if __name__ == "__main__":
    sys.exit(main())
