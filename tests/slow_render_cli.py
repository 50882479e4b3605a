"""The command line with the chat template deadline far away, saying when a render begins.

``python -m tests.slow_render_cli ARG...`` runs ``llamachat ARG...`` with
``sandbox.CPU_SECONDS`` at ten minutes, so that only a stop can end a template that runs
long, and writes ``RENDERING`` on stderr as each render begins: a test sends its signal
once the render runs, not after a guessed delay.
"""

from __future__ import annotations

import sys

from sessions.cli import main
from sessions.templates import chat_template, sandbox

RENDERING = "slow-render-cli: rendering"


def _announcing(render):
    def announced(*args, **kwargs):
        print(RENDERING, file=sys.stderr, flush=True)
        return render(*args, **kwargs)

    return announced


if __name__ == "__main__":
    sandbox.CPU_SECONDS = 600.0
    chat_template.render_bounded = _announcing(chat_template.render_bounded)  # type: ignore[assignment]
    sys.exit(main(sys.argv[1:]))
