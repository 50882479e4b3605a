"""Progress of long work before a reply can start: reading the prompt, switching to a
branch whose messages must be decoded, loading a model.

A long prompt on a CPU can take minutes, and so can a switch to a branch saved nowhere;
the bar shows tokens done out of the total, an estimate of the time left
(``PromptProgressed``) and the key that stops it. The same widget shows the model
load fraction, and an indeterminate bar while the demo model is being made. It hides
itself when nothing is in progress so it costs no space.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Label, ProgressBar


def eta_words(seconds: float) -> str:
    if seconds < 1:
        return "under a second left"
    if seconds < 90:
        return f"about {seconds:.0f} s left"
    return f"about {seconds / 60:.0f} min left"


class PromptProgress(Horizontal):
    """A labelled progress bar that is only visible while something is in progress."""

    DEFAULT_CSS = """
    PromptProgress { height: 1; display: none; padding: 0 1; }
    PromptProgress > ProgressBar { width: auto; }
    PromptProgress > ProgressBar > Bar { width: 16; }  /* the words beside it say more */
    PromptProgress > Label { width: 1fr; padding: 0 1; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def compose(self) -> ComposeResult:
        yield ProgressBar(total=None, show_eta=False, show_percentage=True)
        yield Label(Text(""))

    # Shown and hidden by its display alone, not by a class: a class change styles the
    # widget and its children again, and a busy reply shows and hides the bar at every turn.
    @property
    def active(self) -> bool:
        return self.display

    label_text: str = ""
    """The plain text of the label, for tests and the status line."""

    def _say(self, text: str) -> None:
        self.label_text = text
        self.query_one(Label).update(Text(text))

    def show_prompt(self, done: int, total: int, eta_seconds: float, *, what: str = "reading the prompt",
                    stop_key: str = "") -> None:
        """Tokens evaluated: ``done`` of ``total``, for ``what`` (a prompt, a switch of
        branch); ``stop_key``: the key that stops it, said at the end."""
        self.display = True
        self.query_one(ProgressBar).update(total=max(total, 1), progress=done)
        stop = f" · {stop_key} stops" if stop_key else ""
        self._say(f"{what}: {done:,}/{total:,} tokens, {eta_words(eta_seconds)}{stop}")

    def show_fraction(self, what: str, fraction: float | None) -> None:
        """Other work: ``fraction`` in 0-1, or None when the amount of work is unknown."""
        self.display = True
        bar = self.query_one(ProgressBar)
        if fraction is None:
            bar.update(total=None)
        else:
            bar.update(total=100, progress=round(100 * max(0.0, min(1.0, fraction))))
        self._say(what)

    def hide(self) -> None:
        self.display = False
